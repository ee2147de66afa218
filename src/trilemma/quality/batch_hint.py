"""The batch as a lever in ``estimate``: when the default batch leaves the pipeline bubble and the exposed
data-parallel communication above ``OVERHEAD_SHARE`` of the step, the batch that brings them under it.

Both overheads shrink with a larger batch at the same GPU count: the 1F1B bubble is (pp − 1)/(m · vp) of
the compute for m micro-batches per pipeline (Narayanan et al. 2021, arXiv 2104.04473, §2.2), and the
gradient reduction is paid once per step however many micro-batches it holds. The batch may not grow
without limit: the hint stays within ``NEAR_OPTIMAL_FACTOR`` of the batch DeepSeek LLM's law puts at the
run's compute (trilemma.quality.batch, the law ``solve`` sizes its batches by), where the paper finds the
loss within 0.25% of the best (Bi et al. 2024, arXiv 2401.02954, §3.1, Fig. 3: "near-optimal"
batches span a wide band around B_opt). So the hint's loss cost is that bound, not a fitted penalty.

Each candidate batch is estimated with the same estimator as the plan (``rerun``), so the hint names the
step share and MFU the batch would reach, not a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from trilemma.errors import TrilemmaError
from trilemma.quality.batch import (
    NEAR_OPTIMAL_FACTOR,
    NEAR_OPTIMAL_LOSS,
    non_embedding_flop_per_token,
    optimal_batch_tokens,
)
from trilemma.units import fmt_count, fmt_duration, parse_batch

if TYPE_CHECKING:
    from trilemma.estimate.result import Estimate
    from trilemma.specs import TrainingPlan

#: the share of the step (bubble + exposed DP communication) above which estimate names a larger batch:
#: a design choice, a fifth of the step, so that at least four fifths of the step is compute or the
#: communication that cannot be hidden by a larger batch (TP, EP, PP sends)
OVERHEAD_SHARE = 0.2
#: the most doublings of the batch tried (a 64× larger batch is past any near-optimal band)
MAX_DOUBLINGS = 6


def overhead_share(est: Estimate) -> float:
    """(pipeline bubble + exposed DP communication) / step time, 0–1, of one estimate."""
    t = est.time
    return (t.bubble_s + t.dp_comm_s) / t.step_s if t.step_s > 0 else 0.0


def _candidates(est: Estimate) -> tuple[list[float], float]:
    """Batches to try (tokens: the plan's doubled, up to the near-optimal band's top and the stage's
    tokens) and the batch law's optimum for the run's compute."""
    stage = est.plan.stages[0]
    want = optimal_batch_tokens(
        non_embedding_flop_per_token(est.model, stage.seq_len) * stage.tokens
    )
    used = est.stages[0].global_batch_sequences * stage.seq_len
    top = min(NEAR_OPTIMAL_FACTOR * want, stage.tokens)
    return [used * 2**k for k in range(1, MAX_DOUBLINGS + 1) if used * 2**k <= top], want


def batch_hint(est: Estimate, rerun: Callable[[TrainingPlan], Estimate]) -> str | None:
    """The note naming the batch that brings bubble + exposed DP communication under OVERHEAD_SHARE of
    the step (or the best within the law's band, saying it falls short); None when the plan's batch was
    given (--global-batch), the overhead is already under it, or the plan is a fine-tune or multi-stage."""
    pl = est.plan
    if pl.finetune is not None or len(pl.stages) != 1 or pl.stages[0].explicit_batch:
        return None
    share = overhead_share(est)
    if share <= OVERHEAD_SHARE:
        return None
    tried, want = _candidates(est)
    best: Any = None
    for tokens in tried:
        stage = pl.stages[0].replace(global_batch_tokens=tokens)
        try:
            e = rerun(pl.replace(stages=(stage,)))
        except TrilemmaError:  # no layout at this batch: try the next
            continue
        if e.time.mfu > (best or est).time.mfu:
            best = e
        if overhead_share(e) <= OVERHEAD_SHARE:
            break
    return _message(est, best, share, want)


def with_batch_notes(
    est: Estimate, batch: Any, rerun: Callable[[TrainingPlan], Estimate]
) -> Estimate:
    """The estimate with its batch notes: a decimal batch taken as a target (``4M`` at seq 4096,
    GlobalBatch.at) and the batch hint (batch_hint)."""
    notes = []
    if batch is not None:
        notes.append(parse_batch(batch, "global-batch").at(est.plan.stages[0].seq_len)[2])
    notes.append(batch_hint(est, rerun))
    kept = tuple(n for n in notes if n is not None)
    return replace(est, warnings=est.warnings + kept) if kept else est


def _message(est: Estimate, best: Estimate | None, share: float, want: float) -> str:
    t, seq = est.time, est.plan.stages[0].seq_len
    head = (
        f"batch: the pipeline bubble ({fmt_duration(t.bubble_s)}) and exposed DP communication "
        f"({fmt_duration(t.dp_comm_s)}) are {share:.0%} of the {fmt_duration(t.step_s)} step, above "
        f"{OVERHEAD_SHARE:.0%}"
    )
    law = (
        f"the {fmt_count(want)} tokens DeepSeek LLM's batch law (the one solve uses) puts at this "
        "compute"
    )
    if best is None:
        return (
            f"{head}; no larger batch up to ×{NEAR_OPTIMAL_FACTOR:g} {law} lowers it: fewer GPUs or "
            "another layout would"
        )
    seqs = best.stages[0].global_batch_sequences
    after, ratio = overhead_share(best), seqs * seq / want
    short = "" if after <= OVERHEAD_SHARE else f" (still above {OVERHEAD_SHARE:.0%})"
    cost = (
        f"inside its near-optimal ×1/{NEAR_OPTIMAL_FACTOR:g}–×{NEAR_OPTIMAL_FACTOR:g} band, where "
        f"the loss is within {NEAR_OPTIMAL_LOSS:.2%} of the best (Bi et al. 2024 §3.1, Fig. 3): "
        f"predicted loss cost at most {NEAR_OPTIMAL_LOSS:.2%}"
        if ratio >= 1 / NEAR_OPTIMAL_FACTOR
        else "below its near-optimal band, as the default is: the larger batch moves toward it, "
        "no loss cost predicted"
    )
    return (
        f"{head}; --global-batch {seqs}seq ({fmt_count(seqs * seq)} tokens) brings them to "
        f"{after:.0%}{short}: MFU {t.mfu:.1%} → {best.time.mfu:.1%}, wall time "
        f"{fmt_duration(t.total_s)} → {fmt_duration(best.time.total_s)}. It is ×{ratio:.2g} of {law}, "
        f"{cost}"
    )


__all__ = [
    "MAX_DOUBLINGS",
    "OVERHEAD_SHARE",
    "batch_hint",
    "overhead_share",
    "with_batch_notes",
]
