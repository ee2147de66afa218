"""The attention core's rate on a CPU by head dimension, measured: the planner's attention efficiency
on a device whose FlashAttention is PyTorch's own CPU kernel.

On a CPU ``torch.nn.functional.scaled_dot_product_attention`` runs ATen's flash kernel
(aten/src/ATen/native/cpu/FlashAttentionKernel.cpp): per block of queries and of keys it multiplies
Q·Kᵀ and P·V through the BLAS GEMM the linears use, Q·Kᵀ contracting over the head dimension and
P·V producing it, with the softmax's exponentials between. A narrow head makes both GEMMs narrow,
so the kernel's share of the matmul peak falls with the head dimension. The planner's ``attention``
efficiency is fitted on GPUs' FlashAttention-2 and has no head dimension: it does not describe this
kernel.

What is timed: causal forward and backward at ``SEQ`` tokens and ``HEADS`` heads, one sequence,
for each of ``HEAD_DIMS``, the best of ``PASSES`` passes (as the matmul curve, probe.bench); the
FLOPs are the planner's (``estimate.layer_time.attention_core_s``: forward 4·S²·width, halved for a
causal mask, backward 2.5 times the forward). ``attention_constants`` fits
rate / peak = attention_max · d_head / (d_head + attention_half_dim), one factor of the planner's
GEMM form (``estimate.roofline.gemm_efficiency``) in the contracted dimension.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["HEAD_DIMS", "attention_constants", "attention_curve", "attention_flop"]

HEAD_DIMS = (16, 32, 64, 128)  # head dimensions timed: the probe's models' range
SEQ = 256  # tokens of the timed sequence
HEADS = 4  # heads of the timed layer
PASSES = 7  # passes over the head dimensions; a head dimension's rate is its best call


def attention_flop(head_dim: int, seq: int = SEQ, heads: int = HEADS) -> float:
    """The planner's FLOPs of one causal attention core, forward and backward, one sequence."""
    from trilemma.estimate.layer_time import FLASH_BACKWARD_RATIO, attention_core_flop

    return attention_core_flop(seq, seq, heads * head_dim, 1, True) * (1.0 + FLASH_BACKWARD_RATIO)


def attention_curve(torch: Any) -> tuple[list[int], list[float]]:
    """(head dimensions, FLOP/s) of causal SDPA forward and backward on this CPU, fp32, at the
    threads torch runs with."""
    F = torch.nn.functional
    best = dict.fromkeys(HEAD_DIMS, 0.0)
    for _ in range(PASSES):
        for dh in HEAD_DIMS:
            q, k, v = (torch.randn(1, HEADS, SEQ, dh, requires_grad=True) for _ in range(3))
            grad = torch.randn(1, HEADS, SEQ, dh)
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)  # warm-up
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
            best[dh] = max(best[dh], attention_flop(dh) / (time.perf_counter() - t0))
    return list(HEAD_DIMS), [best[dh] for dh in HEAD_DIMS]


def attention_constants(
    head_dims: list[int], flop_per_s: list[float], peak: float
) -> dict[str, float]:
    """``attention_max`` and ``attention_half_dim`` (head-dimension units): the least-squares fit,
    in log rate, of rate / ``peak`` (FLOP/s, the matmul peak) = max · d / (d + half)."""
    from trilemma.probe.saturating import saturating_fit

    d = np.asarray(head_dims, dtype=float)
    g, h = saturating_fit(d, np.asarray(flop_per_s, dtype=float) / peak, 1, float(d.min()), 1e-4)
    return {"attention_max": g, "attention_half_dim": h}
