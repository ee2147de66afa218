"""How the solver ranks plans: on the point estimate, or on the pessimistic end of each plan's 80%
band of time and cost (the default), so that a chip whose band is wide — a family with no measured
step time, a plan beyond the calibrated regime — wins only where it wins at its worst too.

A plan's band (trilemma.estimate.bands.band_outside, kind "time": a whole run's time, GPU-hours,
dollars and energy) has a high multiplier h ≥ 1 on its time and cost. Ranking pessimistically
multiplies each configuration's seconds, dollars, GPU-hours and kWh per token by its h, chooses the
tokens the pins then allow (trilemma.solve.optimize.choose_tokens) and takes the best of those on the
objective; the plan returned trains the point estimate's tokens on that configuration."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from trilemma.estimate.bands import band_outside, family_calibrated
from trilemma.estimate.goodput import node_count
from trilemma.solve.optimize import Choice, Corners, Pins, best_index, choose_tokens
from trilemma.solve.search import ConfigTable, params_of

#: the ways ``solve --rank`` ranks plans; the first is the default
RANKS = ("pessimistic", "point")
DEFAULT_RANK = RANKS[0]


def band_high(
    table: ConfigTable, stack_given: bool, finetune: bool, stack: str | None = None
) -> np.ndarray:
    """Per configuration: the high multiplier of its time and cost 80% band, as ``estimate`` gives
    its plan (the GPU type's family, the GPU count, the model's parameters, the precision, the nodes
    of its scale-up domain, whether a stack is named and ``stack`` its name, a fine-tune)."""
    tot, _ = params_of(table)
    out = np.ones(len(table))
    seen: dict[tuple, float] = {}
    for i in range(len(table)):
        hw = table.gpus[int(table.gpu_idx[i])]
        n = int(table.n_gpus[i])
        key = (hw.family, n, hw.devices_per_node, float(tot[i]), int(table.prec_idx[i]))
        if key not in seen:
            prec = str(table.precisions[int(table.prec_idx[i])])
            nodes = float(node_count(n, hw.devices_per_node))
            seen[key] = band_outside(
                hw.family,
                n,
                float(tot[i]),
                prec,
                finetune=finetune,
                nodes=nodes,
                stack_given=stack_given,
                stack=stack,
            )[1]
        out[i] = seen[key]
    return out


def pessimistic(c: Corners, high: np.ndarray) -> Corners:
    """``c`` with every per-token rate at the pessimistic end of its configuration's band."""
    return replace(
        c,
        s_per_token=c.s_per_token * high,
        usd_per_token=c.usd_per_token * high,
        gpu_hours_per_token=c.gpu_hours_per_token * high,
        kwh_per_token=c.kwh_per_token * high,
    )


def ranked_best(
    ch: Choice,
    c: Corners,
    high: np.ndarray | None,
    pins: Pins,
    loss_fn,
    fixed_tokens: float | None,
    mask: np.ndarray | None = None,
) -> tuple[int | None, bool]:
    """(the best configuration, whether the pessimistic ranking chose it). ``high`` None ranks on
    the point estimate (``ch``). Otherwise the configurations that meet the pins at the point
    estimate are ranked at their pessimistic end; when none meets them there, those are ranked on the
    objective at the high end of their bands, on the point's tokens (the caller says so)."""
    ok = ch.feasible if mask is None else ch.feasible & mask
    if high is None:
        return best_index(ch, pins.minimize, ok), False
    worst = choose_tokens(pessimistic(c, high), pins, loss_fn, fixed_tokens)
    i = best_index(worst, pins.minimize, ok)
    if i is not None or not ok.any():
        return i, i is not None
    # none meets the pins at its pessimistic end: of those that meet them at the point, the best on
    # the objective at the band's high end (time, dollars, GPU-hours, energy; the tokens the point's)
    return best_index(at_high(ch, high), pins.minimize, ok), False


def at_high(ch: Choice, high: np.ndarray) -> Choice:
    """``ch``'s plans on the same tokens at the pessimistic end of each band: time, dollars, GPU-hours
    and energy × the band's high multiplier (the loss, a function of the tokens, unchanged)."""
    return replace(
        ch,
        time_s=ch.time_s * high,
        usd=ch.usd * high,
        gpu_hours=ch.gpu_hours * high,
        kwh=ch.kwh * high,
    )


def calibrated_mask(table: ConfigTable) -> np.ndarray:
    """Per configuration: its GPU type's family has measured step times or runs in the calibration."""
    return np.array([family_calibrated(h.family) for h in table.gpus], dtype=bool)[table.gpu_idx]


def check_rank(value: object) -> str:
    """``rank`` as one of RANKS (any case, spaces around it); InputError naming the field."""
    from trilemma.errors import InputError

    v = value.strip().lower() if isinstance(value, str) else value
    if v not in RANKS:
        raise InputError("rank", value, " or ".join(RANKS))
    return str(v)


__all__ = [
    "DEFAULT_RANK",
    "RANKS",
    "band_high",
    "calibrated_mask",
    "check_rank",
    "pessimistic",
    "ranked_best",
]
