// trilemma serve: downloads made in the browser from the answers already on the page (nothing is
// written on the server): the plan shown as JSON (the estimate document), the frontier as CSV (the
// columns of `trilemma solve --frontier`, plus each point's layout). Loaded before app.js.
"use strict";

const FRONTIER_COLUMNS = ["model", "gpu", "n_gpus", "precision", "tokens", "time_s", "usd", "loss", "feasible",
                          "layout"];

function saveFile(name, type, text) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 0);
}

function csvCell(v) {
  const s = typeof v === "boolean" ? (v ? "True" : "False") : String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// the frontier's points (solve's frontier_points columns) as CSV text, one row per point in order
function frontierCsv(f) {
  const lines = [FRONTIER_COLUMNS.join(",")];
  for (let i = 0; i < f.time_s.length; i++) {
    const c = f.configs[f.config[i]];
    const row = { ...c, tokens: f.tokens[i], time_s: f.time_s[i], usd: f.usd[i], loss: f.loss[i],
                  feasible: f.feasible[i] };
    lines.push(FRONTIER_COLUMNS.map((k) => csvCell(row[k] ?? "")).join(","));
  }
  return lines.join("\n") + "\n";
}

function downloadPlan() {
  if (view.shown) saveFile("trilemma-plan.json", "application/json", JSON.stringify(view.shown, null, 2) + "\n");
}

function downloadFrontier() {
  if (view.solveDoc) saveFile("trilemma-frontier.csv", "text/csv", frontierCsv(view.solveDoc.frontier_points));
}

// the plan shown (the solve's optimum or a frontier point) as the files of the engine picked, each
// downloaded as the text /api/export answers (`trilemma export --to ENGINE solve ...`)
async function exportPlan() {
  const body = { to: $("export-engine").value, solve: view.solveReq };
  if (view.shownPoint !== null && view.shownPoint !== undefined) body.point = view.shownPoint;
  const res = await fetch("/api/export", { method: "POST", headers: { "Content-Type": "application/json" },
                                           body: JSON.stringify(body) });
  const doc = await res.json();
  $("export-error").textContent = res.status === 200 ? "" : pageWords(doc.error, "solve");
  if (res.status !== 200) return;
  for (const [name, text] of Object.entries(doc.files)) saveFile(name, "text/plain", text);
  document.body.dataset.exported = Object.keys(doc.files).join(",");
}

function wireDownloads() {
  $("export-plan").addEventListener("click", exportPlan);
  $("download-plan").addEventListener("click", downloadPlan);
  $("download-frontier").addEventListener("click", downloadFrontier);
}
