// trilemma serve: scenario files on the page. Load: the file's text goes to /api/scenario (the same
// checks as `trilemma solve FILE`), and its keys set the solve tab's controls (a key the file leaves
// out is left blank, so the request is the file's). Save: the solve tab's request as the same TOML.
// Loaded before app.js; uses its helpers when called.
"use strict";

const PIN_IDS = ["deadline", "budget", "target-loss"];  // JSON key = the control's id

// a value as TOML: text quoted (JSON's escapes are TOML's), numbers and true/false bare, lists, tables
function tomlValue(v) {
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(", ")}]`;
  if (v !== null && typeof v === "object") {
    return `{ ${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)} = ${tomlValue(x)}`).join(", ")} }`;
  }
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  if (typeof v === "boolean") return String(v);
  return JSON.stringify(String(v));
}

// the solve request as a scenario file (its keys: solve's flags)
function scenarioToml(req) {
  const lines = ["# trilemma solve scenario, saved by `trilemma serve`: run it with `trilemma solve FILE`"];
  for (const [k, v] of Object.entries(req)) lines.push(`${k} = ${tomlValue(v)}`);
  return lines.join("\n") + "\n";
}

function listOf(v) {
  return (Array.isArray(v) ? v : String(v).split(",")).map((x) => String(x).trim()).filter((x) => x);
}

// tick the boxes of `names` in a check list, adding a box for a name it lacks
function setChecks(id, names) {
  const on = new Set(names);
  for (const box of $(id).querySelectorAll("input")) { box.checked = on.has(box.value); on.delete(box.value); }
  for (const name of on) {
    const label = document.createElement("label"), input = document.createElement("input");
    Object.assign(input, { type: "checkbox", value: name, checked: true });
    label.append(input, " " + name);
    $(id).appendChild(label);
  }
}

// the solve tab's controls set to the request `req` (JSON keys); a key with no control is refused
function fillSolve(req) {
  const has = (k) => req[k] !== undefined && req[k] !== null;
  const free = has("minimize") ? String(req.minimize) : !has("deadline") ? "time" : !has("budget") ? "cost" : "loss";
  const radio = document.querySelector(`input[name=minimize][value="${CSS.escape(free)}"]`);
  if (radio) radio.checked = true;
  for (const id of PIN_IDS) $(id).value = has(id) ? String(req[id]) : "";
  const [lo, hi] = has("params") ? String(req.params).split("..") : ["", ""];
  $("params-lo").value = lo.trim();
  $("params-hi").value = (hi === undefined ? lo : hi).trim();
  setChecks("precisions", has("precision") ? listOf(req.precision) : ["bf16"]);
  setChecks("gpus", has("gpu") ? listOf(req.gpu) : view.hardware);
  $("max-gpus").value = has("max-gpus") ? String(req["max-gpus"]) : "";
  const main = new Set(["minimize", ...PIN_IDS, "params", "precision", "gpu", "max-gpus"]);
  const missing = [];
  for (const el of moreInputs("solve")) el.value = "";
  for (const [k, v] of Object.entries(req)) {
    if (main.has(k) || v === null) continue;
    const el = $(moreControlId("solve", k));
    if (!el) { missing.push(k); continue; }
    const table = v !== null && typeof v === "object" && !Array.isArray(v);  // a price table: GPU = USD
    el.value = table ? Object.entries(v).map(([g, x]) => `${g}=${x}`).join(",")
      : typeof v === "boolean" ? String(v) : Array.isArray(v) ? v.join(",") : String(v);
    if ($("solve-more").contains(el)) $("solve-more").open = true;
  }
  return missing;
}

async function loadScenario(file) {
  const text = await file.text();
  const res = await fetch("/api/scenario", { method: "POST", headers: { "Content-Type": "application/json" },
                                             body: JSON.stringify({ toml: text }) });
  const doc = await res.json();
  selectTab("solve");
  if (res.status !== 200) { showError(doc); return; }
  const missing = fillSolve(doc.request);
  if (missing.length) {
    showError({ field: "scenario", error: `scenario: ${missing.join(", ")} has no control on the page` });
    return;
  }
  $("scenario-name").textContent = file.name;
  schedule();
}

function saveScenario() {
  saveFile("trilemma-scenario.toml", "application/toml", scenarioToml(solveRequest()));
}

function wireScenario() {
  $("scenario-file").addEventListener("change", (ev) => {
    const file = ev.target.files[0];
    if (file) loadScenario(file);
    ev.target.value = "";
  });
  $("save-scenario").addEventListener("click", saveScenario);
}
