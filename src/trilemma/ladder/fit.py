"""Fit the law on the ladder's fit runs (``trilemma fit``'s machinery) and predict the held-out run.

The fit is ``trilemma.quality.fit.fit_runs`` (Hoffmann 2022 App. D.2 procedure with Besiroglu 2024's
corrections; bootstrap intervals over runs), on every finished fit run of this ladder and nothing
else: the held-out run's own record is never given to it. The prediction is
``trilemma.quality.predict.predict_loss`` under the fitted law, so the band is the law's own
(bootstrap percentiles). The law file is written with ``trilemma.quality.laws.write_law``, the same
writer ``trilemma fit --out`` uses, so ``--law DIR/law.toml`` works in ``estimate`` and ``solve``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from trilemma.ladder.plan import rules
from trilemma.quality.fit import FitReport, fit_runs
from trilemma.quality.laws import write_law
from trilemma.quality.predict import LossPrediction, predict_loss
from trilemma.quality.runs import Runs
from trilemma.specs.enums import LossUnit, NCounts

__all__ = ["TOKENIZER", "fit_ladder", "predict_held_out"]

TOKENIZER = "bytes (vocabulary 256; trilemma probe's tokenizer)"


def fit_ladder(
    records: list[dict[str, Any]],
    *,
    source: str,
    data: str,
    name: str = "ladder",
    n_boot: int = 200,
    seed: int = 0,
) -> FitReport:
    """The law fitted on the fit runs' (N non-embedding, D, eval loss)."""
    n = np.array([float(r["N"]) for r in records])
    d = np.array([float(r["D"]) for r in records])
    loss = np.array([float(r["loss"]) for r in records])
    runs = Runs(n, d, loss, source=source, columns=("N", "D", "loss"))
    kw = {
        "name": name,
        "n_counts": NCounts.NON_EMBEDDING,
        "loss_unit": LossUnit.NATS_PER_TOKEN,
        "data": data,
        "tokenizer": TOKENIZER,
        "seed": seed,
        "holdout": 0.0,
    }
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        report = fit_runs(runs, n_boot=n_boot, **kw)
    law = replace(
        report.law,
        title=f"fitted by trilemma ladder on {data}",
        source=f"trilemma ladder: {len(n)} fit runs in {source}",
        notes=report.law.notes
        + (
            "N counts non-embedding parameters; the loss is nats per byte on the corpus's held-out files",
            "hyperparameter rules of the runs: "
            + "; ".join(f"{k}: {v}" for k, v in rules().items()),
        ),
    )
    return replace(report, law=law)


def predict_held_out(report: FitReport, run: Any) -> LossPrediction:
    """The held-out run's loss under the fitted law, with the law's band."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return predict_loss(
            report.law, float(run.params_total), float(run.n), float(run.tokens), precision="fp32"
        )


def write_ladder_law(report: FitReport, path: str | Path) -> Path:
    return write_law(report.law, path)
