// trilemma serve: the Pareto frontier drawn with plotly.js, and a clicked point's plan. Loaded before
// app.js; uses its helpers (fmt*, showPlan, view) when called.
"use strict";

async function drawFrontier(doc) {
  const Plotly = await plotlyReady;
  const f = doc.frontier_points;
  const n = f.time_s.length;
  const idx = [...Array(n).keys()];
  const hasLoss = Boolean(doc.optimum.loss);  // a fine-tune predicts none
  const lossText = (l) => (Number.isFinite(l) ? `, loss ${l.toFixed(3)}` : "");
  const text = idx.map((i) => {
    const c = f.configs[f.config[i]];
    return `${c.model}<br>${c.n_gpus}× ${c.gpu} ${c.precision}, ${fmtNum(f.tokens[i])} tokens<br>` +
      `${fmtDuration(f.time_s[i])}, ${fmtUSD(f.usd[i])}${lossText(f.loss[i])}` +
      (f.feasible[i] ? "" : "<br>(outside the pins)");
  });
  // two traces (within the pins, outside them) with one marker style each: per-point styles draw slower
  const trace = (within) => {
    const ids = idx.filter((i) => f.feasible[i] === within);
    return {
      type: "scatter", mode: "markers", name: within ? "frontier (within the pins)" : "frontier (outside them)",
      x: ids.map((i) => f.time_s[i] / DAY_S), y: ids.map((i) => f.usd[i]), customdata: ids,
      text: ids.map((i) => text[i]), hoverinfo: "text",
      marker: hasLoss ? { color: ids.map((i) => f.loss[i]), cmin: lossRange[0], cmax: lossRange[1], colorscale: "Viridis",
                          reversescale: true, showscale: within, size: within ? 7 : 4, opacity: within ? 0.9 : 0.25,
                          colorbar: { title: { text: "loss" }, thickness: 12 } }
        : { color: "#3b6fb6", size: within ? 7 : 4, opacity: within ? 0.9 : 0.25 },
    };
  };
  // open a decade around the pins and the optimum (as `solve --plot`); the autoscale button shows every point
  const around = (vals) => {
    const v = vals.filter((x) => x > 0 && Number.isFinite(x));
    return [Math.log10(Math.min(...v)) - 1, Math.log10(Math.max(...v)) + 1];
  };
  const o = doc.optimum, p = doc.pins;
  const xRange = around([o.time.total_s / DAY_S, p.deadline_s ? p.deadline_s / DAY_S : 0]);
  const yRange = around([o.cost.usd, p.budget_usd || 0]);
  const lossRange = hasLoss ? shownLossRange(f, xRange, yRange) : [0, 1];
  const outside = trace(false), points = trace(true);
  // the optimum and the runners-up with their 80% bands of time and cost as error bars, hover: key figures
  const band = (plans, v, lo, hi, scale) => ({
    type: "data", symmetric: false, thickness: 1, width: 3,
    array: plans.map((q) => (hi(q) - v(q)) / scale), arrayminus: plans.map((q) => (v(q) - lo(q)) / scale) });
  const marked = (plans, name, marker, label) => ({
    type: "scatter", mode: "markers", name, x: plans.map((q) => q.time.total_s / DAY_S), y: plans.map((q) => q.cost.usd),
    text: plans.map((q) => `${label(q)}<br>${q.hardware.n_gpus}× ${q.hardware.name}, ${q.model.name}<br>` +
      `${fmtDuration(q.time.total_s)} (${fmtDuration(q.time.total_s_low)} – ${fmtDuration(q.time.total_s_high)}), ` +
      `${fmtUSD(q.cost.usd)} (${fmtUSD(q.cost.usd_low)} – ${fmtUSD(q.cost.usd_high)})` +
      (q.loss ? `<br>loss ${q.loss.mean.toFixed(3)} (${q.loss.low.toFixed(3)} – ${q.loss.high.toFixed(3)})` : "")),
    hoverinfo: "text", marker,
    error_x: { ...band(plans, (q) => q.time.total_s, (q) => q.time.total_s_low, (q) => q.time.total_s_high, DAY_S),
               color: marker.color },
    error_y: { ...band(plans, (q) => q.cost.usd, (q) => q.cost.usd_low, (q) => q.cost.usd_high, 1), color: marker.color },
  });
  const best = marked([o], "optimum (80% bands)", { symbol: "star", size: 20, color: "#d62728",
                                                    line: { color: "#fff", width: 1 } }, () => "optimum");
  const ups = doc.runners_up;
  const runners = marked(ups, "runners-up", { symbol: "diamond", size: 11, color: "#ff7f0e",
                                              line: { color: "#fff", width: 1 } }, (q) => "runner-up: " + q.differs_in);
  const shapes = [];
  if (p.deadline_s) shapes.push({ type: "line", xref: "x", yref: "paper", x0: p.deadline_s / DAY_S,
                                  x1: p.deadline_s / DAY_S, y0: 0, y1: 1, line: { dash: "dash", width: 1 } });
  if (p.budget_usd) shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: p.budget_usd,
                                  y1: p.budget_usd, line: { dash: "dash", width: 1 } });
  const layout = {
    margin: { l: 70, r: 10, t: 10, b: 50 }, height: 400, showlegend: true,
    legend: { orientation: "h", y: -0.18 }, hovermode: "closest", shapes,
    xaxis: { type: "log", title: { text: "time to train (days; autoscale for every point)" }, exponentformat: "power",
             range: xRange },
    yaxis: { type: "log", title: { text: "cost (USD)" }, tickprefix: "$", range: yRange },
  };
  const picked = { type: "scatter", mode: "markers", name: "shown", x: [], y: [], hoverinfo: "skip", showlegend: false,
                  marker: { symbol: "circle-open", size: 18, color: "#d62728", line: { width: 2 } } };
  await Plotly.react("frontier", [outside, points, best, runners, picked], layout, { displaylogo: false, responsive: true });
  if (!view.plotted) {
    view.plotted = true;
    $("frontier").on("plotly_relayout", recolour);
    $("frontier").on("plotly_click", (ev) => {
      const pt = ev.points[0];
      if (pt.curveNumber <= 1) showPoint(pt.customdata);
      else if (pt.curveNumber === 2) showPlan(view.solveDoc.optimum, "Optimum", view.solveDoc.warnings, null);
      else if (pt.curveNumber === 3) {
        const up = view.solveDoc.runners_up[pt.pointNumber];
        showPlan(up, "Runner-up: " + up.differs_in, []);
      }
    });
  }
}

// the loss colour scale spans the points inside the pins within the axes' ranges (log10 days, log10
// USD), so the points a person sees differ in colour; all points when fewer than two are in view
function shownLossRange(f, xRange, yRange) {
  const inside = (v, r) => v > 0 && Math.log10(v) >= r[0] && Math.log10(v) <= r[1];
  const shown = f.loss.filter((l, i) => f.feasible[i] && inside(f.time_s[i] / DAY_S, xRange) && inside(f.usd[i], yRange));
  const losses = shown.length > 1 ? shown : f.loss;
  const lo = Math.min(...losses), hi = Math.max(...losses);
  return hi - lo > 1e-6 ? [lo, hi] : [lo - 1e-3, hi + 1e-3];
}

// a zoom or pan: the colour scale follows the points now in view
function recolour() {
  const gd = $("frontier"), full = gd._fullLayout;
  if (!view.solveDoc || !full || !gd.data[1].marker.colorscale) return;
  const [lo, hi] = shownLossRange(view.solveDoc.frontier_points, full.xaxis.range, full.yaxis.range);
  const [cmin, cmax] = [gd.data[1].marker.cmin, gd.data[1].marker.cmax];
  if (Math.abs(cmin - lo) > 1e-9 || Math.abs(cmax - hi) > 1e-9) {
    window.Plotly.restyle(gd, { "marker.cmin": lo, "marker.cmax": hi }, [0, 1]);
  }
}

async function showPoint(i) {
  const me = view.seq;
  $("status").textContent = "fetching that plan…";
  document.body.dataset.state = "loading";
  const res = await fetch("/api/solve/point", { method: "POST", headers: { "Content-Type": "application/json" },
                                                body: JSON.stringify({ solve: view.solveReq, point: i }) });
  const doc = await res.json();
  if (me !== view.seq) return;
  if (res.status !== 200 || doc.infeasible) { showError(doc); return; }
  showPlan(doc, `Frontier point ${i}`, [], i);
  const f = view.solveDoc.frontier_points;
  await window.Plotly.restyle("frontier", { x: [[f.time_s[i] / DAY_S]], y: [[f.usd[i]]] }, [4]);
  $("status").textContent = `frontier point ${i}`;
  document.body.dataset.state = "ready";
  document.body.dataset.point = String(i);
}

