"""What the ladder runs on and what it runs: this machine's cores and ``local`` profile, and the grid.

``choose_grid`` turns the user's options (``--tiny``, ``--sizes`` × ``--tokens-per-param``, ``--minutes``,
or none: the default grid) into a ``GridChoice``; ``local_profile`` finds (or measures) the ``local``
hardware profile the predicted times come from. No torch here unless a profile must be measured.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

from trilemma.errors import InputError
from trilemma.ladder.plan import (
    DEFAULT,
    EVAL_TOKENS,
    FIT_SIZES,
    TINY,
    WIDTHS,
    GridChoice,
    make_plan,
    rung,
)
from trilemma.ladder.shapes import params_of, shape_for_params
from trilemma.units import MINUTE

__all__ = ["choose_grid", "local_profile"]


def _cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def local_profile(measure: bool = True) -> tuple[Any, str | None]:
    """The ``local`` hardware profile; measured now (the probe's microbenchmarks) when missing and
    torch is installed; else (None, why predictions are unavailable)."""
    from trilemma.errors import UnknownPresetError
    from trilemma.presets import get_hardware

    try:
        hw = get_hardware("local")
    except UnknownPresetError:
        hw = None
    if hw is not None:
        if hw.vendor != "CPU":
            return None, (
                f"the `local` profile describes a {hw.vendor} device and the ladder trains on the CPU: "
                "predicted times are unavailable"
            )
        return hw, None
    if not measure:
        return (
            None,
            "no `local` hardware profile yet (run `trilemma probe`): predicted times are unavailable",
        )
    try:
        from trilemma.probe import bench, machine
        from trilemma.probe.profile import local_hardware, save_local_profile
    except ImportError:
        return (
            None,
            "no `local` hardware profile and no torch to measure one: predicted times are unavailable",
        )
    meas = bench.machine("cpu", ("fp32",), threads=machine.usable_cores())
    hw = local_hardware(meas)
    path = save_local_profile(hw, meas)
    return (
        hw,
        f"no `local` hardware profile yet: measured this machine ({meas.seconds:.0f} s) and saved it to {path}",
    )


def _ratios(values: list[float] | tuple[float, ...] | None) -> tuple[float, ...] | None:
    """Tokens-per-parameter ratios, distinct and sorted; None when not given."""
    if values is None:
        return None
    out = tuple(sorted({float(v) for v in values}))
    if not out:
        raise InputError("tokens-per-param", values, "one or more ratios, e.g. 5,10,20,40")
    return out


def choose_grid(
    *,
    sizes: list[float] | None,
    tokens_per_param: list[float] | None,
    holdout_ratio: float | None,
    minutes: float | None,
    tiny: bool,
    hw: Any,
    workers: int,
) -> GridChoice:
    """The grid from the options: ``tiny``, ``sizes`` (parameters; the largest held out), ``minutes`` (the
    largest rung predicted to fit on ``hw`` with ``workers``), else the default; ``tokens_per_param`` and
    ``holdout_ratio`` (tokens per parameter) override the grid's ratios. InputError for bad options."""
    ratios = _ratios(tokens_per_param)
    if tiny and (sizes or minutes):
        raise InputError(
            "tiny", "--tiny", "alone: --tiny is a fixed grid (no --sizes or --minutes with it)"
        )
    if minutes is not None and not (minutes > 0):
        raise InputError("minutes", minutes, "a positive number of minutes")
    if tiny:
        base = TINY
    elif sizes:
        shapes = sorted({shape_for_params(float(s)) for s in sizes}, key=params_of)
        if len(shapes) < len(sizes):
            raise InputError(
                "sizes",
                ",".join(f"{s:g}" for s in sizes),
                "distinct sizes (two map to the same shape)",
            )
        if len(shapes) < 4:
            raise InputError(
                "sizes",
                ",".join(f"{s:g}" for s in sizes),
                "at least 4 sizes: 3 to fit on and the largest, held out",
            )
        base = GridChoice(
            fit_widths=tuple(s.d_model for s in shapes[:-1]),
            ratios=ratios or DEFAULT.ratios,
            held_out_width=shapes[-1].d_model,
            held_out_ratio=DEFAULT.held_out_ratio,
            name="sizes given",
        )
    elif minutes is not None:
        if hw is None:
            raise InputError(
                "minutes",
                minutes,
                "a `local` hardware profile to predict times with (run `trilemma probe`)",
            )
        base = grid_for_minutes(
            minutes, hw=hw, workers=workers, ratios=ratios, held_out_ratio=holdout_ratio
        )
    else:
        base = DEFAULT
    r = ratios or base.ratios
    ho = (
        holdout_ratio
        if holdout_ratio is not None
        else (
            base.held_out_ratio
            if min(r) <= base.held_out_ratio <= max(r)
            else sorted(r)[len(r) // 2]
        )
    )
    return GridChoice(
        fit_widths=base.fit_widths,
        ratios=r,
        held_out_width=base.held_out_width,
        held_out_ratio=ho,
        eval_tokens=base.eval_tokens,
        name=base.name,
    )


def grid_for_minutes(
    minutes: float,
    *,
    hw: Any,
    workers: int,
    ratios: tuple[float, ...] | None = None,
    held_out_ratio: float | None = None,
) -> GridChoice:
    """The largest rung of the width ladder whose predicted wall time fits ``minutes``."""
    ratios = ratios or DEFAULT.ratios
    ho = (
        held_out_ratio
        if held_out_ratio is not None
        else (
            DEFAULT.held_out_ratio
            if min(ratios) <= DEFAULT.held_out_ratio <= max(ratios)
            else sorted(ratios)[len(ratios) // 2]
        )
    )
    best, first = None, None
    for k in range(len(WIDTHS) - FIT_SIZES):
        g = rung(k, tuple(ratios), ho)
        plan = make_plan(g, hw=hw, workers=workers, threads=1)
        first = first if first is not None else plan.predicted_wall_s
        if plan.predicted_wall_s is not None and plan.predicted_wall_s <= minutes * MINUTE:
            best = replace(g, eval_tokens=TINY.eval_tokens if k == 0 else EVAL_TOKENS)
        else:
            break
    if best is None:
        raise InputError(
            "minutes",
            f"{minutes:g}",
            f"at least {math.ceil((first or 0) / MINUTE)} minutes: the smallest ladder "
            f"is predicted to take {first or 0:.0f} s here (or fewer --tokens-per-param)",
        )
    return best
