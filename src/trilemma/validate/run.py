"""The backtest as one call (used by `trilemma validate`); the calibration writer
(``scripts/calibrate.py``) is trilemma.validate.calibration_file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trilemma.presets import (
    calibration,
    calibration_rows,
    constants,
    uncalibrated_constants,
)
from trilemma.validate.bands import LEVEL, coverage, residuals_from_predictions
from trilemma.validate.bounds import at_bounds
from trilemma.validate.cases import load_cases, load_file
from trilemma.validate.fit import loso, summarise
from trilemma.validate.predict import Prediction, predict
from trilemma.validate.regimes import small_summary

KINDS = ("runs", "throughput", "memory")


def row_dict(p: Prediction, loso_pred: float | None = None) -> dict[str, Any]:
    c = p.case
    d = {
        "kind": c.kind,
        "row": c.row,
        "model": c.label,
        "metric": c.metric,
        "reported": c.reported,
        "predicted": p.predicted,
        "ratio": None if p.predicted is None else p.predicted / c.reported,
        "loso_predicted": loso_pred,
        "loso_ratio": None if loso_pred is None else loso_pred / c.reported,
        "n_gpus": c.n_gpus,
        "hardware": c.hardware.name,
        "layout": None if p.layout is None else p.layout.model_dump(mode="json"),
        "fits": p.fits,
        "group": c.group,
        "note": p.note,
        "assumptions": list(c.assumptions),
        "source": c.source,
    }
    return d


def stored_loso(key: str = "loso_predicted") -> dict[tuple[str, int], float]:
    """LOSO predictions saved by the last calibration, by (kind, row); ``key="losto_predicted"``: the
    leave-one-stack-out ones."""
    return {
        (r["kind"], int(r["row"])): float(r[key])
        for r in calibration_rows()
        if r.get(key) is not None
    }


def run_validate(
    kind: str | None = None,
    live_loso: bool = False,
    progress: Callable[[str], None] | None = None,
    data: str | None = None,
) -> dict[str, Any]:
    """Predict every case with the shipped constants; LOSO from the calibration (or recomputed).

    ``data``: a user's CSV in the backtest schema (data/SCHEMA.md) instead of the shipped rows; its
    leave-one-source-out figures are computed only with ``live_loso``."""
    if kind == "quality" and data is None:  # the loss law and benchmark curves alone
        from trilemma.validate.quality import document

        return document()
    if kind == "ondevice" and data is None:
        from trilemma.validate.ondevice import validate_doc

        return validate_doc()
    if data is None:
        cases, skipped = load_cases(None)
    else:
        kind, cases, skipped = load_file(data, kind)
    consts = constants()
    preds = predict([c for c in cases if kind in (None, c.kind)], consts)
    if live_loso:
        lp = {
            (p.case.kind, p.case.row): p.predicted
            for p in loso(cases, uncalibrated_constants(), progress)
        }
    else:
        lp = stored_loso() if data is None else {}
    sp = stored_loso("losto_predicted") if data is None else {}
    warnings: list[str] = []
    if data is None:  # held-out units that refit nothing: live; stale stored rows: named
        lp, sp, warnings = _fresh(cases, preds, lp, sp, live_loso)
    rows = [row_dict(p, lp.get((p.case.kind, p.case.row))) for p in preds]
    # coverage: every kind's LOSO residuals (a band borrows other kinds' sources), then reported per kind
    every = [Prediction(c, lp.get((c.kind, c.row)), None, True) for c in cases]
    cov = coverage(residuals_from_predictions(every)) if lp else {}
    summary = _summary(kind, preds, skipped, lp, sp, cov, own_data=data is not None)
    # on-device decode speed and memory verdicts (data/ondevice.csv, trilemma.validate.ondevice): shipped rows only
    from trilemma.validate.ondevice import summary as ondevice_summary

    ondevice = ondevice_summary() if data is None and kind is None else None
    # published fine-tuning memory (data/finetune_memory.csv): evidence beside the kinds, held out
    # (the memory constants refit without the sources it shares with data/memory.csv)
    ft = None
    if data is None and kind in (None, "finetune"):
        from trilemma.validate.finetune import section

        ft = section()
    return {
        "schema": "trilemma.validate/1",
        "data": data,
        "summary": summary,
        "rows": rows,
        "ondevice": ondevice,
        "finetune_memory": ft,
        # fitted constants on a bound of their fit, each with the missing term it stands for
        "fitted_at_bounds": at_bounds(consts),
        "skipped": [
            {"kind": s.kind, "row": s.row, "model": s.label, "reason": s.reason}
            for s in skipped
            if kind in (None, s.kind)
        ],
        "calibration": {k: calibration().get("meta", {}).get(k) for k in ("date", "command")},
        "warnings": warnings,
    }


def _fresh(
    cases: list[Any],
    preds: list[Prediction],
    lp: dict[tuple[str, int], float],
    sp: dict[tuple[str, int], float],
    live_loso: bool,
) -> tuple[dict, dict, list[str]]:
    """The shipped rows' held-out predictions against the live model (trilemma.validate.held_out):
    leave-one-source-out (unless recomputed: ``live_loso``) and leave-one-stack-out, and a warning naming
    the rows whose stored figure predates a change of their prediction."""
    from trilemma.validate.held_out import held_out

    was = stored_loso("predicted")
    stale: list[str] = []
    if not live_loso:
        lp, stale = held_out(cases, preds, lp, was, "group")
    sp, stale_s = held_out(cases, preds, sp, was, "stack")
    names = list(dict.fromkeys(stale + stale_s))
    if not names:
        return lp, sp, []
    return (
        lp,
        sp,
        [
            f"held out from a calibration made before their prediction changed: {', '.join(names)} "
            "(the live prediction × the stored fold's held-out / in-sample ratio); "
            "`python scripts/calibrate.py` recomputes them"
        ],
    )


def _summary(
    kind: str | None,
    preds: list[Prediction],
    skipped: list[Any],
    lp: dict[tuple[str, int], float],
    sp: dict[tuple[str, int], float],
    cov: dict[str, Any],
    *,
    own_data: bool,
) -> dict[str, Any]:
    """run_validate's summary per kind (all, or ``kind``): the errors of the predictions ``preds``
    with the shipped constants, leave-one-source-out (``lp``) and leave-one-stack-out (``sp``)
    predictions by (kind, row), the rows skipped, and each band's coverage ``cov``. ``own_data``:
    the rows are a user's, not in the fit of the shipped constants."""
    summary = {}
    for k in KINDS:
        if kind not in (None, k):
            continue
        mine = [p for p in preds if p.case.kind == k]
        lo = [Prediction(p.case, lp.get((p.case.kind, p.case.row)), p.layout, p.fits) for p in mine]
        # a user's rows were not in the fit of the shipped constants: out of sample, not "in-sample"
        first = "shipped_constants" if own_data else "in_sample"
        summary[k] = {
            first: summarise(mine),
            "leave_one_source_out": summarise(lo),
            "leave_one_stack_out": summarise(
                [
                    Prediction(p.case, sp.get((p.case.kind, p.case.row)), p.layout, p.fits)
                    for p in mine
                ]
            ),
            "skipped": sum(1 for s in skipped if s.kind == k),
            # per band an estimate prints: the share of rows inside the band built without their
            # source (trilemma.validate.bands.coverage); the target is the level
            "band_coverage": {"level": LEVEL, **cov.get(k, {})},
        }
        if k == "throughput":  # small configurations on their own (trilemma.validate.regimes)
            summary[k]["small_configurations"] = small_summary(mine, lp, sp)
    return summary
