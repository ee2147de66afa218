// trilemma serve: pin up to three plans and compare them side by side. Each pinned plan is one column
// of the same figures the plan card shows; a cell that differs from the first pinned plan's is
// highlighted. The address bar keeps each pinned plan as the request that gives it (a `compare` key
// each), so a link reopens the comparison. Loaded before app.js; uses its helpers (fmt*, layoutLabel,
// view, $, writeUrl) when called.
"use strict";

const MAX_COMPARED = 3;

// the figures compared, [row name, the plan's figure as text]
function compareRows(plan) {
  const t = plan.time, c = plan.cost, m = plan.model, hw = plan.hardware, mem = plan.memory;
  return [
    ["model", m.name],
    ["parameters", fmtNum(m.params_total)],
    ["tokens", fmtNum(plan.batch.tokens)],
    ["GPUs", `${hw.n_gpus} × ${hw.name} (${hw.precision})`],
    ["layout", layoutLabel(plan.layout)],
    ["step", fmtSeconds(t.step_s)],
    ["MFU", `${Math.round(t.mfu * 100)}%`],
    ["time", fmtDuration(t.total_s)],
    ["cost", fmtUSD(c.usd)],
    ["energy", fmtEnergy(c.energy_kwh)],
    ["loss", plan.loss ? plan.loss.mean.toFixed(3) : "not predicted"],
    ["benchmark", scoreText(plan, "mmlu") || "not predicted"],
    ["memory per GPU", `${fmtBytes(mem.per_gpu_bytes)} of ${fmtBytes(mem.capacity_bytes)}`],
  ];
}

// how to ask the server for a shown plan again: the solve request and which of its plans (the
// optimum, a runner-up, a frontier point), or the estimate request; null for a plan it cannot name
function planSource(plan, point) {
  if (view.tab === "estimate") return view.estimateReq ? { estimate: view.estimateReq } : null;
  const d = view.solveDoc;
  if (!d || !view.solveReq) return null;
  if (typeof point === "number") return { solve: view.solveReq, point };
  if (plan === d.optimum) return { solve: view.solveReq, optimum: true };
  const i = d.runners_up.indexOf(plan);
  return i >= 0 ? { solve: view.solveReq, runner: i } : null;
}

function keepCompared() {
  view.compareKeys = view.compared.filter((c) => c.source).map(({ title, source }) => JSON.stringify({ title, ...source }));
  writeUrl();
}

function writeCompareUrl(q) {
  for (const key of view.compareKeys || []) q.append("compare", key);
}

function pinShown() {
  if (!view.shown || view.compared.length >= MAX_COMPARED) return;
  view.compared.push({ title: $("plan-title").textContent, plan: view.shown, source: view.shownSource });
  drawCompare();
  keepCompared();
}

function unpin(i) {
  view.compared.splice(i, 1);
  drawCompare();
  keepCompared();
}

// one kept plan asked for again (null when the server no longer gives it)
async function fetchKept(key) {
  const ask = (path, body) => fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
                                            body: JSON.stringify(body) }).then((r) => (r.ok ? r.json() : null));
  let s;
  try { s = JSON.parse(key); } catch { return null; }
  let plan = null;
  if (s.estimate) plan = await ask("/api/estimate", s.estimate);
  else if (s.solve && typeof s.point === "number") plan = await ask("/api/solve/point", { solve: s.solve, point: s.point });
  else if (s.solve) {
    const d = await ask("/api/solve", s.solve);
    plan = d && !d.infeasible ? (s.optimum ? d.optimum : d.runners_up[s.runner]) : null;
  }
  if (!plan || plan.infeasible) return null;
  const { title, ...source } = s;
  return { title: String(title || "plan"), plan, source };
}

// the plans the link names, in its order; body[data-compared] says how many came back
async function restoreCompared(keys) {
  const plans = (await Promise.all(keys.slice(0, MAX_COMPARED).map(fetchKept))).filter((p) => p);
  view.compared.push(...plans.slice(0, MAX_COMPARED - view.compared.length));
  drawCompare();
  keepCompared();
  document.body.dataset.compared = String(view.compared.length);
}

function drawCompare() {
  const box = $("compare");
  const table = $("compare-table");
  table.innerHTML = "";
  box.hidden = view.compared.length === 0;
  $("pin-plan").disabled = view.compared.length >= MAX_COMPARED;
  if (box.hidden) return;
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("th"));
  view.compared.forEach(({ title }, i) => {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = title + " ";
    const x = document.createElement("button");
    x.type = "button";
    x.className = "small";
    x.textContent = "×";
    x.setAttribute("aria-label", `stop comparing ${title}`);
    x.addEventListener("click", () => unpin(i));
    th.appendChild(x);
    head.appendChild(th);
  });
  const columns = view.compared.map(({ plan }) => compareRows(plan));
  const body = table.createTBody();
  columns[0].forEach(([name], r) => {
    const tr = body.insertRow();
    tr.dataset.row = name;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = name;
    tr.appendChild(th);
    for (const col of columns) {
      const td = tr.insertCell();
      td.textContent = col[r][1];
      if (col[r][1] !== columns[0][r][1]) td.className = "differs";
    }
  });
}

function wireCompare() {
  view.compared = [];
  view.compareKeys = new URLSearchParams(location.search).getAll("compare");
  $("pin-plan").addEventListener("click", pinShown);
  if (view.compareKeys.length) restoreCompared(view.compareKeys);
}
