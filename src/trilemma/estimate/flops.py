"""FLOPs per token of training. Two conventions, each its own named function.

Model FLOPs (used for MFU) — the PaLM convention (Chowdhery et al. 2022, arXiv 2204.02311,
App. B): 6 × (matmul parameters a token passes through, LM head included even when tied,
embedding lookup excluded) + 12 · L · s · d_attn for attention scores and weighted values,
*without* discounting the causal mask. Forward = 2 FLOP per multiply-accumulate; backward = 2×
forward (weight and input gradients).

Kaplan et al. 2020 (arXiv 2001.08361, §2.1) count the context term once per direction
(6 · L · s · d_attn); Hoffmann et al. 2022 approximate C = 6·N·D. Both are offered by name.

Hardware FLOPs add what recomputation executes again (Korthikanti et al. 2022, arXiv
2205.05198 §5): full recompute one more forward of every layer; selective recompute one more
forward of the attention core only. Narayanan et al. 2021 (arXiv 2104.04473) eq. (3) is the
hardware count with full recompute for GPT shapes: 96·B·s·L·d²·(1 + s/(6d) + V/(16·L·d)).
"""

from __future__ import annotations

import numpy as np

from trilemma.estimate.params import ParamCounts, attention_matmul_params, param_counts
from trilemma.specs import ModelSpec, Recompute, TrainingPlan

ArrayLike = float | np.ndarray


def attention_core_flop_fwd(m: ModelSpec, seq: ArrayLike) -> ArrayLike:
    """Forward FLOPs per token of QK^T and (softmax)·V over all layers: 2·s·d_qk + 2·s·d_attn, which is
    4·s·d_attn without MLA (ModelSpec.attn_core_width)."""
    return 4.0 * m.n_layers * seq * m.attn_core_width


def matmul_flop_fwd(m: ModelSpec, pc: ParamCounts | None = None) -> float:
    """Forward FLOPs per token of all weight matmuls (2 per multiply-accumulate)."""
    return 2.0 * (pc or param_counts(m)).matmul_active


def model_flop_per_token(m: ModelSpec, seq: ArrayLike, pc: ParamCounts | None = None) -> ArrayLike:
    """Training model FLOPs per token, PaLM convention: 6·N_matmul + 12·L·s·d_attn (no causal discount)."""
    return 3.0 * (matmul_flop_fwd(m, pc) + attention_core_flop_fwd(m, seq))


def kaplan_flop_per_token(m: ModelSpec, seq: ArrayLike, pc: ParamCounts | None = None) -> ArrayLike:
    """Training FLOPs per token, Kaplan 2020 §2.1: 6·N_matmul + 6·L·s·d_attn."""
    return 3.0 * matmul_flop_fwd(m, pc) + 0.5 * 3.0 * attention_core_flop_fwd(m, seq)


def six_n_flop_per_token(m: ModelSpec, pc: ParamCounts | None = None) -> float:
    """C/D = 6·N with N the active parameters (Hoffmann 2022 §3, the FLOP budget of scaling laws)."""
    return 6.0 * (pc or param_counts(m)).active


def recompute_flop_per_token(
    m: ModelSpec,
    seq: ArrayLike,
    recompute: np.ndarray | Recompute | int,
    pc: ParamCounts | None = None,
) -> ArrayLike:
    """Extra forward FLOPs per token that recomputation executes (0 / attention core / whole layers).

    ``recompute`` is a Recompute or its integer code (``Recompute.code``). Op-level (torchtitan) recomputes every second matmul of a layer
    (``op_recompute_matmul_flop_fwd``) and no attention core.
    """
    pc = pc or param_counts(m)
    code = np.asarray(recompute_code(recompute))
    attn = attention_core_flop_fwd(m, seq)
    head_and_pooler = 2.0 * (m.vocab_size * m.d_model + (m.d_model**2 if m.pooler else 0))
    layers = matmul_flop_fwd(m, pc) - head_and_pooler + attn  # every layer's forward, not the head
    full, sel, op = (
        Recompute.mask(code, r) for r in (Recompute.FULL, Recompute.SELECTIVE, Recompute.OP)
    )
    return np.where(
        full,
        layers,
        np.where(sel, attn, np.where(op, op_recompute_matmul_flop_fwd(m), 0.0)),
    )


def op_recompute_matmul_flop_fwd(m: ModelSpec) -> float:
    """Forward FLOPs per token of the matmuls op-level checkpointing recomputes, all layers.

    torchtitan counts a layer's matmuls in call order — Q, K, V, output, then the MLP's (gate, up,
    down when gated; up, down otherwise) — saves the odd ones and recomputes the even ones: K, the
    output projection and the MLP's second matmul (up when gated, down otherwise), 2 FLOPs per MAC.
    A mixture-of-experts layer's MLP is its active experts' (top_k routed + shared)."""
    d = m.d_model
    dense = m.n_dense_layers * d * m.ffn_dim
    moe = m.n_moe_layers * d * m.expert_ffn * (m.top_k + m.n_shared_experts) if m.is_moe else 0.0
    return 2.0 * (m.n_layers * (d * m.d_kv + m.d_attn * d) + dense + moe)


def hardware_flop_per_token(
    m: ModelSpec,
    seq: ArrayLike,
    recompute: np.ndarray | Recompute | int,
    pc: ParamCounts | None = None,
) -> ArrayLike:
    """Model FLOPs plus recomputation (the HFU convention; Megatron-LM's reported TFLOP/s)."""
    return model_flop_per_token(m, seq, pc) + recompute_flop_per_token(m, seq, recompute, pc)


def finetune_flop_per_token(
    m: ModelSpec, seq: ArrayLike, plan: TrainingPlan, pc: ParamCounts | None = None
) -> ArrayLike:
    """Training FLOPs per token a fine-tune executes, the PaLM convention otherwise (no causal discount).

    With N_m the matmul parameters (LM head included), N_h = V·d the head's, A = 4·L·s·d_attn the attention
    core's forward, and the shares of trilemma.estimate.finetune.backward_shares (b layers with a backward,
    w of them with weight gradients; a linear's backward is a data-gradient and a weight-gradient GEMM, each
    2 FLOPs per MAC: Kaplan et al. 2020 §2.1, Narayanan et al. 2021 eq. (3)):

        forward          2·(N_m − N_h) + A
        data gradients   2·b·(N_m − N_h) + 2·b·A              (attention has no weights: its backward is 2A)
        weight gradients 2·w·(N_m − N_h)
        LM head          h·2·N_h                              (h head GEMMs: logits, their data gradient, and the
                                                               weight gradient when the head trains; 0 without one)
        adapters         6·N_adapter                          (adapter_flop_per_token)

    Full fine-tuning (b = w = 1, h = 3) gives 6·N_m + 3·A, model_flop_per_token; LoRA (h = 2)
    4·N_m + 3·A + 6·N_adapter; freeze with N of L layers 2·N_m + A + 2·N_h + (N/L)·(4·(N_m − N_h) + 2·A);
    a classifier (plan.task classification, h = 0) drops the LM head's 2·N_h per GEMM. It also serves
    pre-training when plan.task is classification (b = w = 1)."""
    from trilemma.estimate.finetune import adapter_flop_per_token, backward_shares

    pc = pc or param_counts(m)
    b, w, head_gemms = backward_shares(m, plan)
    nm = matmul_flop_fwd(m, pc)  # 2·N_m
    nh = 2.0 * m.vocab_size * m.d_model + (2.0 * m.d_model**2 if m.pooler else 0.0)
    a = attention_core_flop_fwd(m, seq)
    layers = nm - nh
    # forward, data and weight gradients of the layers; the head's GEMMs (backward_shares: 3, 2 frozen, 0 none)
    return (
        layers
        + a
        + b * layers
        + 2 * b * a
        + w * layers
        + head_gemms * nh
        + adapter_flop_per_token(m, plan.finetune)
    )


def narayanan_flop_per_iteration(
    batch: float, seq: float, n_layers: int, d_model: int, vocab: int
) -> float:
    """Narayanan et al. 2021 eq. (3): FLOPs per iteration with full recompute, GPT shape (f = 4d, MHA)."""
    return (
        96.0
        * batch
        * seq
        * n_layers
        * d_model**2
        * (1 + seq / (6 * d_model) + vocab / (16 * n_layers * d_model))
    )


def recompute_code(r: np.ndarray | Recompute | str | int) -> np.ndarray | int:
    if isinstance(r, (Recompute, str)):
        return Recompute(r).code
    return r


__all__ = [
    "attention_core_flop_fwd",
    "finetune_flop_per_token",
    "attention_matmul_params",
    "hardware_flop_per_token",
    "kaplan_flop_per_token",
    "matmul_flop_fwd",
    "model_flop_per_token",
    "narayanan_flop_per_iteration",
    "recompute_flop_per_token",
    "six_n_flop_per_token",
]
