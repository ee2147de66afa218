// trilemma serve: the triangle explorer. Plain JavaScript, no build step.
// Every input change (debounced) posts the form to /api/solve or /api/estimate and draws the answer;
// the address bar's query string holds the inputs, so a link reproduces the page.
"use strict";

const $ = (id) => document.getElementById(id);
// suggestions only: any size up to the solver's 10T and any whole number of GPUs may be typed
const SIZES = ["50M", "100M", "300M", "1B", "3B", "7B", "13B", "30B", "70B", "175B", "400B", "1T", "3T", "10T"];
const PRECISIONS = ["bf16", "fp8", "fp16", "fp32", "tf32"];
const MAX_GPUS = ["8", "16", "32", "64", "128", "256", "512", "1024", "2048", "4096", "8192", "16384", "32768",
                  "65536", "131072"];
const DEBOUNCE_MS = 250;
const DAY_S = 86400, YEAR_S = 365.25 * DAY_S, KWH_J = 3.6e6;

const view = window.trilemma = { tab: "solve", seq: 0, pending: null, timer: null, solveReq: null, solveDoc: null,
               plotted: false, hardware: [] };

let resolvePlotly;
const plotlyReady = new Promise((resolve) => { resolvePlotly = resolve; });
let resolveMore;
const moreReady = new Promise((resolve) => { resolveMore = resolve; });  // the More inputs built
window.trilemmaPlotlyLoaded = () => { performance.mark("trilemma:plotly"); resolvePlotly(window.Plotly); };
if (window.Plotly) window.trilemmaPlotlyLoaded();  // it loaded (async, in the head) before this script ran

// ------------------------------------------------------------------ numbers as people read them

function sig(x, digits = 3) {
  return Number(x.toPrecision(digits)).toString();
}
function fmtNum(x) {
  const a = Math.abs(x);
  for (const [v, u] of [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]]) if (a >= v) return sig(x / v) + u;
  return sig(x);
}
function fmtUSD(x) { return "$" + fmtNum(x); }
function fmtDuration(s) {
  if (s < 60) return sig(s) + " s";
  if (s < 3600) return sig(s / 60) + " min";
  if (s < 2 * DAY_S) return sig(s / 3600) + " h";
  if (s < 2 * YEAR_S) return sig(s / DAY_S) + " days";
  return sig(s / YEAR_S) + " years";
}
function fmtBytes(b) {
  const gib = b / 2 ** 30;
  return gib >= 1024 ? sig(gib / 1024) + " TiB" : sig(gib) + " GiB";
}
function fmtEnergy(kwh) {
  if (kwh >= 1e6) return sig(kwh / 1e6) + " GWh";
  if (kwh >= 1e3) return sig(kwh / 1e3) + " MWh";
  return sig(kwh) + " kWh";
}
function fmtPower(w) {
  if (w >= 1e6) return sig(w / 1e6) + " MW";
  if (w >= 1e3) return sig(w / 1e3) + " kW";
  return sig(w) + " W";
}

// ------------------------------------------------------------------ sliders <-> text

function deadlineText(logDays) {
  const days = 10 ** logDays;
  return days < 2 ? sig(days * 24, 2) + "h" : sig(days, 2) + "d";
}
function parseDeadline(text) {
  const m = /^\s*([0-9.]+)\s*(h|d|w|y)?\s*$/i.exec(text);
  if (!m) return null;
  const per = { h: 1 / 24, d: 1, w: 7, y: 365.25 }[(m[2] || "d").toLowerCase()];
  return Math.log10(parseFloat(m[1]) * per);
}
function budgetText(logUsd) { return "$" + fmtNum(Number((10 ** logUsd).toPrecision(2))); }
function parseBudget(text) {
  const m = /^\s*\$?\s*([0-9.]+)\s*([kMBT])?\s*$/.exec(text);
  if (!m) return null;
  return Math.log10(parseFloat(m[1]) * ({ k: 1e3, M: 1e6, B: 1e9, T: 1e12 }[m[2]] || 1));
}
const SLIDERS = {
  "deadline": [deadlineText, parseDeadline],
  "budget": [budgetText, parseBudget],
  "target-loss": [(v) => Number(v).toFixed(2), (t) => (isFinite(parseFloat(t)) ? parseFloat(t) : null)],
};

// ------------------------------------------------------------------ the form and the address bar

function checked(containerId) {
  return [...$(containerId).querySelectorAll("input:checked")].map((i) => i.value);
}
function minimize() { return document.querySelector("input[name=minimize]:checked").value; }

function numberOrText(text) {
  const t = text.trim();
  return t !== "" && isFinite(Number(t)) ? Number(t) : t;
}

function solveRequest() {
  const free = minimize();
  const req = { minimize: free };
  // a pin left blank is not sent (a fine-tune has no loss to pin)
  if (free !== "time" && $("deadline").value.trim()) req.deadline = $("deadline").value.trim();
  if (free !== "cost" && $("budget").value.trim()) req.budget = $("budget").value.trim();
  if (free !== "loss" && $("target-loss").value.trim()) req["target-loss"] = numberOrText($("target-loss").value);
  const lo = $("params-lo").value.trim(), hi = $("params-hi").value.trim();
  if (lo || hi) req.params = lo && hi && lo !== hi ? `${lo}..${hi}` : lo || hi;
  const precisions = checked("precisions");
  if (precisions.length) req.precision = precisions;
  const gpus = checked("gpus");
  if (gpus.length !== $("gpus").querySelectorAll("input").length) req.gpu = gpus;
  if ($("max-gpus").value.trim()) req["max-gpus"] = $("max-gpus").value.trim();
  return Object.assign(req, moreValues("solve"));
}

function estimateRequest() {
  const req = { model: $("e-model").value.trim(), gpu: $("e-gpu").value, gpus: $("e-gpus").value.trim(),
                tokens: $("e-tokens").value.trim(), precision: $("e-precision").value };
  for (const k of ["tp", "pp", "zero", "micro-batch", "recompute"]) {
    const v = $("e-" + k).value.trim();
    if (v) req[k] = v;
  }
  return Object.assign(req, moreValues("estimate"));
}

const URL_KEYS = {  // query-string key -> [element id, kind]
  minimize: ["minimize", "radio"], deadline: ["deadline", "text"], budget: ["budget", "text"],
  loss: ["target-loss", "text"], lo: ["params-lo", "text"], hi: ["params-hi", "text"],
  precision: ["precisions", "checks"], gpu: ["gpus", "checks"], max_gpus: ["max-gpus", "text"],
  model: ["e-model", "text"], egpu: ["e-gpu", "text"], n: ["e-gpus", "text"], tokens: ["e-tokens", "text"],
  eprecision: ["e-precision", "text"], tp: ["e-tp", "text"], pp: ["e-pp", "text"], zero: ["e-zero", "text"],
  mb: ["e-micro-batch", "text"], recompute: ["e-recompute", "text"],
};

function writeUrl() {
  const q = new URLSearchParams();
  q.set("tab", view.tab);
  for (const [key, [id, kind]] of Object.entries(URL_KEYS)) {
    if (kind === "radio") q.set(key, minimize());
    else if (kind === "checks") {
      const all = $(id).querySelectorAll("input").length, on = checked(id);
      if (on.length !== all) q.set(key, on.join(","));
    } else if ($(id).value !== "" || ($(id).defaultValue || "") !== "") q.set(key, $(id).value);  // a blanked default too
  }
  writeMoreUrl(q);
  writeCompareUrl(q);
  history.replaceState(null, "", "?" + q.toString());
}

function readUrl() {
  const q = new URLSearchParams(location.search);
  if (q.get("tab") === "estimate") view.tab = "estimate";
  for (const [key, [id, kind]] of Object.entries(URL_KEYS)) {
    if (!q.has(key)) continue;
    const v = q.get(key);
    if (kind === "radio") {
      const r = document.querySelector(`input[name=minimize][value="${CSS.escape(v)}"]`);
      if (r) r.checked = true;
    } else if (kind === "checks") {
      setChecks(id, v.split(",").filter((x) => x));  // a name the list lacks gets its own box
    } else {
      const el = $(id);
      if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === v)) el.add(new Option(v, v));
      el.value = v;
    }
  }
  readMoreUrl(q);
}

function syncSliders() {
  for (const [id, [, parse]] of Object.entries(SLIDERS)) {
    const v = parse($(id).value);
    if (v !== null && isFinite(v)) $(id + "-slider").value = v;
  }
  const free = minimize();
  const pinned = { deadline: free !== "time", budget: free !== "cost", "target-loss": free !== "loss" };
  for (const [id, on] of Object.entries(pinned)) {
    $("pin-" + id).classList.toggle("free", !on);
    $(id).disabled = !on;
    $(id + "-slider").disabled = !on;
  }
}

// ------------------------------------------------------------------ talking to the API

async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
                                  body: JSON.stringify(body), signal: view.pending.signal });
  const doc = await res.json();
  return { status: res.status, doc };
}

function schedule() {
  writeUrl();
  syncSliders();
  clearTimeout(view.timer);
  view.timer = setTimeout(run, DEBOUNCE_MS);
}

async function run() {
  if (view.pending) view.pending.abort();
  view.pending = new AbortController();
  const me = ++view.seq;
  document.body.dataset.state = "loading";
  $("status").textContent = view.tab === "solve" ? "searching…" : "estimating…";
  const t0 = performance.now();
  try {
    if (view.tab === "solve") {
      const req = solveRequest();
      const { status, doc } = await post("/api/solve", req);
      performance.mark("trilemma:answer");
      if (me !== view.seq) return;
      if (status === 200 && !doc.infeasible) { view.solveReq = req; view.solveDoc = doc; }
      await showSolve(status, doc, performance.now() - t0);
    } else {
      const req = estimateRequest();
      const { status, doc } = await post("/api/estimate", req);
      if (me !== view.seq) return;
      view.estimateReq = req;
      showEstimate(status, doc, performance.now() - t0);
    }
  } catch (err) {
    if (err.name === "AbortError") return;
    showError({ error: "the server did not answer: " + err.message });
  }
  document.body.dataset.done = String(me);
}

function showError(doc) {
  document.body.dataset.state = "error";
  $("error").hidden = false;
  $("error").textContent = pageWords(doc.error || JSON.stringify(doc), view.tab);
  $("status").textContent = "not accepted";
  for (const el of document.querySelectorAll(".bad")) el.classList.remove("bad");
  clearMoreErrors();
  if (doc.field && showMoreError(view.tab, doc.field, $("error").textContent)) return;
  const field = doc.field && $(view.tab === "solve" ? doc.field : "e-" + doc.field);
  if (field) field.classList.add("bad");
}

function clearMessages() {
  $("error").hidden = true;
  $("infeasible").hidden = true;
  for (const el of document.querySelectorAll(".bad")) el.classList.remove("bad");
  clearMoreErrors();
}

async function showSolve(status, doc, ms) {
  clearMessages();
  if (status !== 200) { showError(doc); return; }
  if (doc.infeasible) {
    document.body.dataset.state = "infeasible";
    $("infeasible").hidden = false;
    $("infeasible-message").textContent = pageWords(doc.message.replace(/^no plan meets the pins: /, ""), "solve");
    $("frontier-box").hidden = true;
    $("plan-card").hidden = true;
    $("runners").innerHTML = "";
    $("status").textContent = `no plan meets the pins (${Math.round(ms)} ms)`;
    return;
  }
  $("frontier-box").hidden = false;
  const s = doc.search;
  $("status").textContent = `${fmtNum(s.candidates)} candidate plans, ${doc.frontier_points.time_s.length} on the ` +
    `frontier; answered in ${Math.round(ms)} ms (search ${sig(s.seconds * 1000)} ms)`;
  showRunners(doc);
  showPlan(doc.optimum, "Optimum: lowest " + doc.pins.minimize, doc.warnings, null);
  await drawFrontier(doc);
  setTimeout(() => { if (view.solveDoc === doc) drawTriangle(doc); }, 0);  // off the first paint
  await moreReady;  // every control built, the warnings in the page's words
  document.body.dataset.state = "ready";
  performance.mark("trilemma:ready");
}

function showEstimate(status, doc, ms) {
  clearMessages();
  $("frontier-box").hidden = true;
  $("runners").innerHTML = "";
  if (status !== 200) { showError(doc); return; }
  if (doc.infeasible) {
    document.body.dataset.state = "infeasible";
    $("infeasible").hidden = false;
    $("infeasible-message").textContent = pageWords(doc.message, "estimate");
    $("plan-card").hidden = true;
    return;
  }
  $("status").textContent = `estimated in ${Math.round(ms)} ms`;
  showPlan(doc, "Estimate", doc.warnings);
  document.body.dataset.state = "ready";
}

// a runner-up against the optimum (solve's `delta` and `breaks`): what its one lever buys or costs
function deltaText(plan) {
  const d = plan.delta;
  const sign = (x) => (x > 0 ? "+" : x < 0 ? "−" : "±");
  const parts = [`${sign(d.time_s)}${fmtDuration(Math.abs(d.time_s))}`, `${sign(d.usd)}${fmtUSD(Math.abs(d.usd))}`];
  if (d.loss !== null && d.loss !== undefined) parts.push(`${sign(d.loss)}${Math.abs(d.loss).toFixed(3)} loss`);
  const pins = plan.breaks && plan.breaks.length ? `misses ${plan.breaks.join(", ")}` : "meets the pins";
  return ` (Δ ${parts.join(", ")}; ${pins})`;
}

function showRunners(doc) {
  const box = $("runners");
  box.innerHTML = "";
  const plans = [["optimum", doc.optimum], ...doc.runners_up.map((p) => [p.differs_in, p])];
  const bench = doc.pins && doc.pins.target_score ? doc.pins.target_score.benchmark : "mmlu";  // as solve's table
  for (const [why, plan] of plans) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "runner";
    const score = scoreText(plan, bench);
    const loss = (plan.loss ? `loss ${plan.loss.mean.toFixed(3)}` : "no loss (fine-tune)") + (score ? `, ${score}` : "");
    b.textContent = `${why}: ${plan.hardware.n_gpus}× ${plan.hardware.name}, ${fmtNum(plan.model.params_total)} params, ` +
      `${fmtDuration(plan.time.total_s)}, ${fmtUSD(plan.cost.usd)}, ${loss}` + (plan.delta ? deltaText(plan) : "");
    b.addEventListener("click", () => (why === "optimum" ? showPlan(plan, "Optimum", doc.warnings, null)
                                                         : showPlan(plan, "Runner-up: " + why, [])));
    box.appendChild(b);
  }
}

// ------------------------------------------------------------------ start

function fillStatic() {
  for (const s of SIZES) $("sizes").appendChild(new Option(s, s));
  for (const p of PRECISIONS) {
    const label = document.createElement("label");
    label.innerHTML = `<input type="checkbox" value="${p}"${p === "bf16" ? " checked" : ""}> ${p}`;
    $("precisions").appendChild(label);
    $("e-precision").add(new Option(p, p));
  }
  for (const n of MAX_GPUS) $("gpu-counts").appendChild(new Option(n, n));
}

function fillPresets(presets) {
  view.hardware = presets.hardware.map((h) => h.name).filter((n) => n !== "local");
  for (const name of view.hardware) {
    const label = document.createElement("label");
    label.innerHTML = `<input type="checkbox" value="${name}" checked> ${name}`;
    $("gpus").appendChild(label);
    if (![...$("e-gpu").options].some((o) => o.value === name)) $("e-gpu").add(new Option(name, name));
  }
  if (!new URLSearchParams(location.search).has("egpu")) {
    $("e-gpu").value = view.hardware.includes("a100-80gb") ? "a100-80gb" : view.hardware[0];
  }
  for (const m of presets.models) $("model-presets").appendChild(new Option(m.name, m.name));
}

function selectTab(tab) {
  view.tab = tab;
  $("solve-form").hidden = tab !== "solve";
  $("estimate-form").hidden = tab !== "estimate";
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === tab);
}

async function start() {
  const presets = fetch("/api/presets", { method: "POST", headers: { "Content-Type": "application/json" },
                                          body: "{}" }).then((r) => r.json());
  const schemas = fetch("/openapi.json").then((r) => r.json()).then((o) => o.components.schemas);
  fillStatic();
  // a solve over every GPU type (the link names none) needs nothing from the presets: it is asked for at
  // once, while the presets arrive and plotly.js loads; otherwise after the GPU pickers are filled
  const q = new URLSearchParams(location.search);
  const early = q.get("tab") !== "estimate" && !q.has("gpu") && !urlHasMore(q);
  if (early) {
    readUrl();
    selectTab(view.tab);
    syncSliders();
    run();
  }
  fillPresets(await presets);
  performance.mark("trilemma:presets");
  const fields = await schemas;
  for (const tab of Object.keys(MORE)) buildMore(tab, fields);
  drawWarnings();
  resolveMore();
  if (!early) {
    readUrl();
    selectTab(view.tab);
    syncSliders();
  }
  for (const id of Object.keys(SLIDERS)) {
    $(id + "-slider").addEventListener("input", (ev) => {
      $(id).value = SLIDERS[id][0](ev.target.value);
      schedule();
    });
  }
  for (const form of [$("solve-form"), $("estimate-form")]) {
    form.addEventListener("input", (ev) => { if (!ev.target.id.endsWith("-slider")) schedule(); });
    form.addEventListener("change", (ev) => { if (!ev.target.id.endsWith("-slider")) schedule(); });
  }
  wireDownloads();
  wireScenario();
  wireCompare();
  $("gpu-all").addEventListener("click", () => {
    for (const box of $("gpus").querySelectorAll("input")) box.checked = true;
    schedule();
  });
  for (const b of document.querySelectorAll(".tab")) {
    b.addEventListener("click", () => { selectTab(b.dataset.tab); schedule(); });
  }
  writeUrl();
  if (!early) run();
}

start();
