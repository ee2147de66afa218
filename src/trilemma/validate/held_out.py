"""The held-out predictions `trilemma validate` shows, from the stored ones and the live model.

The last calibration stored, beside each row, its prediction with the constants fitted without the
row's source (``loso_predicted``) and without its stack (``losto_predicted``). A held-out unit whose
rows hold no fitted metric refits nothing: ``fit._held_out`` predicts it with the full fit's constants,
the shipped ones, so its held-out prediction is the live one, exact whatever changed since. Whole runs
timed by GPU-hours or days are such rows when their source or stack has no step time or memory row.

A row of a unit that does refit keeps its stored figure while its live prediction is the one the
calibration stored. When it is not (its stack or features changed since), the stored figure is stale:
the live prediction carries the stored fold's ratio (held out over in-sample, both stored), and the row
is named, so that a refit (``scripts/calibrate.py``) replaces the estimate.
"""

from __future__ import annotations

import math
from typing import Any

from trilemma.validate.fit import HOLD_OUT_BY, REFIT_METRICS
from trilemma.validate.predict import Prediction
from trilemma.validate.stacks import HELD_OUT_METRICS

#: by held-out unit, the metrics of the rows the calibration held out that way (calibration_file: every
#: row by source; stacks.cross_stack: step times and runs by stack)
HELD_OUT_ROWS: dict[str, frozenset[str] | None] = {"group": None, "stack": HELD_OUT_METRICS}


def refitting_units(cases: list[Any], by: str) -> set[str]:
    """The held-out units (source groups or stacks) whose fold refits constants: each holds a row of a
    metric fit._held_out refits on (fit.REFIT_METRICS), among the rows held out that way."""
    key, rows = HOLD_OUT_BY[by], HELD_OUT_ROWS[by]
    return {
        key(c) for c in cases if c.metric in REFIT_METRICS and (rows is None or c.metric in rows)
    }


def held_out(
    cases: list[Any],
    preds: list[Prediction],
    stored: dict[tuple[str, int], float],
    stored_in_sample: dict[tuple[str, int], float],
    by: str = "group",
) -> tuple[dict[tuple[str, int], float], list[str]]:
    """The held-out predictions by (kind, row) and the labels of the rows whose stored figure was stale.

    ``cases``: every calibration case (what the folds held out); ``preds``: the live in-sample
    predictions; ``stored`` / ``stored_in_sample``: the calibration's held-out and in-sample predictions
    by (kind, row); ``by``: "group" (leave one source out) or "stack" (leave one stack out)."""
    key, rows = HOLD_OUT_BY[by], HELD_OUT_ROWS[by]
    refit = refitting_units(cases, by)
    out = dict(stored)
    stale: list[str] = []
    for p in preds:
        k = (p.case.kind, p.case.row)
        if p.predicted is None or (rows is not None and p.case.metric not in rows):
            continue
        if key(p.case) not in refit:  # the fold is the full fit: the live prediction, exact
            out[k] = p.predicted
            continue
        was = stored_in_sample.get(k)
        if k in stored and was and not math.isclose(p.predicted, was, rel_tol=1e-9):
            out[k] = p.predicted * stored[k] / was
            stale.append(p.case.label)
    return out, stale


__all__ = ["HELD_OUT_ROWS", "held_out", "refitting_units"]
