// trilemma serve: the page's controls by the request's JSON keys, and the server's words reworded
// with them. One place: a message naming a CLI flag ("raise --max-gpus") names the control the page
// has instead ("raise “Most GPUs”"). Every key here is a field of the request schema that
// /openapi.json publishes (tests/test_serve_page.py checks it). Loaded before app.js.
"use strict";

const CONTROL_LABELS = {
  solve: {
    minimize: "Minimise", deadline: "Deadline", budget: "Budget", "target-loss": "Target loss",
    params: "Model sizes", precision: "Precision", "max-gpus": "Most GPUs", gpu: "GPU types",
  },
  estimate: {
    model: "Model", gpu: "GPU", gpus: "GPU count", tokens: "Tokens", precision: "Precision",
    tp: "TP", pp: "PP", zero: "ZeRO", "micro-batch": "micro-batch", recompute: "recompute",
  },
};

// the label of the control for a request key on a tab (the main controls, then More inputs); null
// when the page has none
function controlLabel(tab, key) {
  return CONTROL_LABELS[tab][key] || moreLabel(tab, key);
}

// `text` with each --flag the page has a control for replaced by that control's label in quotes
function pageWords(text, tab) {
  return String(text).replace(/--([a-z][a-z0-9-]*)/g, (flag, key) => {
    const label = controlLabel(tab, key);
    return label ? `“${label}”` : flag;
  });
}
