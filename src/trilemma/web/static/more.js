// trilemma serve: "More inputs", one per request field the page has no control for, built from the
// request schema the server publishes (/openapi.json: each field's name, description, type, default),
// so a new request field reaches the page by construction. Bounds and refusals come from the server:
// a 422 naming a field is shown beside its control. Loaded before app.js.
"use strict";

const MORE = { solve: "SolveRequest", estimate: "EstimateRequest" };  // tab -> its body's schema
const MORE_TITLE = "More inputs";
const URL_PREFIX = { solve: "s.", estimate: "e." };  // a field's key in the address bar

// the types a schema property accepts, e.g. ["string", "number", "null"]
function fieldTypes(prop) {
  return (prop.anyOf || [prop]).map((t) => t.type);
}

function moreControlId(tab, key) { return `more-${tab}-${key}`; }

// one field's control: yes/no (and default) for a flag, a text box for anything else
function moreControl(tab, key, prop) {
  const id = moreControlId(tab, key);
  const row = document.createElement("div");
  row.className = "more-field";
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = key.replace(/-/g, " ");
  let input;
  if (fieldTypes(prop).every((t) => t === "boolean" || t === "null")) {
    input = document.createElement("select");
    const dflt = prop.default === true ? "on" : prop.default === false ? "off" : "auto";
    for (const [v, text] of [["", `default (${dflt})`], ["true", "on"], ["false", "off"]]) input.add(new Option(text, v));
  } else {
    input = document.createElement("input");
    input.type = "text";
    input.size = 10;
    if (prop.default !== undefined && prop.default !== null) input.placeholder = String(prop.default);
  }
  input.id = id;
  input.dataset.key = key;
  input.dataset.text = String(fieldTypes(prop).includes("string"));  // else sent as a number
  const help = document.createElement("small");
  help.id = id + "-help";
  help.textContent = prop.description || "";
  input.setAttribute("aria-describedby", help.id);
  const err = document.createElement("small");
  err.className = "field-error";
  err.id = id + "-error";
  err.setAttribute("role", "alert");
  row.append(label, input, help, err);
  return row;
}

// the section of one tab's form: every property of its request not on the page already
function buildMore(tab, schemas) {
  const props = schemas[MORE[tab]].properties;
  const box = document.createElement("details");
  box.id = `${tab}-more`;
  box.className = "more";
  const summary = document.createElement("summary");
  summary.textContent = MORE_TITLE;
  box.appendChild(summary);
  for (const [key, prop] of Object.entries(props)) {
    if (key in CONTROL_LABELS[tab]) continue;
    box.appendChild(moreControl(tab, key, prop));
  }
  $(`${tab}-form`).appendChild(box);
}

function moreInputs(tab) {
  const box = $(`${tab}-more`);
  return box ? [...box.querySelectorAll("[data-key]")] : [];
}

// the label of a "More inputs" control, for pageWords; null when the tab has none for `key`
function moreLabel(tab, key) {
  return $(moreControlId(tab, key)) ? `${key.replace(/-/g, " ")} (${MORE_TITLE})` : null;
}

// the values set in the section, by JSON key (flags as true/false)
function moreValues(tab) {
  const req = {};
  for (const el of moreInputs(tab)) {
    const v = el.value.trim();
    if (v === "") continue;
    if (el.tagName === "SELECT") req[el.dataset.key] = v === "true";
    else req[el.dataset.key] = el.dataset.text === "true" || !isFinite(Number(v)) ? v : Number(v);
  }
  return req;
}

function writeMoreUrl(q) {
  for (const tab of Object.keys(MORE)) {
    for (const el of moreInputs(tab)) if (el.value !== "") q.set(URL_PREFIX[tab] + el.dataset.key, el.value);
  }
}

function readMoreUrl(q) {
  for (const tab of Object.keys(MORE)) {
    for (const el of moreInputs(tab)) {
      const v = q.get(URL_PREFIX[tab] + el.dataset.key);
      if (v === null) continue;
      el.value = v;
      $(`${tab}-more`).open = true;
    }
  }
}

function urlHasMore(q) {
  return [...q.keys()].some((k) => Object.values(URL_PREFIX).some((p) => k.startsWith(p)));
}

// a refusal naming one of the section's fields: the line beside its control, the section opened
function showMoreError(tab, field, message) {
  const el = $(moreControlId(tab, field));
  if (!el) return false;
  el.classList.add("bad");
  $(el.id + "-error").textContent = message;
  $(`${tab}-more`).open = true;
  return true;
}

function clearMoreErrors() {
  for (const el of document.querySelectorAll(".more .field-error")) el.textContent = "";
}
