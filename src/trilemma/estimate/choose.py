"""Choose a layout: evaluate every candidate (or the pinned ones), keep the fastest that fits, and
when none can run, explain why in one sentence and say what would work. Used by `estimate`,
`solve` (to re-evaluate its optimum) and `validate`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from trilemma.errors import InputError, LayoutError
from trilemma.estimate.assemble import from_evaluation
from trilemma.estimate.bands import band_factors
from trilemma.estimate.capacity import memory_headroom
from trilemma.estimate.evaluate import Evaluation, best_row, evaluate
from trilemma.estimate.layouts import LayoutArrays, batch_sequences, candidate_layouts
from trilemma.estimate.result import Estimate
from trilemma.presets import constants
from trilemma.specs import ClusterSpec, Layout, ModelSpec, TrainingPlan
from trilemma.specs.axes import AXES, AXIS, R_BATCH, R_DP_TOO_LARGE, R_OOM, reason_text
from trilemma.specs.constants import Constants
from trilemma.specs.parallel import ParallelDims
from trilemma.units import GIB


def pinned_axes(layout: Layout | dict | None) -> dict[str, object]:
    """The axes a layout pins, by name, validated (InputError for a bad value or an unknown axis).
    A Layout pins every axis; a dict the axes it names with a value other than None."""
    if isinstance(layout, Layout):
        return {a.name: a.check(getattr(layout, a.name)) for a in AXES}
    if layout is not None and not isinstance(layout, dict):
        raise InputError("layout", layout, "a Layout or a dict of axes, e.g. {'tp': 2, 'pp': 4}")
    pinned = {}
    for k, v in (layout or {}).items():
        if k not in AXIS:
            raise InputError("layout", k, "one of the axes " + ", ".join(AXIS))
        if v is not None:
            pinned[k] = AXIS[k].check(v)
    return pinned


def evaluate_candidates(
    m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, pinned: dict[str, object], consts: Constants
) -> Evaluation | None:
    """Every candidate layout matching ``pinned`` evaluated at once; None when there is none
    (the pinned degrees do not multiply to a divisor of the GPU count)."""
    max_seq = max(s.seq_len for s in pl.stages)
    cands = candidate_layouts(m, cl.n_gpus, cl.node_size, pinned, max_seq)
    return evaluate(m, cl, pl, cands, consts) if len(cands) else None


def estimate_plan(
    m: ModelSpec,
    cl: ClusterSpec,
    pl: TrainingPlan,
    layout: Layout | dict | None = None,
    how: str = "given",
    consts: Constants | None = None,
    accept: Callable[[Estimate], bool] | None = None,
) -> Estimate:
    """The fastest legal layout that fits, among those matching ``layout`` (see ``pinned_axes``).
    LayoutError with the reason and what would work when none can run. ``accept`` (an engine's check, e.g.
    trilemma.export.expressible): the fastest that fits and that it accepts, trying the others in order of
    time; the fastest of all when it accepts none (the caller's own check then says why)."""
    consts = consts or constants()
    pinned = pinned_axes(layout)
    ev = evaluate_candidates(m, cl, pl, pinned, consts)
    if ev is None:
        raise LayoutError(_no_candidates_message(m, cl, pinned))
    i = best_row(ev)
    tight = i is None
    i = tight_row(cl, ev) if tight else i
    if i is None:
        raise LayoutError(_explain_failure(m, cl, pl, ev, pinned))
    chosen = "given" if pinned else "auto"
    best = from_evaluation(m, how, cl, pl, ev, i, chosen, consts)
    if tight:
        best = replace(best, warnings=(*best.warnings, tight_warning(best)))
    if accept is None or accept(best):
        return best

    def first_accepted(ev: Evaluation) -> Estimate | None:  # in order of time, then memory
        ok = np.flatnonzero(ev.ok)
        for j in ok[np.lexsort((np.asarray(ev.per_gpu_bytes)[ok], np.asarray(ev.total_s)[ok]))]:
            est = from_evaluation(m, how, cl, pl, ev, int(j), chosen, consts)
            if accept(est):
                return est
        return None

    found = first_accepted(ev)
    if (
        found is None and "sp" not in pinned
    ):  # the search keeps sequence parallelism on; an engine may lack it
        off = evaluate_candidates(m, cl, pl, {**pinned, "sp": False}, consts)
        found = None if off is None else first_accepted(off)
    if found is None:
        return best
    return replace(
        found,
        warnings=(
            *found.warnings,
            (
                f"layout: the fastest the export's engine can express; the fastest of all, {best.layout.label(compact=True)}, "
                f"takes {1 - best.time.total_s / found.time.total_s:.1%} less time and it cannot (pin that layout to see "
                "why)"
            ),
        ),
    )


def tight_row(cl: ClusterSpec, ev: Evaluation) -> int | None:
    """When no row fits with margin: the fastest row (ties: less memory) kept out by device memory alone whose
    peak at the memory band's favourable end (its lower end, band_factors("memory")[0]) is within the card —
    a plan that may well fit, as runs published at a card's edge did (docs/memory-verdict.md). None when there
    is none, or when the cluster sets its own headroom (--memory-headroom: the user's margin is refused past)."""
    if cl.memory_headroom is not None:
        return None
    low = band_factors("memory")[0]
    per_gpu = np.asarray(ev.per_gpu_bytes)
    ok = (ev.reasons == R_OOM) & (per_gpu * low <= cl.hardware.hbm_bytes)
    if not ok.any():
        return None
    key = np.where(ok, ev.total_s, np.inf)
    near = ok & (key <= key.min() * (1 + 1e-9))
    return int(np.argmin(np.where(near, per_gpu, np.inf)))


def tight_warning(est: Estimate) -> str:
    """One line for a tight plan (MemoryBreakdown.tight): its band against the card."""
    mem = est.memory
    return (
        f"memory: tight: the peak's 80% band, {mem.per_gpu_bytes_low / GIB:.1f}-{mem.per_gpu_bytes_high / GIB:.1f} GiB "
        f"per GPU, straddles the {mem.capacity_bytes / GIB:.0f} GiB of {est.cluster.hardware.name}: it fits at the band's "
        "favourable end, not with margin, and may run out of memory (a shorter sequence, a smaller micro-batch or "
        "more GPUs leave margin)"
    )


def evaluate_layout(
    m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout, consts: Constants | None = None
) -> Estimate:
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
    dims = ParallelDims(tp=tp, cp=cp, pp=pp, dp=pinned.get("dp", 1))
    if "dp" in pinned and dims.divides(cl.n_gpus):
        return (
            f"layout: tp={tp} × cp={cp} × pp={pp} × dp={pinned['dp']} = {dims.n_gpus} "
            f"is not the {cl.n_gpus} GPUs (tp × cp × pp × dp must equal the GPU count)"
        )
    return (
        f"layout: tp={tp} × cp={cp} × pp={pp} does not divide {cl.n_gpus} GPUs "
        f"(tp × cp × pp × dp must equal the GPU count)"
    )


def _explain_failure(
    m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, ev: Evaluation, pinned: dict
) -> str:
    bits = ev.reasons
    only_oom = bits == R_OOM
    gib = GIB
    where = f"{m.name} on {cl.n_gpus}× {cl.hardware.name}"
    if only_oom.any():  # legal layouts exist, none fits: show the leanest
        j = int(np.argmin(np.where(only_oom, ev.per_gpu_bytes, np.inf)))
        lay = ev.layouts.row(j)
        head = memory_headroom(cl)
        usable = cl.hardware.hbm_bytes * (1 - head)
        msg = (
            f"memory: no {'given ' if pinned else ''}layout of {where} fits: the leanest, {_lay(lay)}, needs "
            f"{ev.per_gpu_bytes[j] / gib:.1f} GiB per GPU and {cl.hardware.name} has {cl.hardware.hbm_bytes / gib:.0f} GiB"
            + (
                f", of which a plan may use {usable / gib:.1f} GiB ({head:.0%} headroom, set by --memory-headroom)"
                if cl.memory_headroom is not None and head > 0
                else f" (its 80% band's favourable end: {ev.per_gpu_bytes[j] * band_factors('memory')[0] / gib:.1f} GiB)"
                if head > 0
                else ""
            )
        )
    else:  # the candidate with the fewest problems stands for "why"
        nbits = np.array([bin(int(b)).count("1") for b in bits])
        j = int(np.argmin(nbits))
        lay = ev.layouts.row(j)
        msg = (
            f"layout: no {'given ' if pinned else ''}layout of {where} is legal; closest is {_lay(lay)}: "
            + "; ".join(reason_text(int(bits[j])))
        )
    if pinned:
        try:
            alt = estimate_plan(m, cl, pl, None)
            msg += f". What would work: {_lay(alt.layout)} ({alt.memory.per_gpu_bytes / gib:.1f} GiB per GPU)"
        except LayoutError:
            msg += ". No layout works on this cluster: use more GPUs, a larger-memory device or a smaller model"
    elif only_oom.any():
        msg += ". Use more GPUs, a larger-memory device, a shorter sequence or a smaller model" + (
            ", or a smaller --memory-headroom"
            if cl.memory_headroom is not None and cl.memory_headroom > 0
            else ""
        )
    elif (bits & R_DP_TOO_LARGE).all():
        msg += ". Use fewer GPUs or a larger global batch"
    elif (bits & R_BATCH).all():
        msg += _batch_suggestions(cl, pl, ev)
    return msg


def _batch_suggestions(cl: ClusterSpec, pl: TrainingPlan, ev: Evaluation) -> str:
    """What would split an explicit global batch that no layout on these GPUs divides: the nearest
    batches (in sequences, below and above) that a data-parallel degree of the otherwise legal layouts
    divides, and the nearest GPU counts whose layouts divide the batch as given (the same model-parallel
    groups, tp · cp · pp, times a divisor of the batch). Layouts that also fit in memory are preferred.
    Empty when the batch is not the only problem."""
    stage = pl.stages[0]
    seqs = batch_sequences(stage)
    L = ev.layouts
    ok = (ev.reasons & ~R_BATCH) == 0  # legal and fitting but for the batch
    if not ok.any():
        ok = (ev.reasons & ~(R_BATCH | R_OOM)) == 0  # legal but for the batch, memory aside
    if not ok.any():
        return ""
    dps = sorted({int(d) for d in np.asarray(L.dp)[ok]})
    groups = sorted({int(g) for g in (np.asarray(L.tp) * np.asarray(L.cp) * np.asarray(L.pp))[ok]})

    def splits(b: int) -> int | None:
        return next((d for d in reversed(dps) if b % d == 0), None)

    def pick(side: range) -> int | None:
        """Within 10% of the batch (the rounding a target batch may take, legal_mask), the batch whose
        data-parallel degree is largest (the shallowest model-parallel groups), nearest on ties; else
        the nearest that any degree divides."""
        near = [b for b in side if abs(b - seqs) <= 0.1 * seqs and splits(b)]
        if near:
            return max(near, key=lambda b: (splits(b), -abs(b - seqs)))
        return next((b for b in side if splits(b)), None)

    below = pick(range(seqs - 1, 0, -1))
    above = pick(range(seqs + 1, 4 * seqs + max(dps)))
    seq = stage.seq_len
    opts = [f"{b:,} sequences ({b * seq:,} tokens, dp {splits(b)})" for b in (below, above) if b]
    divisors = [d for d in range(1, seqs + 1) if seqs % d == 0]
    counts = sorted({g * d for g in groups for d in divisors} - {cl.n_gpus})
    fewer = max((c for c in counts if c < cl.n_gpus), default=None)
    more = min((c for c in counts if c > cl.n_gpus), default=None)
    gpus = " or ".join(f"{c:,}" for c in (fewer, more) if c)
    out = (
        f". The {seqs:,}-sequence batch ({seqs * seq:,} tokens) splits evenly over {cl.n_gpus:,} GPUs in no "
        f"layout; --global-batch " + " or ".join(opts) + " would"
    )
    return out + (f", or --gpus {gpus} with this batch" if gpus else "")


def _lay(a: Layout) -> str:
    return a.summary()


__all__ = ["estimate_plan", "evaluate_candidates", "evaluate_layout", "pinned_axes"]
