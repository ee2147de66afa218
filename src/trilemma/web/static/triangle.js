// trilemma serve: the triangle itself. The three corners (time, cost, loss) of the optimum and of each
// runner-up on one radar, each corner scaled over the plans drawn (0.1: the lowest of them, 1: the
// highest; lower is better on all three), so what a runner-up's one lever trades shows as a corner
// pulled in and another pushed out; the hover gives the figures. A fine-tune has no loss: no triangle.
// Loaded before app.js; uses its helpers (fmt*, plotlyReady, $) when called.
"use strict";

const CORNERS = [
  ["time", (p) => p.time.total_s, (v) => fmtDuration(v)],
  ["cost", (p) => p.cost.usd, (v) => fmtUSD(v)],
  ["loss", (p) => p.loss.mean, (v) => v.toFixed(3)],
];

const RUNNER_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"];  // no red

// each corner's values over `plans` scaled to [0.1, 1] (all equal: 1)
function cornerScale(plans) {
  return CORNERS.map(([, get]) => {
    const vs = plans.map(get), lo = Math.min(...vs), hi = Math.max(...vs);
    return vs.map((v) => (hi > lo ? 0.1 + (0.9 * (v - lo)) / (hi - lo) : 1));
  });
}

async function drawTriangle(doc) {
  const box = $("triangle");
  const plans = [doc.optimum, ...doc.runners_up];
  box.hidden = !doc.optimum.loss || plans.length < 2;
  if (box.hidden) return;
  const Plotly = await plotlyReady;
  const scaled = cornerScale(plans);
  const names = ["optimum", ...doc.runners_up.map((p) => p.differs_in)];
  const theta = [...CORNERS.map(([c]) => c), CORNERS[0][0]];  // closed
  const traces = plans.map((p, i) => {
    const r = CORNERS.map((_, c) => scaled[c][i]);
    const text = CORNERS.map(([c, get, fmt]) => `${names[i]}: ${c} ${fmt(get(p))}`);
    return { type: "scatterpolar", r: [...r, r[0]], theta, name: names[i], text: [...text, text[0]],
             hoverinfo: "text", mode: "lines+markers", fill: i === 0 ? "toself" : "none",
             line: { width: i === 0 ? 3 : 1.5, color: i === 0 ? "#d62728" : RUNNER_COLOURS[(i - 1) % RUNNER_COLOURS.length] } };
  });
  const layout = { margin: { l: 30, r: 30, t: 20, b: 20 }, height: 300, showlegend: true,
                   legend: { font: { size: 11 } },
                   polar: { radialaxis: { range: [0, 1], showticklabels: false } } };
  await Plotly.react("triangle-plot", traces, layout, { displaylogo: false, responsive: true });
}
