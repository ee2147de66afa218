"""Uncertainty bands on a prediction: the 80% intervals of the calibration's leave-one-source-out
residuals (trilemma.validate.bands), widened outside the calibrated regime and for chip families the
calibration has no step times of."""

from __future__ import annotations

import math

from trilemma.presets import calibration


def _q(name: str) -> tuple[float, float]:
    """(q10, q90) of calibrated.toml's ``{name}_log_q10/q90`` (0, 0 when absent: no band)."""
    b = calibration().get("bands", {})
    return float(b.get(f"{name}_log_q10", 0.0)), float(b.get(f"{name}_log_q90", 0.0))


def band_factors(kind: str = "time") -> tuple[float, float]:
    """Multipliers (low, high) for an 80% interval on a prediction: from the leave-one-source-out residuals
    r = log(predicted / reported) of the last calibration (time: a duration's sign), low = exp(−q90),
    high = exp(−q10). ``kind``: "time" (a whole run's time, GPU-hours, $, energy, CO2), "throughput" (a
    step's time), "memory" (the peak per device) — trilemma.validate.bands."""
    q10, q90 = _q(kind)
    return math.exp(-q90), math.exp(-q10)


#: ``time.band_reason``: the band is the leave-one-source-out one (the plan is inside the calibrated regime)
BAND_LOSO = "leave-one-source-out"
#: ``time.band_reason``: the chip's family has no step times or runs in the calibration
BAND_CROSS_FAMILY = "chip family not calibrated: cross-family error added"
#: why a plan that names no software stack has a wider band (StackSpec; TrainingPlan.stack None)
BAND_NO_STACK = (
    "no --stack given: timed with the default stack's features; the cross-stack error added"
)
#: why a plan naming a stack that no calibration row was measured with has a wider band (its name first)
UNCALIBRATED_STACK = "stack {}: no calibration rows; band widened by the cross-stack error"
#: the kinds of calibration row that measure time (a family with only memory rows is not calibrated for it)
TIME_KINDS = ("throughput", "runs")


def family_coverage(family: str) -> dict[str, int]:
    """Calibration cases of a chip family per kind (calibrated.toml [families]; {} if none used it)."""
    row = calibration().get("families", {}).get(family, {})
    return {k: int(v) for k, v in row.items() if not k.startswith("cross_family")}


def family_calibrated(family: str) -> bool:
    """Whether the last calibration measured step times or runs on this chip family. True when the
    calibration predates the [families] table (nothing to say either way)."""
    if "families" not in calibration():
        return True
    return sum(family_coverage(family).get(k, 0) for k in TIME_KINDS) > 0


def stack_calibrated(name: str) -> bool:
    """Whether the last calibration has step times or runs measured with this stack (calibrated.toml
    [stacks]: each stack held out, n its rows; trilemma.validate.stacks). True when the calibration
    predates the [stacks] table (nothing to say either way)."""
    table = calibration().get("stacks")
    if table is None:
        return True
    return int(table.get(name, {}).get("n", 0)) > 0


def stack_reason(stack_given: bool, stack: str | None = None) -> str | None:
    """Why the band carries the cross-stack error (calibrated.toml [bands] cross_stack_*), or None: the
    plan names no stack (``BAND_NO_STACK``), or names ``stack``, which no calibration row was measured
    with (``UNCALIBRATED_STACK``): either way its step is timed with features no calibrated constant saw."""
    if "cross_stack_log_q90" not in calibration().get("bands", {}):
        return None
    if not stack_given:
        return BAND_NO_STACK
    if stack is not None and not stack_calibrated(stack):
        return UNCALIBRATED_STACK.format(stack)
    return None


def outside_reasons(
    family: str,
    n_gpus: float | None = None,
    params_total: float | None = None,
    precision: str | None = None,
    finetune: bool = False,
    nodes: float | None = None,
    stack_given: bool = True,
    stack: str | None = None,
) -> tuple[str, ...]:
    """Why a plan lies outside what the time calibration measured (calibrated.toml [families], [regime]):
    a chip family with no step times or runs, more devices or a larger model than the largest calibrated
    one, a precision no throughput or run was measured in, a fine-tune when no fine-tune was, and (given
    ``nodes``, for a whole run's time) more nodes than the largest whole run with a wall time, or fewer (but
    more than one) than the smallest, where a whole run's unmodelled losses (evaluation, idle time, data
    stalls: what the runs' residuals hold beyond trilemma.estimate.goodput and .stragglers) are
    extrapolated; and a plan that names no software stack, or names ``stack`` that no calibration row
    was measured with (``stack_reason``). Empty: inside."""
    out = [] if family_calibrated(family) else [BAND_CROSS_FAMILY]
    by_stack = stack_reason(stack_given, stack)
    if by_stack:
        out.append(by_stack)
    reg = calibration().get("regime", {})
    if n_gpus is not None and "max_gpus" in reg and n_gpus > reg["max_gpus"]:
        out.append(
            f"{n_gpus:,.0f} devices, more than the largest calibrated ({reg['max_gpus']:,}): out-of-regime error added"
        )
    if params_total is not None and "max_params" in reg and params_total > reg["max_params"]:
        out.append(
            f"{params_total:.3g} parameters, more than the largest calibrated model ({reg['max_params']:.3g}): "
            "out-of-regime error added"
        )
    if precision is not None and "precisions" in reg and str(precision) not in reg["precisions"]:
        out.append(
            f"precision {precision} has no calibrated step times or runs ({', '.join(reg['precisions'])} have): "
            "out-of-regime error added"
        )
    if finetune and reg.get("finetune_cases", 1) == 0:
        out.append(
            "a fine-tune: no calibrated step times or runs are of fine-tunes: out-of-regime error added"
        )
    if (
        nodes is not None
        and not finetune
        and "max_run_nodes" in reg
        and nodes > reg["max_run_nodes"]
    ):
        out.append(
            f"{nodes:,.0f} nodes, more than the largest whole run with a wall time ({reg['max_run_nodes']:,}): "
            "a whole run's unmodelled losses are extrapolated: out-of-regime error added"
        )
    if nodes is not None and not finetune and 1 < nodes < reg.get("min_run_nodes", 0):
        out.append(
            f"{nodes:,.0f} nodes, fewer than the smallest multi-node whole run with a wall time "
            f"({reg['min_run_nodes']:,}): a whole run's unmodelled losses are extrapolated: out-of-regime error added"
        )
    return tuple(out)


def widened(q10: float, q90: float, k: int, k_stack: int = 0) -> tuple[float, float]:
    """Multipliers (low, high) of a band with leave-one-source-out quantiles (q10, q90), widened for ``k``
    reasons the plan lies outside the calibrated regime.

    The error outside has two parts: the source-to-source error the leave-one-source-out residuals
    measure (q10, q90) and the error of predicting a regime the constants never saw, measured where it
    can be: each chip family held out in turn (c10, c90; calibrated.toml [bands] cross_family_*). No
    calibrated row lies beyond the largest device count or model or in another precision, so each such
    reason is taken to add an error of that same size, independent of the others. Independent errors'
    quantiles add in quadrature, each side on its own (the residuals are skewed), and only the part of
    each quantile on its own side of the point counts (a quantile on the wrong side would narrow it):

        low  = exp(−√(max(q90, 0)² + k·max(c90, 0)²))
        high = exp(+√(min(q10, 0)² + k·min(c10, 0)²))

    so a band never narrows as reasons are added. The cross-family residuals already hold some
    source-to-source spread, so this counts that part twice: it errs wide, on purpose. ``k_stack``
    (0 or 1): the plan names no stack, or one no calibration row was measured with, and the error of a
    stack held out (calibrated.toml [bands] cross_stack_*, trilemma.validate.stacks) is added the same way."""
    b = calibration().get("bands", {})
    k = k if "cross_family_log_q90" in b else 0
    k_stack = k_stack if "cross_stack_log_q90" in b else 0
    up = math.sqrt(
        max(q90, 0.0) ** 2
        + k * max(b.get("cross_family_log_q90", 0.0), 0.0) ** 2
        + k_stack * max(b.get("cross_stack_log_q90", 0.0), 0.0) ** 2
    )
    down = math.sqrt(
        min(q10, 0.0) ** 2
        + k * min(b.get("cross_family_log_q10", 0.0), 0.0) ** 2
        + k_stack * min(b.get("cross_stack_log_q10", 0.0), 0.0) ** 2
    )
    return math.exp(-up), math.exp(down)


def band_outside(
    family: str,
    n_gpus: float | None = None,
    params_total: float | None = None,
    precision: str | None = None,
    kind: str = "time",
    finetune: bool = False,
    nodes: float | None = None,
    stack_given: bool = True,
    stack: str | None = None,
) -> tuple[float, float, tuple[str, ...]]:
    """Multipliers (low, high) of the 80% band on ``kind`` ("time": a whole run's time, GPU-hours, $,
    energy; "throughput": a step's time) for a plan, and the reasons it was widened (``outside_reasons``,
    ``widened``). ``nodes`` counts for a whole run's time only: a step has no run-level losses.
    ``stack_given``: the plan names a stack; ``stack``: its name, checked against the calibration's
    [stacks] (None: not checked)."""
    reasons = outside_reasons(
        family,
        n_gpus,
        params_total,
        precision,
        finetune,
        nodes if kind == "time" else None,
        stack_given,
        stack,
    )
    k_stack = int(stack_reason(stack_given, stack) is not None)
    lo, hi = widened(*_q(kind), len(reasons) - k_stack, k_stack)
    return lo, hi, reasons


def band_for(family: str) -> tuple[float, float, str]:
    """Multipliers (low, high) of the 80% band on time, GPU-hours and dollars for a chip family alone, and
    the reason (``BAND_LOSO`` or ``BAND_CROSS_FAMILY``): ``band_outside`` with the family as the only
    coordinate, so the widened band always contains the leave-one-source-out one."""
    lo, hi, reasons = band_outside(family)
    return lo, hi, reasons[0] if reasons else BAND_LOSO


def uncalibrated_family_warning(hw_name: str, family: str) -> str | None:
    """The note an estimate on a chip family the calibration has no step times or runs of carries."""
    low, high, reason = band_for(family)
    if reason != BAND_CROSS_FAMILY:
        return None
    lo, hi = band_factors()
    mem = family_coverage(family).get("memory", 0)
    only = f" (only {mem} peak-memory row{'s' if mem != 1 else ''})" if mem else ""
    return (
        f"{hw_name} ({family}): no measured step times or runs of this chip family in the calibration{only}; "
        f"time and cost bands widened by the cross-family error to ×{low:.2f}–×{high:.2f} of the point "
        f"(×{lo:.2f}–×{hi:.2f} on calibrated families)"
    )


__all__ = [
    "BAND_CROSS_FAMILY",
    "BAND_LOSO",
    "BAND_NO_STACK",
    "TIME_KINDS",
    "UNCALIBRATED_STACK",
    "band_factors",
    "band_for",
    "band_outside",
    "family_calibrated",
    "family_coverage",
    "outside_reasons",
    "stack_calibrated",
    "stack_reason",
    "uncalibrated_family_warning",
    "widened",
]
