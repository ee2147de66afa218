"""Choose a layout: evaluate every candidate (or the pinned ones), keep the fastest that fits, and
when none can run, explain why in one sentence and say what would work. Used by `estimate`,
`solve` (to re-evaluate its optimum) and `validate`."""

from __future__ import annotations

import numpy as np

from trilemma.errors import InputError, LayoutError
from trilemma.estimate.evaluate import Evaluation, best_row, evaluate
from trilemma.estimate.layouts import LayoutArrays, candidate_layouts
from trilemma.estimate.result import Estimate, from_evaluation
from trilemma.presets import constants
from trilemma.specs import ClusterSpec, Layout, ModelSpec, TrainingPlan
from trilemma.specs.constants import Constants
from trilemma.specs.axes import AXES, AXIS, R_DP_TOO_LARGE, R_OOM, reason_text
from trilemma.units import GIB


def pinned_axes(layout: Layout | dict | None) -> dict[str, object]:
    """The axes a layout pins, by name, validated (InputError for a bad value or an unknown axis).
    A Layout pins every axis; a dict the axes it names with a value other than None."""
    if isinstance(layout, Layout):
        return {a.name: a.check(getattr(layout, a.name)) for a in AXES}
    pinned = {}
    for k, v in (layout or {}).items():
        if k not in AXIS:
            raise InputError("layout", k, "one of the axes " + ", ".join(AXIS))
        if v is not None:
            pinned[k] = AXIS[k].check(v)
    return pinned


def evaluate_candidates(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, pinned: dict[str, object],
                        consts: Constants) -> Evaluation | None:
    """Every candidate layout matching ``pinned`` evaluated at once; None when there is none
    (the pinned degrees do not multiply to a divisor of the GPU count)."""
    max_seq = max(s.seq_len for s in pl.stages)
    cands = candidate_layouts(m, cl.n_gpus, cl.node_size, pinned, max_seq)
    return evaluate(m, cl, pl, cands, consts) if len(cands) else None


def estimate_plan(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout | dict | None = None,
                  how: str = "given", consts: Constants | None = None) -> Estimate:
    """The fastest legal layout that fits, among those matching ``layout`` (see ``pinned_axes``).
    LayoutError with the reason and what would work when none can run."""
    consts = consts or constants()
    pinned = pinned_axes(layout)
    ev = evaluate_candidates(m, cl, pl, pinned, consts)
    if ev is None:
        raise LayoutError(_no_candidates_message(m, cl, pinned))
    i = best_row(ev)
    if i is None:
        raise LayoutError(_explain_failure(m, cl, pl, ev, pinned))
    return from_evaluation(m, how, cl, pl, ev, i, "given" if pinned else "auto", consts)


def evaluate_layout(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout,
                    consts: Constants | None = None) -> Estimate:
    """All corners of one fully given layout, even when it does not fit (``memory.fits`` is then
    False); raises LayoutError only when the layout is illegal for reasons other than memory."""
    consts = consts or constants()
    ev = evaluate(m, cl, pl, LayoutArrays.from_layouts([layout]), consts)
    bits = int(ev.reasons[0]) & ~R_OOM
    if bits:
        raise LayoutError(f"layout: {_lay(layout)} cannot run: " + "; ".join(reason_text(bits)))
    return from_evaluation(m, "given", cl, pl, ev, 0, "given", consts)


def _no_candidates_message(m: ModelSpec, cl: ClusterSpec, pinned: dict) -> str:
    tp, pp, cp = pinned.get("tp", 1), pinned.get("pp", 1), pinned.get("cp", 1)
    if "dp" in pinned and cl.n_gpus % (tp * pp * cp) == 0:
        return (f"layout: tp={tp} × cp={cp} × pp={pp} × dp={pinned['dp']} = {tp * cp * pp * pinned['dp']} "
                f"is not the {cl.n_gpus} GPUs (tp × cp × pp × dp must equal the GPU count)")
    return (f"layout: tp={tp} × cp={cp} × pp={pp} does not divide {cl.n_gpus} GPUs "
            f"(tp × cp × pp × dp must equal the GPU count)")


def _explain_failure(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, ev: Evaluation, pinned: dict) -> str:
    bits = ev.reasons
    only_oom = bits == R_OOM
    gib = GIB
    where = f"{m.name} on {cl.n_gpus}× {cl.hardware.name}"
    if only_oom.any():  # legal layouts exist, none fits: show the leanest
        j = int(np.argmin(np.where(only_oom, ev.per_gpu_bytes, np.inf)))
        lay = ev.layouts.row(j)
        msg = (f"memory: no {'given ' if pinned else ''}layout of {where} fits: the leanest, {_lay(lay)}, needs "
               f"{ev.per_gpu_bytes[j] / gib:.1f} GiB per GPU and {cl.hardware.name} has {cl.hardware.hbm_bytes / gib:.0f} GiB")
    else:  # the candidate with the fewest problems stands for "why"
        nbits = np.array([bin(int(b)).count("1") for b in bits])
        j = int(np.argmin(nbits))
        lay = ev.layouts.row(j)
        msg = (f"layout: no {'given ' if pinned else ''}layout of {where} is legal; closest is {_lay(lay)}: "
               + "; ".join(reason_text(int(bits[j]))))
    if pinned:
        try:
            alt = estimate_plan(m, cl, pl, None)
            msg += f". What would work: {_lay(alt.layout)} ({alt.memory.per_gpu_bytes / gib:.1f} GiB per GPU)"
        except LayoutError:
            msg += ". No layout works on this cluster: use more GPUs, a larger-memory device or a smaller model"
    elif only_oom.any():
        msg += ". Use more GPUs, a larger-memory device, a shorter sequence or a smaller model"
    elif (bits & R_DP_TOO_LARGE).all():
        msg += ". Use fewer GPUs or a larger global batch"
    return msg


def _lay(a: Layout) -> str:
    return a.summary()


__all__ = ["estimate_plan", "evaluate_candidates", "evaluate_layout", "pinned_axes"]
