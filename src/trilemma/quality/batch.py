"""The global batch as a function of compute: DeepSeek LLM's hyper-parameter law.

Bi et al. 2024, "DeepSeek LLM: Scaling Open-Source Language Models with Longtermism", arXiv
2401.02954, §3.1, Eq. 1: the batch (and learning rate) with the best loss at a compute budget C,

    B_opt = 0.2920 · C^0.3271 tokens,  η_opt = 0.3118 · C^−0.1250,

with C = M·D FLOPs, M the non-embedding FLOPs per token, 72·n_layer·d_model² + 6·n_layer·d_model·l_seq
for their blocks (6 × the non-embedding matmul weights, and the attention core with the causal half),
D the training tokens. The paper finds a wide band of near-optimal batches around it (its Fig. 3), and
the loss is flat within it, so the law sets the batch without a loss term. The fit comes from small
grid searches and is extrapolated to large budgets; the paper's own 7B and 67B runs (batch 2,304 and
4,608 sequences of 4,096 tokens) sit on it. Kaplan et al. 2020 (arXiv 2001.08361, §5.1) give the other
bound: above the critical batch B_crit(L) ≈ 2e8 · L^−4.8 tokens, more batch buys no fewer steps.

``solve`` uses it to choose each model's batch: D is the user's ``--tokens`` or, when tokens are free,
Hoffmann et al. 2022's ~20 tokens per parameter, and the batch is rounded to a power-of-two number of
sequences (a layout divides it).
"""

from __future__ import annotations

import math

from trilemma.estimate.flops import attention_core_flop_fwd
from trilemma.estimate.params import param_counts
from trilemma.specs import ModelSpec

#: B_opt = BATCH_COEF · C^BATCH_EXP tokens (DeepSeek LLM, arXiv 2401.02954, Eq. 1)
BATCH_COEF, BATCH_EXP = 0.2920, 0.3271
#: the band around B_opt where the batch is near-optimal: solve warns outside ×1/2–×2 of it, and estimate's
#: batch hint stays within it (Bi et al. 2024 §3.1, Fig. 3 show a wide band of near-optimal batches)
NEAR_OPTIMAL_FACTOR = 2.0
#: "near-optimal" in DeepSeek LLM §3.1: a generalization error at most 0.25% above the minimum
NEAR_OPTIMAL_LOSS = 0.0025
#: tokens per parameter that stand for D when the tokens are free (Hoffmann et al. 2022, Table 3: ~20)
ANCHOR_TOKENS_PER_PARAM = 20.0


def non_embedding_flop_per_token(m: ModelSpec, seq: float) -> float:
    """DeepSeek's M, FLOPs per token: 6 × non-embedding (active) parameters + 6·L·s·d_attn, the
    attention core forward and backward with the causal half (Bi et al. 2024 §3.2, Eq. 2)."""
    pc = param_counts(m)
    return 6.0 * (pc.active - pc.embedding) + 1.5 * attention_core_flop_fwd(m, seq)


def optimal_batch_tokens(compute_flop: float) -> float:
    """B_opt = 0.2920 · C^0.3271 tokens for a budget of C = M·D FLOPs (DeepSeek LLM, Eq. 1)."""
    if not compute_flop > 0:
        raise ValueError(f"compute must be positive FLOPs, got {compute_flop}")
    return BATCH_COEF * compute_flop**BATCH_EXP


def batch_for(m: ModelSpec, seq: int, tokens: float | None = None) -> float:
    """The global batch in tokens for training ``m`` at sequence length ``seq`` on ``tokens`` tokens
    (None: 20 per parameter): B_opt(M·D) rounded to a power-of-two number of sequences, at least one."""
    d = ANCHOR_TOKENS_PER_PARAM * param_counts(m).total if tokens is None else float(tokens)
    b = optimal_batch_tokens(non_embedding_flop_per_token(m, seq) * d)
    seqs = 2 ** max(0, round(math.log2(b / seq)))
    return float(seqs * seq)


__all__ = [
    "ANCHOR_TOKENS_PER_PARAM",
    "BATCH_COEF",
    "BATCH_EXP",
    "NEAR_OPTIMAL_FACTOR",
    "NEAR_OPTIMAL_LOSS",
    "batch_for",
    "non_embedding_flop_per_token",
    "optimal_batch_tokens",
]
