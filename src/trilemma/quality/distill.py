"""The loss of a student distilled from an existing teacher (``solve --distill TEACHER``), and the teacher
spec from a model preset.

No published distillation law with its constants is used here: Busbridge et al. 2025 ("Distillation Scaling
Laws", arXiv 2502.08606) fit one, L_S = L_T + L_T^-c0 · (1 + (L_T / (L̃_S·d1))^(1/f1))^(-c1·f1) · (A'/N^α' +
B'/D^β')^γ', but its distillation constants (c0, c1, d1, f1, A', B', α', β', γ') could not be read from any
source reachable here. Two of its results need no constants and are kept:

- the student never reaches its teacher: the law is L_T plus a positive term, so L_S > L_T;
- the gain is bounded: with enough student tokens distillation and supervised training reach the same loss
  (the abstract: distillation outperforms supervised pretraining only "until a compute level which grows
  predictably with student size").

The gain itself is Minitron's published token saving (Muralidharan et al. 2024, "Compact Language Models via
Pruning and Knowledge Distillation", arXiv 2407.14679, abstract): a student pruned from the teacher and
distilled "requires up to 40x fewer training tokens per model compared to training from scratch". So

    L_S(N, D) = max(L(N, k·D), L_T),   L_T = L(N_teacher, D_teacher),   k = TOKEN_SAVING

with L the supervised law the plan uses (the teacher read on the same law: the same data is assumed). k is
Minitron's best case, so the point is optimistic; the band runs down to k = 1 (no saving, Busbridge's large-
compute limit), printed beside the point; --distill-saving sets k from 1 to 40. A teacher no larger than the
student saves nothing (k = 1), and neither does a student given fewer distillation tokens per parameter than
Minitron's runs had (MIN_TOKENS_PER_PARAM, 11.75: its 8B on 94B tokens): the saving was measured there, not
below it, so a 3B student on 1.5B tokens is not read as one on 60B.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.specs.distill import MIN_TOKENS_PER_PARAM, TOKEN_SAVING, DistillSpec

#: the source line printed with every distilled plan
SOURCE = (
    "Minitron's up-to-40× token saving (Muralidharan et al. 2024, arXiv 2407.14679), never below the "
    "teacher's own loss (Busbridge et al. 2025, arXiv 2502.08606: L_S = L_T + a positive term)"
)


def teacher_spec(name: Any, token_saving: Any = None) -> DistillSpec:
    """The DistillSpec of a model preset ``name`` with its published training tokens, at ``token_saving``
    (None: TOKEN_SAVING); InputError naming --distill or --distill-saving otherwise."""
    from trilemma.estimate.params import param_counts
    from trilemma.resolve import resolve_model

    allowed = (
        "a model preset with its published training tokens, e.g. llama3.1-8b (trilemma presets)"
    )
    if not isinstance(name, str) or not name.strip():
        raise InputError("distill", name, allowed)
    try:
        m = resolve_model(name.strip())[0]
    except InputError:
        raise InputError("distill", name, allowed) from None
    if m.tokens is None:
        raise InputError("distill", name, allowed + f": {name} has no published training tokens")
    total = float(param_counts(m).total)
    k = check_saving(token_saving)
    return DistillSpec(
        teacher=name.strip(), teacher_params=total, teacher_tokens=float(m.tokens), token_saving=k
    )


def distill_of(distill: Any, token_saving: Any = None, finetune: Any = None) -> DistillSpec | None:
    """--distill and --distill-saving as one DistillSpec (None: neither given), checked the same for every
    verb and entry point: the saving only with a teacher, no teacher with a fine-tune method ``finetune``
    (distillation pretrains); a DistillSpec passes as it is."""
    if distill is None:
        if token_saving is not None:
            raise InputError("distill-saving", token_saving, "a value only with --distill TEACHER")
        return None
    spec = distill if isinstance(distill, DistillSpec) else teacher_spec(distill, token_saving)
    if finetune is not None:
        raise InputError(
            "distill", spec.teacher, "no value with --finetune (distillation pretrains)"
        )
    return spec


def check_saving(value: Any) -> float:
    """--distill-saving checked: a number from 1 (no saving) to TOKEN_SAVING; None gives TOKEN_SAVING."""
    if value is None:
        return TOKEN_SAVING
    allowed = f"a number from 1 (no saving) to {TOKEN_SAVING:g} (Minitron's best case)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError("distill-saving", value, allowed)
    if not 1.0 <= float(value) <= TOKEN_SAVING:
        raise InputError("distill-saving", value, allowed)
    return float(value)


def saving(n_total: Any, spec: DistillSpec, tokens: Any) -> np.ndarray:
    """The token saving per student size ``n_total`` trained on ``tokens``: the spec's (TOKEN_SAVING unless
    --distill-saving gave one) below the teacher's size and at MIN_TOKENS_PER_PARAM or more distillation
    tokens a parameter (Minitron's measured regime), 1 otherwise."""
    n = np.asarray(n_total, dtype=float)
    inside = (n < spec.teacher_params) & (
        np.asarray(tokens, dtype=float) >= MIN_TOKENS_PER_PARAM * n
    )
    return np.where(inside, spec.token_saving, 1.0)


def teacher_loss(law: Any, spec: DistillSpec) -> float:
    """The teacher's loss on ``law`` at its size and training tokens (16-bit training)."""
    from trilemma.quality.predict import loss_mean

    # the laws that count non-embedding parameters read the total here: the teacher's split is not carried
    n = spec.teacher_params
    return float(loss_mean(law, n, n, spec.teacher_tokens, precision="bf16"))


def distilled_loss_fn(loss_fn: Callable[..., np.ndarray], law: Any, spec: DistillSpec) -> Callable:
    """``loss_fn(n_tot, n_non, tokens, precision)`` of the supervised law made a distilled student's
    (module docstring): max(loss at k × tokens, the teacher's loss)."""
    floor = teacher_loss(law, spec)

    def fn(n_tot: Any, n_non: Any, tokens: Any, precision: Any) -> np.ndarray:
        k = saving(n_tot, spec, tokens)
        return np.maximum(
            loss_fn(n_tot, n_non, k * np.asarray(tokens, dtype=float), precision), floor
        )

    return fn


def effective_tokens(
    law: Any, spec: DistillSpec, n_tot: float, n_non: float, tokens: float, precision: Any,
    unique_tokens: float | None = None,
) -> float:  # fmt: skip
    """The supervised tokens whose loss on ``law`` is the distilled student's (distilled_loss_fn): k ×
    tokens, or fewer where that would pass below the teacher's loss."""
    from trilemma.quality.forms import tokens_for_loss
    from trilemma.quality.predict import loss_mean

    d = float(saving(n_tot, spec, tokens)) * float(tokens)
    floor = teacher_loss(law, spec)

    def at(x: np.ndarray) -> np.ndarray:
        return np.asarray(loss_mean(law, n_tot, n_non, x, unique_tokens, precision))

    if float(at(np.asarray([d]))[0]) >= floor:
        return d
    return float(tokens_for_loss(at, floor, (1,), d_min=float(tokens), d_max=d, iters=48)[0])


def learnt_tokens(
    model: Any, plan: Any, law: Any = None, unique_tokens: float | None = None
) -> float:
    """The tokens the quality corner reads for ``plan``: its own, or, distilled (plan.distill), the
    supervised tokens its student's loss is worth (effective_tokens)."""
    from trilemma.estimate.params import param_counts

    if plan.distill is None:
        return float(plan.total_tokens)
    pc = param_counts(model)
    prec = str(plan.precision)
    tokens = float(plan.total_tokens)
    return effective_tokens(
        law, plan.distill, pc.total, pc.non_embedding, tokens, prec, unique_tokens
    )


def distill_note(e: Any, tokens: float) -> str:
    """The note of a distilled Estimate ``e`` whose loss was read at ``tokens`` (learnt_tokens): the
    teacher's share of the training, and how the student's quality is read."""
    from trilemma.estimate.distill import PRICED, teacher_cost
    from trilemma.units import fmt_count

    d = e.plan.distill
    return (
        f"distillation: {teacher_cost(e)}; teacher {d.teacher}: {fmt_count(d.teacher_params)} parameters, "
        f"{PRICED}; quality read at {fmt_count(tokens)} tokens ({fmt_count(e.plan.total_tokens)} at a "
        f"{d.token_saving:g}× token saving, --distill-saving; never below the teacher's loss), from {SOURCE}"
    )


__all__ = [
    "SOURCE",
    "distill_note",
    "TOKEN_SAVING",
    "distilled_loss_fn",
    "effective_tokens",
    "learnt_tokens",
    "saving",
    "teacher_loss",
    "check_saving",
    "distill_of",
    "teacher_spec",
]
