"""`solve --distill TEACHER`: distilling from an existing teacher as a lever.

The same pins are solved twice by the one-teacher solve: the student trained on the data alone, and distilled
from the teacher (TrainingPlan.distill: the teacher's forward on every token and its 16-bit weights on every
GPU are in the plan's time, cost and memory, trilemma.estimate.distill; the student's loss is
trilemma.quality.distill's). The optimum is the better of the two optima on the corner minimised (with
--inference-tokens, cost is the lifetime's: training + serving); the other is a runner-up labelled with its
training, and a note says which was picked, the teacher and what it cost. The teacher already exists: its own
training is not priced (Busbridge et al. 2025, arXiv 2502.08606: with a teacher to train as well, supervised
training is the better use of one student's compute).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trilemma.errors import InfeasibleError
from trilemma.solve.methods import solve_each, with_alternatives
from trilemma.solve.result import SolveResult
from trilemma.units import fmt_count, fmt_usd

SCRATCH = "trained from scratch"


def _corner_value(r: SolveResult, corner: str) -> float:
    """The value ``r``'s optimum is ranked on: time, lifetime (or training) dollars, loss or energy."""
    e = r.optimum
    if corner == "time":
        return e.time.total_s
    if corner == "loss":
        return float(r.optimum_loss.mean) if r.optimum_loss is not None else float("inf")
    if corner == "energy":
        return e.cost.energy_kwh
    return r.lifetime["lifetime_usd"] if r.lifetime else e.cost.usd


def _label(teacher: str | None) -> str:
    return SCRATCH if teacher is None else f"distilled from {teacher}"


def solve_distilled(args: dict[str, Any], solve_one: Callable[..., SolveResult]) -> SolveResult:
    """The better of training from scratch and distilling from ``args["distill"]`` (a DistillSpec; module
    docstring)."""
    spec = args["distill"]  # checked: trilemma.quality.distill.distill_of
    found, refused = solve_each(
        solve_one,
        {
            t: {**args, "distill": v, "distill_saving": None}
            for t, v in ((None, None), (spec.teacher, spec))
        },
    )
    if not found:
        raise InfeasibleError(
            "no plan meets the pins: "
            + "; ".join(f"{_label(t)}: {why}" for t, why in refused.items())
        )
    corner = next(iter(found.values())).pins.minimize
    best = min(found, key=lambda t: _corner_value(found[t], corner))
    note = _note(spec, found, refused, best, corner, args["law"])
    return with_alternatives(found, best, _label, note)


def _unsaved(r: SolveResult, law: Any) -> float:
    """The loss ``r``'s distilled optimum would reach with no token saving (k = 1): the band's worse end."""
    from trilemma.quality.predict import predict_loss_block

    e = r.optimum
    return predict_loss_block(
        e.model, e.plan.total_tokens, law=law, precision=str(e.plan.precision)
    ).mean


def _note(spec: Any, found: dict, refused: dict, best: str | None, corner: str, law: Any) -> str:
    """What the comparison found: which training won on ``corner``, the teacher's cost, the quality model."""
    from trilemma.estimate.distill import PRICED, teacher_cost
    from trilemma.quality.bench_fit import published_line
    from trilemma.quality.distill import SOURCE

    lines = [f"distillation: {_label(best)} is the optimum by {corner}"]
    for t, r in found.items():
        e = r.optimum
        usd = r.lifetime["lifetime_usd"] if r.lifetime else e.cost.usd
        lines.append(
            f"{_label(t)}: {fmt_count(e.params.total)} parameters on {fmt_count(e.plan.total_tokens)} "
            f"tokens, {fmt_usd(usd)}{' lifetime' if r.lifetime else ''}"
            + (f", {teacher_cost(e)}" if t is not None else "")
        )
        if t is not None and r.optimum_loss is not None:
            lines[-1] += (
                f", loss {r.optimum_loss.mean:.3f} (at no token saving: {_unsaved(r, law):.3f})"
            )
    lines += [f"{_label(t)}: {why}" for t, why in refused.items()]
    teacher = f"teacher {spec.teacher}: {fmt_count(spec.teacher_params)} parameters, {PRICED}"
    saving = f"a {spec.token_saving:g}× token saving (--distill-saving)"
    gap = published_line(
        spec.teacher, "the teacher"
    )  # the gap to the larger model, where published
    seen = f"; {gap}, against the student's MMLU column" if gap else ""
    return "; ".join(lines) + f"; {teacher}; quality: {saving}, from {SOURCE}{seen}"


__all__ = ["SCRATCH", "solve_distilled"]
