// trilemma serve: pin up to three plans and compare them side by side. Each pinned plan is one column
// of the same figures the plan card shows; a cell that differs from the first pinned plan's is
// highlighted. Loaded before app.js; uses its helpers (fmt*, layoutLabel, view, $) when called.
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

function pinShown() {
  if (!view.shown || view.compared.length >= MAX_COMPARED) return;
  view.compared.push({ title: $("plan-title").textContent, plan: view.shown });
  drawCompare();
}

function unpin(i) {
  view.compared.splice(i, 1);
  drawCompare();
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
  $("pin-plan").addEventListener("click", pinShown);
}
