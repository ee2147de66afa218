"""Choose a layout: evaluate every candidate (or the pinned ones), keep the fastest that fits, and
when none can run, explain why in one sentence and say what would work. Used by `estimate`,
`solve` (to re-evaluate its optimum) and `validate`."""

from __future__ import annotations

import numpy as np

from trilemma.errors import InputError, LayoutError
from trilemma.estimate.evaluate import Evaluation, best_row, evaluate
from trilemma.estimate.layouts import LayoutArrays, candidate_layouts
from trilemma.estimate.result import Estimate, from_evaluation
from trilemma.specs import ClusterSpec, Layout, ModelSpec, TrainingPlan
from trilemma.specs.axes import AXES, AXIS, R_DP_TOO_LARGE, R_OOM, reason_text


def estimate_plan(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout | dict | None = None,
                  how: str = "given") -> Estimate:
    """The fastest legal layout that fits, among those matching ``layout`` (a Layout pins every
    axis; a dict pins the axes it names, by their names in trilemma.specs.axes). LayoutError with
    the reason and what would work when none can run."""
    if isinstance(layout, Layout):
        pinned = {a.name: a.check(getattr(layout, a.name)) for a in AXES}
    else:
        pinned = {}
        for k, v in (layout or {}).items():
            if k not in AXIS:
                raise InputError("layout", k, "one of the axes " + ", ".join(AXIS))
            if v is not None:
                pinned[k] = AXIS[k].check(v)
    max_seq = max(s.seq_len for s in pl.stages)
    cands = candidate_layouts(m, cl.n_gpus, cl.node_size, pinned, max_seq)
    if len(cands) == 0:
        raise LayoutError(_no_candidates_message(m, cl, pinned))
    ev = evaluate(m, cl, pl, cands)
    i = best_row(ev)
    if i is None:
        raise LayoutError(_explain_failure(m, cl, pl, ev, pinned))
    return from_evaluation(m, how, cl, pl, ev, i, "given" if pinned else "auto")


def evaluate_layout(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout) -> Estimate:
    """All corners of one fully given layout, even when it does not fit (``memory.fits`` is then
    False); raises LayoutError only when the layout is illegal for reasons other than memory."""
    ev = evaluate(m, cl, pl, LayoutArrays.from_layouts([layout]))
    bits = int(ev.reasons[0]) & ~R_OOM
    if bits:
        raise LayoutError(f"layout: {_lay(layout)} cannot run: " + "; ".join(reason_text(bits)))
    return from_evaluation(m, "given", cl, pl, ev, 0, "given")


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
    gib = 2.0**30
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


__all__ = ["estimate_plan", "evaluate_layout"]
