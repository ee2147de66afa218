"""Distillation from an existing teacher (``solve --distill TEACHER``): the student trains on the teacher's
output distribution, Minitron-style (Muralidharan et al. 2024, arXiv 2407.14679: the student pruned from the
teacher, then trained with a logit-distillation loss).

What it costs and what it buys are in trilemma.estimate.distill (the teacher's forward and its weights) and
trilemma.quality.distill (the student's loss); this spec only carries the teacher's size and training.
"""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec


class DistillSpec(Spec):
    """The teacher a student is distilled from: its name, total parameters and the tokens it trained on."""

    teacher: str = Field(min_length=1, description="the teacher's model preset name")
    teacher_params: float = Field(gt=0, le=1e14, description="the teacher's total parameters")
    teacher_tokens: float = Field(gt=0, le=1e15, description="tokens the teacher was trained on")


__all__ = ["DistillSpec"]
