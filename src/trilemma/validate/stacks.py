"""Leave one software stack out: how well the time constants carry to a stack they never saw.

Every calibration row is tagged with the stack that produced it (data/SCHEMA.md, ``stack``). Each
stack with step times or whole runs is held out in turn: the time constants (and the goodput fit,
where its rows test it) are refitted on the other stacks' rows, its rows predicted
(``fit.loso(by="stack")``). The pooled residuals are the cross-stack error: the band an estimate
whose stack is not given is widened by (trilemma.estimate.bands.widened), and the
leave-one-stack-out summary ``trilemma validate`` prints beside leave-one-source-out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trilemma.validate.bands import LEVEL
from trilemma.validate.fit import HOLD_OUT_BY, UNTAGGED_STACK, loso, summarise
from trilemma.validate.predict import RUN_METRICS, TIME_METRICS, Prediction

#: a row whose source names no stack
UNTAGGED = UNTAGGED_STACK
#: the pooled residuals' lower, middle and upper quantiles (an 80% band)
QUANTILES = ((1 - LEVEL) / 2, 0.5, (1 + LEVEL) / 2)
#: the rows held out by stack: step times and whole runs (memory rows are held out by source only)
HELD_OUT_METRICS: frozenset[str] = frozenset(TIME_METRICS | RUN_METRICS)


def stack_of(case: Any) -> str:
    """The stack a calibration case was measured with, ``UNTAGGED`` where its row names none (the key
    ``fit.loso(by="stack")`` holds cases out by)."""
    return HOLD_OUT_BY["stack"](case)


def cross_stack(
    cases: list[Any], start: Any, fitted: Any, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Hold out each stack with step times or runs in turn (``loso(by="stack")``) and predict its
    rows. Returns the predictions, the pooled 10th/50th/90th percentiles of r = log(predicted time /
    reported time) (``Prediction.time_log_ratio``), n, each stack's n and median r and its summary."""
    band_cases = [c for c in cases if c.metric in HELD_OUT_METRICS]
    preds = loso(band_cases, start, progress, full=fitted, by="stack")
    by_stack: dict[str, list[Prediction]] = {}
    for p in preds:
        by_stack.setdefault(stack_of(p.case), []).append(p)
    r = np.array([p.time_log_ratio for p in preds if p.time_log_ratio is not None])
    q = [float(np.quantile(r, x)) for x in QUANTILES] if len(r) else [0.0] * 3
    stacks = {}
    for s, ps in sorted(by_stack.items()):
        rs = [p.time_log_ratio for p in ps if p.time_log_ratio is not None]
        stacks[s] = {
            "n": len(rs),
            "log_median": float(np.median(rs)) if rs else 0.0,
            **{k: summarise([p for p in ps if p.case.kind == k]) for k in ("throughput", "runs")},
        }
    return {
        "predictions": preds,
        "log_q10": q[0],
        "log_median": q[1],
        "log_q90": q[2],
        "n": int(len(r)),
        "stacks": stacks,
    }


def stack_lines(xs: dict[str, Any]) -> list[str]:
    """calibrated.toml's [stacks] tables: each held-out stack's rows, median r and errors by kind."""
    from trilemma.tomlw import toml_value

    lines = [
        "[stacks]",
        "# leave-one-stack-out: each stack's rows predicted with the time constants fitted on the other",
        "# stacks (trilemma.validate.stacks); log_median is its median log(predicted / reported time)",
        "",
    ]
    for s, v in xs["stacks"].items():
        lines.append(f'[stacks."{s}"]')
        lines.append(f"n = {toml_value(v['n'])}")
        lines.append(f"log_median = {toml_value(v['log_median'])}")
        for k in ("throughput", "runs"):
            st = v.get(k, {})
            if st.get("n"):
                lines.append(f"{k}_n = {toml_value(st['n'])}")
                lines.append(f"{k}_median_error = {toml_value(st['median_error'])}")
                lines.append(f"{k}_worst_error = {toml_value(st['worst_error'])}")
        lines.append("")
    return lines


__all__ = ["HELD_OUT_METRICS", "UNTAGGED", "cross_stack", "stack_lines", "stack_of"]
