"""The memory-bound and per-kernel costs of one layer's operations, with explicit arguments:
elementwise kernels' bytes, unfused attention, kernel launches, a fine-tune's adapters.

Element-wise kernels are memory-bound: bytes moved / HBM bandwidth. The derivations are in
docs/derivations.md, sections "Elementwise bytes", "Unfused attention" and "Fine-tune layer costs".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.estimate.finetune import (
    GPTQ_TORCH_DEQUANT_BYTES,
    GPTQ_TORCH_DEQUANT_KERNELS,
    base_linear_bytes,
    linear_params_per_layer,
    module_shapes,
)
from trilemma.estimate.roofline import gemm_s
from trilemma.specs import ModelSpec, TrainingPlan
from trilemma.specs.enums import BasePrecision


def elementwise_bytes(m: ModelSpec, seq: float, L: Any, e: float) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) bytes that one layer's memory-bound kernels move for one micro-batch:
    each kernel reads its inputs and writes its outputs once from HBM (norms, residual adds, the
    activation, rotary, dropout, MoE dispatch and combine; docs/derivations.md, "Elementwise bytes").
    ``e``: activation bytes; ``L``: LayoutArrays."""
    tp, cp, mb = L.tp, L.cp, L.micro_batch
    T = mb * seq / cp
    r = L.sp_share
    td = e * T * m.d_model * r  # one residual-stream tensor
    norms = m.norms_per_layer
    fwd = norms * 2 * td + 2 * 3 * td
    bwd = norms * 3 * td + 2 * 3 * td
    f_loc = e * T * m.ffn_dim / tp
    gated = m.ffn_matrices == 3
    act_f, act_b = (3.0, 5.0) if gated else (2.0, 3.0)
    mlp_frac = m.n_dense_layers / m.n_layers
    fwd = fwd + mlp_frac * act_f * f_loc
    bwd = bwd + mlp_frac * act_b * f_loc
    if m.is_moe:
        moe_frac = m.n_moe_layers / m.n_layers
        h_loc = e * T * m.top_k * m.expert_ffn / tp
        copies = 2 * 2 * e * T * m.top_k * m.d_model / tp
        fwd = fwd + moe_frac * (act_f * h_loc + copies)
        bwd = bwd + moe_frac * (act_b * h_loc + copies)
    if m.position.value == "rotary":
        rope = 2 * e * T * (m.d_attn + m.d_kv) / tp
        fwd, bwd = fwd + rope, bwd + rope
    if m.dropout:  # two per layer; forward reads x, writes y and the mask; backward reads dy and mask, writes dx
        drop = 2 * (2 * td + td / e)
        fwd, bwd = fwd + drop, bwd + drop
    return fwd, bwd


def attention_score_bytes(e: float, p: float) -> float:
    """Bytes one forward of unfused attention moves per element of its h·s·S score matrix: 4·e
    in the activations' dtype ``e`` (Megatron-LM's fused softmax), 4·e + 4·p with probabilities in
    another dtype ``p`` (an fp32 softmax under autocast); docs/derivations.md, "Unfused attention"."""
    return 4.0 * e if p == e else 4.0 * e + 4.0 * p


def unfused_attention_s(
    m: ModelSpec,
    plan: TrainingPlan,
    seqs: np.ndarray,
    s: np.ndarray,
    S: float,
    peak: float,
    bw: float,
    e: float,
    c: dict,
) -> np.ndarray:
    """Seconds of one forward of the attention core without FlashAttention for ``seqs`` sequences'
    worth of heads, ``s`` queries over ``S`` keys: QKᵀ and P·V as batched GEMMs at the GEMM ceiling
    (no shape law: d_head is thin), then the softmax's passes and dropout over the score matrix
    (Korthikanti et al. 2022 Table 4 checks it; docs/derivations.md, "Unfused attention")."""
    n_bh = seqs * m.n_heads
    dh = m.d_attn / m.n_heads
    ceiling = {**c, "gemm_half_dim": 0.0}
    gemms = n_bh * (gemm_s(s, S, dh, peak, bw, e, ceiling) + gemm_s(s, dh, S, peak, bw, e, ceiling))
    per_score = attention_score_bytes(e, plan.dtypes.bytes_of("attention_probs") or e) - 2 * e
    per_score = per_score + 2 * e * (
        plan.softmax_passes - 1
    )  # an eager softmax's further passes, each a read and a write
    if m.dropout:
        per_score = per_score + 2 * e + 1
    return gemms + per_score * n_bh * s * S / (bw * c["hbm"])


def attention_kernels(flash: bool, softmax_passes: int = 1) -> tuple[int, int]:
    """(forward, backward) kernel launches of one layer's attention core: FlashAttention one forward, two
    backward; unfused QKᵀ, the softmax's passes (``softmax_passes``), P·V, and twice that backward."""
    return (1, 2) if flash else (2 + softmax_passes, 2 * (2 + softmax_passes))


def kernels_per_layer(m: ModelSpec, flash: bool, softmax_passes: int = 1) -> tuple[int, int]:
    """(forward, backward) kernel launches of one layer, unfused: GEMMs (QKV, output, up — gate and
    up fused into one —, down; backward a data-gradient and a weight-gradient GEMM each), attention
    (FlashAttention one kernel forward, two backward; unfused: scores, softmax, weighted sum, and
    twice that backward; an eager softmax one kernel per pass, ``softmax_passes``), norms, residual adds, the
    activation, rotary."""
    gemm = 4 + (1 if m.position.value == "relative" else 0)
    attn_f, attn_b = attention_kernels(flash, softmax_passes)
    other = (
        m.norms_per_layer
        + 2
        + 1
        + (1 if m.position.value == "rotary" else 0)
        + (2 if m.dropout else 0)
    )
    return gemm + attn_f + other, 2 * gemm + attn_b + other


def finetune_layer_s(
    m: ModelSpec,
    plan: TrainingPlan,
    T: np.ndarray,
    tp: np.ndarray,
    peak: float,
    bw: float,
    e: float,
    c: dict,
) -> tuple:
    """A fine-tune's extra seconds per layer for one micro-batch of T tokens: (adapter GEMMs
    forward, adapter GEMMs backward, one dequantisation pass, adapter kernel launches forward,
    backward). PEFT's LoRA Linear (``result + lora_B(lora_A(x)) * scaling``), bitsandbytes'
    dequantisation before each use of a quantised weight (the backward's in its adapter seconds), and
    AutoGPTQ's before each forward only (docs/derivations.md, "Fine-tune layer costs")."""
    ft = plan.finetune
    zero = np.zeros(np.shape(tp), dtype=float) if np.ndim(tp) else 0.0
    if ft is None or not ft.adapters:
        return zero, zero, zero, zero, zero
    r = ft.lora_rank
    # the adapters' GEMMs are thin in r as the attention core's are in d_head: at the GEMM ceiling with no
    # shape law (unfused_attention_s), which leaves a rank-8..64 one memory-bound
    thin = {**c, "gemm_half_dim": 0.0}
    fwd = bwd = kf = kb = zero
    for name, (d_in, d_out) in module_shapes(m).items():
        if name not in ft.targets:
            continue
        # o_proj and down_proj are row-parallel (input split), the others column-parallel (output split)
        din, dout = (d_in / tp, d_out) if name in ("o_proj", "down_proj") else (d_in, d_out / tp)
        a = gemm_s(T, r, din, peak, bw, e, thin)
        b = gemm_s(T, dout, r, peak, bw, e, thin)
        ew = (3 + 2) * e * T * dout / (bw * c["hbm"])
        fwd = fwd + a + b + ew
        bwd = bwd + 2 * (a + b) + 2 * e * T * dout / (bw * c["hbm"])
        kf, kb = kf + 4 * c["kernel_s"], kb + 5 * c["kernel_s"]
    dq = zero
    weights = linear_params_per_layer(m) / tp
    if ft.base_precision == BasePrecision.GPTQ4:
        # AutoGPTQ's torch path: forward (and its recomputation) only — the fp16 copy it multiplies is
        # saved by autograd's matmul for the data gradient, so the backward dequantises nothing
        n_mod = len(module_shapes(m))
        dq = zero + weights * GPTQ_TORCH_DEQUANT_BYTES / (bw * c["hbm"])
        dq = dq + n_mod * GPTQ_TORCH_DEQUANT_KERNELS * c["kernel_s"]
    elif ft.base_precision in (BasePrecision.NF4, BasePrecision.INT8):
        # bitsandbytes keeps only the packed weight: dequantised again for the data gradient
        per_w = base_linear_bytes(ft.base_precision, m.d_model, ft.double_quant) + 2.0
        dq = zero + weights * per_w / (bw * c["hbm"]) + 7 * c["kernel_s"]
        bwd = bwd + dq
    return fwd, bwd, dq, kf, kb


__all__ = [
    "attention_kernels",
    "attention_score_bytes",
    "elementwise_bytes",
    "finetune_layer_s",
    "kernels_per_layer",
    "unfused_attention_s",
]
