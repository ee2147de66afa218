"""The quality corner attached to an estimate: the predicted loss and benchmark scores of a model trained
from scratch (trilemma.quality), and for a fine-tune the notes that take their place."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trilemma.errors import InputError
from trilemma.estimate.finetune import CLASSIFIER_NO_LOSS, FINETUNE_NO_LOSS
from trilemma.estimate.result import Estimate
from trilemma.specs import Task


def _check_estimate(est: Any) -> None:
    if not isinstance(est, Estimate):
        raise InputError("estimate", est, "an Estimate (trilemma.api.estimate)")


#: the fewest optimizer steps a fine-tune is planned with before a warning: a fifth of LIMA's 469 (1,000
#: examples × 15 epochs / batch 32; Zhou et al. 2023, arXiv 2305.11206 §3), the shortest published
#: instruction-tuning recipe of those the presets cite (Alpaca: 52K × 3 / 128 = 1,218)
MIN_FINETUNE_STEPS = 100


def few_steps_warning(steps: float, tokens: float, seq: int) -> tuple[str, ...]:
    """A fine-tune of fewer than MIN_FINETUNE_STEPS optimizer steps: one warning with the global batch (in
    sequences of ``seq`` tokens) that gives that many; () otherwise."""
    if steps >= MIN_FINETUNE_STEPS:
        return ()
    batch = max(1, int(tokens // (MIN_FINETUNE_STEPS * seq)))
    return (
        f"few optimizer steps: {steps:,.0f} for {tokens:,.0f} tokens — a fine-tune usually takes at least "
        f"{MIN_FINETUNE_STEPS}; --global-batch {batch * seq} ({batch} sequences of {seq}) gives "
        f"{tokens / (batch * seq):,.0f}",
    )


def with_loss(
    est: Estimate, law: str | None = None, unique_tokens: float | None = None
) -> Estimate:
    """The estimate with its quality corner: predicted loss with a band (trilemma.quality). A fine-tune gets
    none: the laws predict the loss of a model trained from scratch on the plan's tokens, not of an existing
    model tuned on them (FINETUNE_NO_LOSS)."""
    from trilemma.estimate.rl import rl_note
    from trilemma.quality.distill import distill_note, learnt_tokens
    from trilemma.quality.predict import predict_loss_block

    _check_estimate(est)
    if est.plan.finetune is not None:
        few = few_steps_warning(est.time.steps, est.plan.total_tokens, est.stages[0].seq_len)
        rl = (rl_note(est),) if est.plan.rl is not None else ()
        base = published_note(
            est.model.name, "the base model", "a fine-tune's general scores start there"
        )
        return replace(est, warnings=est.warnings + (FINETUNE_NO_LOSS, *base, *few, *rl))
    if est.plan.task == Task.CLASSIFICATION:
        return replace(est, warnings=est.warnings + (CLASSIFIER_NO_LOSS,))
    # a distilled student reads the law at the tokens its loss is worth (trilemma.quality.distill)
    tokens = learnt_tokens(est.model, est.plan, law, unique_tokens)
    prec = str(est.plan.precision)
    pred = predict_loss_block(
        est.model, tokens, law=law, unique_tokens=unique_tokens, precision=prec
    )
    scores = scores_of(est, tokens)
    taught = ()
    if (d := est.plan.distill) is not None:
        gap = "the student's scores are under 'benchmarks'"
        taught = (distill_note(est, tokens), *published_note(d.teacher, "the teacher", gap))
    warnings = est.warnings + taught + tuple(pred.warnings)
    return replace(est, loss=pred, benchmarks=scores, warnings=warnings)


def published_note(model: str, role: str, tail: str) -> tuple[str, ...]:
    """A note of ``model``'s published benchmark scores (trilemma.quality.benchmarks.published_line), ``role``
    naming it and ``tail`` saying what to read it against; () where none is shipped."""
    from trilemma.quality.bench_fit import published_line

    line = published_line(model, role)
    return () if line is None else (f"quality: {line}; {tail}",)


def scores_of(est: Estimate, tokens: float | None = None) -> dict[str, Any]:
    """The ``quality.benchmarks`` block of a model trained from scratch as ``est`` plans it: active
    parameters N and its tokens D, or ``tokens`` where given (a distilled student's worth;
    trilemma.quality.benchmarks.predict; fractions 0-1)."""
    from trilemma.quality.benchmarks import predict

    d = float(est.plan.total_tokens if tokens is None else tokens)
    return predict(float(est.params.active), d)  # 6·N·D: from scratch


__all__ = ["MIN_FINETUNE_STEPS", "few_steps_warning", "published_note", "scores_of", "with_loss"]
