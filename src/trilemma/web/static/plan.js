// trilemma serve: the plan card: its figures with their 80% bands, the memory per GPU against
// capacity and headroom, and the step time as a waterfall (compute by operation, communication,
// pipeline bubble, optimizer, then what goodput loses). Loaded before app.js; uses its helpers (fmt*,
// view, $) when called.
"use strict";

// ------------------------------------------------------------------ the plan card

function layoutLabel(l) {
  let s = `TP ${l.tp} · PP ${l.pp} · DP ${l.dp}`;
  if (l.cp > 1) s += ` · CP ${l.cp}`;
  if (l.ep > 1) s += ` · EP ${l.ep}`;
  if (l.vp > 1) s += ` · VP ${l.vp}`;
  if (l.sp) s += " · SP";
  return s + ` · ZeRO-${l.zero} · recompute ${l.recompute} · micro-batch ${l.micro_batch}`;
}

// `point`: what `trilemma export` calls the plan: null, the solve's optimum; a frontier index; undefined,
// a plan it cannot name (a runner-up, an estimate), which the page does not export
function showPlan(plan, title, warnings, point) {
  view.shown = plan;
  view.shownPoint = point;
  view.shownSource = planSource(plan, point);
  $("export-plan").disabled = point === undefined || view.tab !== "solve";
  const t = plan.time, c = plan.cost, m = plan.model, hw = plan.hardware, loss = plan.loss;
  const tokens = plan.batch.tokens;
  const ratio = (x) => x / t.gpu_hours;  // energy scales with GPU-hours: its band is theirs
  const watts = (c.energy_kwh * KWH_J) / t.total_s;
  const rows = [
    ["model", `${m.name}`, `${fmtNum(m.params_total)} parameters`],
    ["tokens", fmtNum(tokens), `${sig(tokens / m.params_total, 2)} per parameter`],
    ["GPUs", `${hw.n_gpus} × ${hw.name} (${hw.precision})`, hw.family_calibrated ? "" : "chip family not calibrated"],
    ["layout", layoutLabel(plan.layout), `MFU ${Math.round(t.mfu * 100)}%`],
    ["step", fmtSeconds(t.step_s), t.step_s_low ? `${fmtSeconds(t.step_s_low)} – ${fmtSeconds(t.step_s_high)}` : ""],
    ["throughput", `${fmtNum(t.tokens_per_s)} tokens/s`, `goodput ${sig(t.goodput * 100)}%: the share of the wall time that trains`],
    ["time", fmtDuration(t.total_s), `${fmtDuration(t.total_s_low)} – ${fmtDuration(t.total_s_high)}`],
    ["GPU-hours", fmtNum(t.gpu_hours), `${fmtNum(t.gpu_hours_low)} – ${fmtNum(t.gpu_hours_high)}`],
    ["cost", fmtUSD(c.usd), `${fmtUSD(c.usd_low)} – ${fmtUSD(c.usd_high)}`],
    ["energy", fmtEnergy(c.energy_kwh),
     `${fmtEnergy(c.energy_kwh * ratio(t.gpu_hours_low))} – ${fmtEnergy(c.energy_kwh * ratio(t.gpu_hours_high))}`],
    ["power", fmtPower(watts), `average at the wall, PUE ${c.pue}; ${c.co2_kg < 1000 ? sig(c.co2_kg) + " kg" : sig(c.co2_kg / 1000) + " t"} CO2e`],
    loss ? ["loss", loss.mean.toFixed(3), `${loss.low.toFixed(3)} – ${loss.high.toFixed(3)} (${Math.round(loss.level * 100)}%)`]
      : ["loss", "not predicted", "a fine-tune: quality is bounded by the base model"],
  ];
  const scores = benchmarkItems(plan);
  for (const b of scores) {
    const note = [b.setting, b.regime ? `${b.regime}: band widened` : "", b.outside_fitted_range ? "tokens per parameter outside the published rows" : ""];
    rows.push([b.label, `${pct(b.value)}%`, `${pct(b.low)}% – ${pct(b.high)}% (80%); ${note.filter(Boolean).join("; ")}`]);
  }
  if (plan.finetune) {
    const ft = plan.finetune;
    rows.push(["fine-tune", `${ft.method}, ${fmtNum(ft.trainable_params)} trainable`,
               `${sig(ft.trainable_fraction * 100)}% of the parameters; optimizer ${ft.optimizer}`]);
  }
  if (plan.deploy) {
    const d = plan.deploy;
    rows.push(["deploy", `${d.device} (${d.precision}): ${sig(d.decode_tokens_per_s)} tokens/s`,
               `${sig(d.decode_tokens_per_s_low)} – ${sig(d.decode_tokens_per_s_high)} tokens/s; ` +
               `${fmtBytes(d.total_bytes)} of ${fmtBytes(d.usable_bytes)} (${d.fits ? "fits" : "does not fit"})`]);
  }
  const bands = {  // [low, point, high] of the rows with an 80% band
    step: [t.step_s_low, t.step_s, t.step_s_high], time: [t.total_s_low, t.total_s, t.total_s_high],
    "GPU-hours": [t.gpu_hours_low, t.gpu_hours, t.gpu_hours_high], cost: [c.usd_low, c.usd, c.usd_high],
    loss: loss ? [loss.low, loss.mean, loss.high] : null,
  };
  for (const b of scores) bands[b.label] = [b.low, b.value, b.high];
  const body = $("plan-table").querySelector("tbody");
  body.innerHTML = "";
  for (const [k, v, band] of rows) {
    const tr = body.insertRow();
    tr.dataset.row = k;
    const th = document.createElement("th");
    th.textContent = k;
    tr.appendChild(th);
    tr.insertCell().textContent = v;
    const b = tr.insertCell();
    b.textContent = band;
    b.className = "band";
    if (bands[k]) drawBand(b, ...bands[k]);
  }
  $("plan-title").textContent = title;
  drawMemory(plan.memory);
  setTimeout(() => { if (view.shown === plan) drawWaterfall(plan); }, 0);  // after the frontier: off the first paint
  view.warnings = warnings || [];
  drawWarnings();
  $("plan-card").hidden = false;
}

// a plan's expected benchmark scores with their 80% bands (the API's quality.benchmarks: fractions 0-1;
// none for a fine-tune or a classifier)
function benchmarkItems(plan) {
  return (plan.quality && plan.quality.benchmarks && plan.quality.benchmarks.items) || [];
}

function pct(x) {
  return String(Math.round(100 * x));
}

// 'MMLU 79% (65–88)': one benchmark of a plan as text ('' when the plan has no scores)
function scoreText(plan, name) {
  const b = benchmarkItems(plan).find((i) => i.name === name);
  return b ? `${b.label} ${pct(b.value)}% (${pct(b.low)}–${pct(b.high)})` : "";
}

// the plan's warnings in the page's words (drawn again once the More inputs exist: the first answer
// may come before the request schema, and a flag names its control only once that control is built)
function drawWarnings() {
  const ul = $("warnings");
  ul.innerHTML = "";
  for (const w of view.warnings || []) {
    const li = document.createElement("li");
    li.textContent = pageWords(w, view.tab);
    ul.appendChild(li);
  }
}

// the 80% band drawn beside its text: a bar from low to high on a log scale, the point marked where it
// sits in it (a band skewed high shows the point near the left)
function drawBand(cell, lo, v, hi) {
  if (!(lo > 0 && hi > lo && v >= lo && v <= hi)) return;
  const bar = document.createElement("span");
  bar.className = "bandbar";
  bar.title = "80% band (log scale)";
  const at = (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo));
  bar.dataset.at = String(at);
  const dot = document.createElement("i");
  dot.style.left = `${100 * at}%`;
  bar.appendChild(dot);
  cell.prepend(bar);
}

const MEMORY_COLOURS = { weights: "#1f77b4", gradients: "#ff7f0e", optimizer: "#2ca02c", activations: "#9467bd",
                         other: "#8c564b" };

function drawMemory(mem) {
  const bar = $("memory-bar"), legend = $("memory-legend");
  bar.innerHTML = "";
  legend.innerHTML = "";
  const cap = mem.capacity_bytes;
  for (const [part, bytes] of Object.entries(mem.breakdown)) {
    const seg = document.createElement("div");
    seg.className = "seg";
    seg.style.width = `${Math.min(100, (100 * bytes) / cap)}%`;
    seg.style.background = MEMORY_COLOURS[part] || "#999";
    seg.title = `${part}: ${fmtBytes(bytes)}`;
    bar.appendChild(seg);
    const key = document.createElement("span");
    key.innerHTML = `<i style="background:${MEMORY_COLOURS[part] || "#999"}"></i>`;
    key.append(`${part} ${fmtBytes(bytes)}`);
    legend.appendChild(key);
  }
  const limit = document.createElement("div");
  limit.className = "limit";
  limit.style.left = `${(100 * mem.usable_bytes) / cap}%`;
  limit.title = `usable: ${fmtBytes(mem.usable_bytes)} (headroom ${Math.round(mem.headroom * 100)}%)`;
  bar.appendChild(limit);
  const total = document.createElement("span");
  total.className = mem.fits ? "fits" : "oom";
  const verdict = mem.fits ? "fits" : mem.tight ? "tight: fits only at the band's favourable end" : "does not fit";
  total.textContent = `${fmtBytes(mem.per_gpu_bytes)} of ${fmtBytes(cap)} (${verdict}; ` +
    `line: the usable share after ${Math.round(mem.headroom * 100)}% headroom)`;
  legend.appendChild(total);
}

// time fields of the estimate document that are no part of one step's time
const NOT_STEP_PARTS = new Set(["step_s", "busy_s", "total_s", "total_s_low", "total_s_high", "step_s_low",
                                "step_s_high", "compute_s", "tokens_per_s"]);

// one step's time in parts, seconds: compute by operation, then every other *_s part the document gives
// (communication, bubble, optimizer), and what the parts leave of step_s; they sum to step_s
function stepParts(t) {
  const parts = [];
  const ops = Object.entries(t.ops_s || {}).filter(([, v]) => v > 0);
  const opsSum = ops.reduce((a, [, v]) => a + v, 0);
  for (const [op, v] of ops) parts.push([`compute: ${op.replace(/_/g, " ")}`, v]);
  if (Math.abs((t.compute_s || 0) - opsSum) > 1e-9 * t.step_s) parts.push(["compute: other", t.compute_s - opsSum]);
  for (const [k, v] of Object.entries(t)) {
    if (!k.endsWith("_s") || k.includes("_per_") || NOT_STEP_PARTS.has(k) || typeof v !== "number" || v === 0) continue;
    parts.push([k.replace(/_s$/, "").replace(/_comm$/, " comm").replace(/_/g, " ").replace(/^(tp|pp|dp|cp|ep) /,
                (m) => m.toUpperCase()), v]);
  }
  const rest = t.step_s - parts.reduce((a, [, v]) => a + v, 0);
  if (Math.abs(rest) > 1e-9 * t.step_s) parts.push(["other", rest]);
  return parts;
}

// after the step: the wall time per step lost to failures (checkpoint writes, rework, restarts) and to
// the rest of goodput, so the last bar is total_s / steps
function goodputParts(t) {
  const wall = t.total_s / t.steps;
  const lost = (t.reliability && t.reliability.lost_s) || {};
  const parts = Object.entries(lost).map(([k, v]) => [`lost: ${k.replace(/_/g, " ")}`, v / t.steps]);
  const rest = wall - t.step_s - parts.reduce((a, [, v]) => a + v, 0);
  if (Math.abs(rest) > 1e-9 * wall) parts.push(["lost: other goodput", rest]);
  return parts;
}

async function drawWaterfall(plan) {
  const Plotly = await plotlyReady;
  const t = plan.time;
  const step = stepParts(t), good = goodputParts(t);
  const x = [...step.map(([k]) => k), "step", ...good.map(([k]) => k), "wall time per step"];
  const y = [...step.map(([, v]) => v), 0, ...good.map(([, v]) => v), 0];
  const measure = [...step.map(() => "relative"), "total", ...good.map(() => "relative"), "total"];
  const trace = { type: "waterfall", orientation: "v", x, y, measure, hoverinfo: "x+text",
                  text: y.map((v, i) => (measure[i] === "total" ? "" : fmtSeconds(v))), textposition: "none",
                  connector: { line: { width: 1, color: "#b9c1ca" } } };
  const layout = { margin: { l: 60, r: 10, t: 10, b: 110 }, height: 300, showlegend: false,
                   yaxis: { title: { text: "seconds per step" } }, xaxis: { tickangle: -40 } };
  await Plotly.react("waterfall", [trace], layout, { displaylogo: false, responsive: true });
}

function fmtSeconds(s) { return s < 1 ? sig(s * 1000) + " ms" : sig(s) + " s"; }
