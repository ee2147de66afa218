// trilemma serve: every request field the page has no main control for, built from the request schema
// the server publishes (/openapi.json: each field's name, description, type, default), so a new request
// field reaches the page by construction. The fields are grouped; a field no group names lands in
// "Other inputs", never off the page. "Model and data" is shown; the other groups sit inside "More
// inputs", one click away. Bounds and refusals come from the server: a 422 naming a field is shown
// beside its control. Loaded before app.js.
"use strict";

const MORE = { solve: "SolveRequest", estimate: "EstimateRequest" };  // tab -> its body's schema
const MORE_TITLE = "More inputs";
const URL_PREFIX = { solve: "s.", estimate: "e." };  // a field's key in the address bar
// [title, JSON keys, shown without a click]; a key a tab's request lacks is skipped
const MORE_GROUPS = [
  ["Model and data", ["model", "tokens", "unique-tokens", "target-score", "law", "task"], true],
  ["Sequence and batch", ["seq", "global-batch", "micro-batch", "batch"]],
  ["Precision and memory", ["memory-headroom", "host-memory"]],
  ["Layout pins", ["tp", "pp", "cp", "ep", "vp", "sp", "zero", "recompute"]],
  ["Stack and trainer", ["stack", "trainer", "flash", "softmax-passes", "fused-loss", "compile", "async-tp"]],
  ["Fine-tune", ["finetune", "trainable-layers", "lora-rank", "lora-alpha", "lora-targets", "base-precision",
                 "optimizer", "offload"]],
  ["Deployment", ["deploy", "deploy-precision", "runtime", "context", "min-tokens-per-s", "inference-tokens", "device-kwh"]],
  ["Price", ["price", "provider", "market", "own", "amortise", "site-kwh", "utilisation"]],
  ["Power and carbon", ["max-power", "pue", "region", "host-power"]],
  ["Cluster", ["gpus-per-node", "intra-node-bw", "inter-node-bw"]],
  ["Reliability", ["failure-rate", "restart", "storage-bw", "goodput"]],
  ["Search", ["rank", "frontier-all"]],
];
const OTHER_GROUP = "Other inputs";

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
  // items (a list, a table or one value: --price GPU=USD, repeatable): comma-separated, sent as a list
  input.dataset.items = String(fieldTypes(prop).includes("array") && fieldTypes(prop).includes("object"));
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

function groupBox(tab, title, shown) {
  const box = document.createElement("fieldset");
  box.className = "more-group";
  box.dataset.group = title;
  box.id = `${tab}-group-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;
  const legend = document.createElement("legend");
  legend.textContent = title;
  box.appendChild(legend);
  if (shown) box.classList.add("shown");
  return box;
}

// one tab's groups: every property of its request not on the page already, each in its group (a
// property no group names in "Other inputs")
function buildMore(tab, schemas) {
  const props = schemas[MORE[tab]].properties;
  const details = document.createElement("details");
  details.id = `${tab}-more`;
  details.className = "more";
  const summary = document.createElement("summary");
  summary.textContent = MORE_TITLE;
  details.appendChild(summary);
  const placed = new Set(Object.keys(CONTROL_LABELS[tab]));
  const form = $(`${tab}-form`);
  const groups = [...MORE_GROUPS, [OTHER_GROUP, Object.keys(props)]];
  for (const [title, keys, shown] of groups) {
    const box = groupBox(tab, title, shown);
    for (const key of keys) {
      if (!(key in props) || placed.has(key)) continue;
      placed.add(key);
      box.appendChild(moreControl(tab, key, props[key]));
    }
    if (box.querySelector("[data-key]")) (shown ? form : details).appendChild(box);
  }
  form.appendChild(details);
}

function moreInputs(tab) {
  return [...$(`${tab}-form`).querySelectorAll(".more-group [data-key]")];
}

// the label of a "More inputs" control, for pageWords; null when the tab has none for `key`
function moreLabel(tab, key) {
  const el = $(moreControlId(tab, key));
  if (!el) return null;
  const group = el.closest(".more-group");
  const where = group.classList.contains("shown") ? group.dataset.group : `${MORE_TITLE} › ${group.dataset.group}`;
  return `${key.replace(/-/g, " ")} (${where})`;
}

// the values set in the section, by JSON key (flags as true/false)
function moreValues(tab) {
  const req = {};
  for (const el of moreInputs(tab)) {
    const v = el.value.trim();
    if (v === "") continue;
    if (el.tagName === "SELECT") req[el.dataset.key] = v === "true";
    else if (el.dataset.items === "true") req[el.dataset.key] = v.split(",").map((x) => x.trim()).filter((x) => x);
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
      if ($(`${tab}-more`).contains(el)) $(`${tab}-more`).open = true;
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
  if ($(`${tab}-more`).contains(el)) $(`${tab}-more`).open = true;
  return true;
}

function clearMoreErrors() {
  for (const el of document.querySelectorAll(".more .field-error")) el.textContent = "";
}
