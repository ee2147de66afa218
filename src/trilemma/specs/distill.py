"""Distillation from an existing teacher (``solve --distill TEACHER``): the student trains on the teacher's
output distribution, Minitron-style (Muralidharan et al. 2024, arXiv 2407.14679: the student pruned from the
teacher, then trained with a logit-distillation loss).

What it costs and what it buys are in trilemma.estimate.distill (the teacher's forward and its weights) and
trilemma.quality.distill (the student's loss); this spec only carries the teacher's size and training.
"""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec

#: tokens a distilled student saves against training from scratch: Minitron's "up to 40x fewer training
#: tokens per model" (Muralidharan et al. 2024, arXiv 2407.14679, abstract), its best case
TOKEN_SAVING = 40.0
#: distillation tokens per student parameter below which no saving is claimed: Minitron measured its saving
#: retraining its 4B and 8B students on 94B tokens each (NVIDIA's Minitron 4B/8B release: "94B training tokens";
#: the paper, arXiv 2407.14679, abstract: "a fraction (<3%) of the original training data"), the 8B's
#: 94e9 / 8e9 = 11.75 a parameter the fewest; below it the saving is extrapolation, not evidence
MIN_TOKENS_PER_PARAM = 94e9 / 8e9


class DistillSpec(Spec):
    """The teacher a student is distilled from: its name, total parameters and the tokens it trained on."""

    teacher: str = Field(min_length=1, description="the teacher's model preset name")
    teacher_params: float = Field(gt=0, le=1e14, description="the teacher's total parameters")
    teacher_tokens: float = Field(gt=0, le=1e15, description="tokens the teacher was trained on")
    token_saving: float = Field(
        TOKEN_SAVING,
        ge=1.0,
        le=TOKEN_SAVING,
        description="tokens a distilled student saves against training from scratch, from 1 (none) to "
        "TOKEN_SAVING (Minitron's best case); trilemma.quality.distill",
    )


__all__ = ["MIN_TOKENS_PER_PARAM", "TOKEN_SAVING", "DistillSpec"]
