"""What distilling from a teacher adds to a training step (TrainingPlan.distill, trilemma.specs.distill).

- Time: the teacher's forward over the step's tokens. A forward costs 2 FLOPs per parameter per token and a
  training step 6 (Kaplan et al. 2020, arXiv 2001.08361 §2.1), so the teacher's forward is a third of the
  student's step scaled by the size ratio, N_teacher / N_student, at the student's own achieved rate (as the
  RL reference's forward, trilemma.estimate.rl.reference_seconds). Busbridge et al. 2025 (arXiv 2502.08606
  §4) count distillation's compute the same way: 2·N_T FLOPs per student token for the teacher's logits.
- Memory per GPU: the teacher's 16-bit weights, split over the student's tensor and pipeline ranks and, under
  ZeRO-3, its data-parallel ranks (as the RL reference: trilemma.estimate.rl.rollout_memory). Its forward runs
  without gradients, so no activations are kept; its logits (one micro-batch × sequence × vocabulary) are the
  size of the student's and are not added.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.rl import frozen_weight_bytes
from trilemma.specs import TrainingPlan


def teacher_bytes(plan: TrainingPlan, L: LayoutArrays) -> Any:
    """Bytes per GPU of the teacher's 16-bit weights (module docstring); 0 without distillation."""
    zero = np.zeros(np.shape(L.dp), dtype=float)
    if plan.distill is None:
        return zero
    return frozen_weight_bytes(plan.distill.teacher_params, L) + zero


def teacher_seconds(pc: ParamCounts, plan: TrainingPlan, step_s: Any) -> Any:
    """Seconds of the teacher's forward over one step's tokens: step / 3 × N_teacher / N_student (module
    docstring); 0 without distillation."""
    step = np.asarray(step_s, dtype=float)
    if plan.distill is None:
        return 0.0 * step
    return step / 3.0 * plan.distill.teacher_params / np.asarray(pc.total, dtype=float)


#: what of the teacher a distilled plan prices, and what not
PRICED = "its forward (2 FLOPs per parameter per token) priced in the plan, its own training not (it exists)"


def teacher_cost(e: Any) -> str:
    """The teacher's share of a distilled Estimate ``e``'s training: its forward's share of the time and of
    the dollars, its weights per GPU."""
    from trilemma.units import fmt_bytes, fmt_usd

    r = float(
        teacher_seconds(e.params, e.plan, 1.0)
    )  # the teacher's seconds per second of student step
    share = r / (1.0 + r)
    return (
        f"the teacher's forward {share:.0%} of the training time ({fmt_usd(share * e.cost.usd)}), "
        f"its weights {fmt_bytes(e.memory.teacher)} per GPU"
    )


def teacher_line(e: Any, tail: str) -> str:
    """The report's line of a distilled Estimate ``e`` (rich markup): the teacher, its size, what of it the
    plan holds, the token saving, then ``tail`` (where the details are)."""
    from trilemma.units import fmt_bytes, fmt_count

    d = e.plan.distill
    return (
        f"training: [bold]distilled from {d.teacher}[/bold] ({fmt_count(d.teacher_params)} parameters, its "
        f"forward and {fmt_bytes(e.memory.teacher)} of its weights per GPU in the plan; a "
        f"{d.token_saving:g}× token saving: {tail})"
    )


__all__ = ["PRICED", "teacher_bytes", "teacher_cost", "teacher_line", "teacher_seconds"]
