"""The calibration writer (used by ``scripts/calibrate.py``): fit the constants on every case,
cross-validate by source, chip family and stack, and write calibrated.toml."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np

from trilemma.fileio import write_text_atomic
from trilemma.presets import hardware_presets, uncalibrated_constants
from trilemma.tomlw import toml_value
from trilemma.validate import Skipped
from trilemma.validate.bands import LEVEL, named_bands, residuals_from_predictions
from trilemma.validate.cases import load_cases
from trilemma.validate.fit import FITTED_PARAMS, calibrate, loso, summarise
from trilemma.validate.predict import RUN_METRICS, TIME_METRICS, predict
from trilemma.validate.run import KINDS
from trilemma.validate.stacks import cross_stack, stack_lines

BAND_QUANTILES = (0.1, 0.9)  # an 80% interval


def family_counts(cases: list[Any]) -> dict[str, dict[str, int]]:
    """Calibration cases per chip family (``HardwareSpec.family``) and kind, every preset's family
    listed (with zeros where no case used it), in name order."""
    fams = {h.family for h in hardware_presets().values()} | {c.hardware.family for c in cases}
    out = {f: {k: 0 for k in KINDS} for f in sorted(fams)}
    for c in cases:
        out[c.hardware.family][c.kind] += 1
    return out


def cross_family(
    cases: list[Any], start: Any, fitted: Any, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Hold out each chip family with measured step times or runs in turn: refit without its rows
    (``loso(by="family")``: the time constants from ``start``, the goodput fit where its rows test it), predict
    them. Returns the pooled 10th/50th/90th percentiles of r = log(predicted time / reported time)
    (``Prediction.time_log_ratio``: a rate's sign flipped), n, and each family's n and median r."""
    band_cases = [c for c in cases if c.metric in TIME_METRICS | RUN_METRICS]
    preds = loso(band_cases, start, progress, full=fitted, by="family")
    by_family: dict[str, list[float]] = {}
    for p in preds:
        if p.time_log_ratio is not None:
            by_family.setdefault(p.case.hardware.family, []).append(p.time_log_ratio)
    r = np.array([x for v in by_family.values() for x in v])
    q = (
        [float(np.quantile(r, x)) for x in (BAND_QUANTILES[0], 0.5, BAND_QUANTILES[1])]
        if len(r)
        else [0.0] * 3
    )
    return {
        "log_q10": q[0],
        "log_median": q[1],
        "log_q90": q[2],
        "n": int(len(r)),
        "families": {
            f: {"n": len(v), "log_median": float(np.median(v))}
            for f, v in sorted(by_family.items())
        },
    }


def regime(cases: list[Any]) -> dict[str, Any]:
    """What the time calibration measured: the largest device count and model (total parameters) among
    its throughput and runs cases, their precisions, how many are fine-tunes, and the most and fewest (above
    one) nodes of a whole run with a wall time (GPU-hours or days: the rows that test the goodput model). A
    plan beyond it gets a wider band (trilemma.estimate.bands.band_outside)."""
    from trilemma.estimate.goodput import node_count
    from trilemma.estimate.params import param_counts

    t = [c for c in cases if c.kind in ("throughput", "runs")]
    if not t:
        return {}
    run_nodes = [
        int(node_count(c.n_gpus, c.hardware.devices_per_node)) for c in t if c.metric in RUN_METRICS
    ]
    return {
        "max_gpus": max(c.n_gpus for c in t),
        "max_params": max(param_counts(c.model).total for c in t),
        "precisions": sorted({str(c.plan.precision) for c in t}),
        "finetune_cases": sum(1 for c in t if getattr(c.plan, "finetune", None) is not None),
        "max_run_nodes": max(run_nodes, default=0),
        # the fewest nodes of a multi-node whole run: below it (but above one node, which pays no share)
        # the whole run's unmodelled losses are extrapolated too
        "min_run_nodes": min((n for n in run_nodes if n > 1), default=0),
    }


def band_lines(bands: dict[str, Any]) -> list[str]:
    """calibrated.toml's [bands] lines: each kind's 80% band and the whole run's (the cross-family figures
    that follow them are the caller's)."""
    lines = [
        "[bands]",
        "# 80% bands from leave-one-source-out log residuals r = log(predicted / reported), signed as a",
        "# duration for time (a rate's ratio inverted), as a size for memory: a prediction p has the band",
        "# [p·exp(−q90), p·exp(−q10)]. Each kind's by split conformal prediction, each side on its own, or on",
        "# two levels (sources borrowed) for a kind with fewer than 3 sources: trilemma.validate.bands.",
        "# time_*: a whole run's time, GPU-hours, $, energy, CO2 (outward of runs' and throughput's);",
        "# throughput_*: a step's time; memory_*: the peak per device (a plan fits when its peak is at most",
        "# capacity · exp(memory_log_q10): trilemma.estimate.evaluate.memory_headroom)",
        f"quantiles = {toml_value([round((1 - LEVEL) / 2, 9), round((1 + LEVEL) / 2, 9)])}",
    ]
    for name in ("time", "runs", "throughput", "memory"):
        b = bands.get(name)
        if b is None:
            continue
        lines += [
            f"{name}_log_q10 = {toml_value(b.q_lo)}",
            f"{name}_log_q90 = {toml_value(b.q_hi)}",
        ]
        lines += ["n = " + toml_value(b.n)] if name == "time" else [f"{name}_n = {toml_value(b.n)}"]
        lines += [
            f"{name}_sources = {toml_value(b.sources)}",
            f"{name}_method = {toml_value(b.method)}",
        ]
    return lines


def regime_lines(reg: dict[str, Any]) -> list[str]:
    """calibrated.toml's [regime] lines (``regime``)."""
    return [
        "[regime]",
        "# what the time calibration measured (throughput and runs cases): a plan beyond it gets a",
        "# wider band (trilemma.estimate.bands.band_outside)",
        *[f"{k} = {toml_value(v)}" for k, v in reg.items()],
        "",
    ]


def calibrate_and_write(
    path: str | None = None, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Fit on all cases, cross-validate by source, write calibrated.toml; returns what was written."""
    cases, skipped = load_cases(None)
    start = uncalibrated_constants()
    fitted = calibrate(cases, start)
    ins = predict(cases, fitted)
    lo = loso(cases, start, progress, full=fitted)
    lo_by = {(p.case.kind, p.case.row): p for p in lo}
    bands = named_bands(residuals_from_predictions(lo))
    xf = cross_family(cases, start, fitted, progress and (lambda f: progress(f"family {f}")))
    xs = cross_stack(cases, start, fitted, progress and (lambda s: progress(f"stack {s}")))
    so_by = {(p.case.kind, p.case.row): p for p in xs["predictions"]}
    changed = {
        s: {k: fitted[s][k] for k in fitted[s] if fitted[s][k] != start.get(s, {}).get(k)}
        for s in fitted
    }
    changed = {s: v for s, v in changed.items() if v}
    summary = {}
    for k in KINDS:
        summary[k] = {
            "in_sample": summarise([p for p in ins if p.case.kind == k]),
            "leave_one_source_out": summarise([p for p in lo if p.case.kind == k]),
            "leave_one_stack_out": summarise([p for p in xs["predictions"] if p.case.kind == k]),
        }
    lines = [
        "# Written by `python scripts/calibrate.py` — do not edit by hand. The fit is described in",
        "# src/trilemma/validate/fit.py; the data are src/trilemma/data/*.csv (published figures).",
        "[meta]",
        f"date = {toml_value(_dt.date.today().isoformat())}",
        'command = "python scripts/calibrate.py"',
        f"fitted = {toml_value([f'{s}.{k}' for s, k, _, _ in FITTED_PARAMS])}",
        f"cases = {toml_value(len(cases))}",
        f"skipped = {toml_value(len(skipped))}",
        f"groups = {toml_value(sorted({c.group for c in cases}))}",
        "",
        *band_lines(bands),
        "# cross-family: each chip family with measured step times or runs held out in turn (time constants",
        "# refitted without its rows, the goodput fit too where they test it), its rows predicted; r pooled over",
        "# families ([families] has each one's median). Widens the band of a family with no such rows",
        "# (trilemma.estimate.bands.band_for).",
        f"cross_family_log_q10 = {toml_value(xf['log_q10'])}",
        f"cross_family_log_median = {toml_value(xf['log_median'])}",
        f"cross_family_log_q90 = {toml_value(xf['log_q90'])}",
        f"cross_family_n = {toml_value(xf['n'])}",
        "# cross-stack: the same with each software stack held out (trilemma.validate.stacks); widens the",
        "# band of a plan that names no stack (trilemma.estimate.bands.widened)",
        *[f"cross_stack_{q} = {toml_value(xs[q])}" for q in ("log_q10", "log_median", "log_q90")],
        f"cross_stack_n = {toml_value(xs['n'])}",
        "",
        *regime_lines(regime(cases)),
    ]
    lines += _constants_lines(changed, summary)
    lines += _family_lines(cases, xf)
    lines += stack_lines(xs)
    lines += _row_lines(ins, lo_by, so_by)
    text = "\n".join(lines)
    target = path or str(resources.files("trilemma.presets").joinpath("calibrated.toml"))
    write_text_atomic(target, text, "out")
    t = bands["time"]
    return {
        "constants": changed,
        "summary": summary,
        "bands": (t.q_lo, t.q_hi) if t else (0.0, 0.0),
        "cross_family": xf,
        "path": target,
        "skipped": [s for s in skipped if isinstance(s, Skipped)],
    }


def _constants_lines(changed: dict[str, dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    """The fitted constants that moved, and the in-sample and LOSO summaries per kind."""
    lines: list[str] = []
    for s, vals in changed.items():
        lines.append(f"[constants.{s}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in vals.items()]
        lines.append("")
    for k, v in summary.items():
        for which, stats in v.items():
            lines.append(f"[summary.{k}.{which}]")
            lines += [f"{sk} = {toml_value(sv)}" for sk, sv in stats.items()]
            lines.append("")
    return lines


def _family_lines(cases: list[Any], xf: dict[str, Any]) -> list[str]:
    """Calibration cases per chip family and kind, with the cross-family error of each."""
    lines: list[str] = []
    lines += [
        "[families]",
        "# calibration cases per chip family (HardwareSpec.family, presets/hardware.toml) and kind; a family",
        "# with no throughput or runs cases has no measured step time: its estimates say so and their band",
        "# is widened by the cross-family error. cross_family_*: its rows predicted with it held out.",
        "",
    ]
    for fam, counts in family_counts(cases).items():
        lines.append(f"[families.{fam}]")
        lines += [f"{k} = {v}" for k, v in counts.items()]
        if fam in xf["families"]:
            lines += [
                f"cross_family_n = {xf['families'][fam]['n']}",
                f"cross_family_log_median = {toml_value(xf['families'][fam]['log_median'])}",
            ]
        lines.append("")
    return lines


def _row_lines(ins: list[Any], lo_by: dict, so_by: dict) -> list[str]:
    """One [[rows]] table per case: reported, predicted in-sample, leave-one-source-out and
    leave-one-stack-out."""
    lines: list[str] = []
    for p in ins:
        lp = lo_by.get((p.case.kind, p.case.row))
        lines += [
            "[[rows]]",
            f"kind = {toml_value(p.case.kind)}",
            f"row = {p.case.row}",
            f"model = {toml_value(p.case.label)}",
            f"metric = {toml_value(p.case.metric)}",
            f"group = {toml_value(p.case.group)}",
            f"reported = {toml_value(p.case.reported)}",
        ]
        if p.predicted is not None:
            lines.append(f"predicted = {toml_value(p.predicted)}")
            lines.append(f"log_ratio = {toml_value(math.log(p.predicted / p.case.reported))}")
        if lp is not None and lp.predicted is not None:
            lines.append(f"loso_predicted = {toml_value(lp.predicted)}")
        sp = so_by.get((p.case.kind, p.case.row))
        if sp is not None and sp.predicted is not None:
            lines.append(f"stack = {toml_value(getattr(p.case, 'stack', ''))}")
            lines.append(f"losto_predicted = {toml_value(sp.predicted)}")
        lines.append("")
    return lines
