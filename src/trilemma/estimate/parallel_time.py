"""Communication inside a layer: tensor (stride 1), context (stride tp) and expert (stride tp·cp)
parallelism, per micro-batch, by the hierarchical α–β model of trilemma.estimate.comm.

TP all-reduces (or SP reduce-scatter + all-gather, same volume) 2 forward + 2 backward per layer
(Narayanan et al. 2021 §3.3, Korthikanti et al. 2022 §3); MoE all-to-all 2 forward + 2 backward
per MoE layer (node-limited and overlapped where the stack does so); CP ring exchange of K and V. Communication hidden behind compute still costs:
NCCL's channels occupy streaming multiprocessors while the kernels run (collective_interference_s).
The derivations are in docs/derivations.md, sections "Tensor-parallel communication",
"Collective interference" and "Asynchronous tensor parallelism".
"""

from __future__ import annotations

import numpy as np

from trilemma.estimate.comm import (
    all_gather_s,
    all_reduce_s,
    all_to_all_s,
    node_limited_all_to_all_s,
)
from trilemma.estimate.layer_time import LayerTimes
from trilemma.estimate.step_context import StepContext
from trilemma.specs import Precision, Recompute
from trilemma.specs.enums import DTYPE_BYTES


def collective_interference_s(
    hidden_s: np.ndarray, channels: float, compute_units: int | None
) -> np.ndarray:
    """Compute time lost to collectives that run while it runs, seconds: each NCCL channel
    is one thread block on a streaming multiprocessor, so while ``hidden_s`` of communication hides
    the kernels run at 1 − f of their rate, f = channels / compute_units (Rashidi et al., ISCA 2021):
    hidden_s · f / (1 − f). ``compute_units`` None (TPU, CPU): none (docs/derivations.md,
    "Collective interference")."""
    if not compute_units or channels <= 0:
        return np.zeros_like(np.asarray(hidden_s, dtype=float))
    f = min(channels / compute_units, 0.5)
    return np.asarray(hidden_s, dtype=float) * f / (1.0 - f)


def async_tp_s(one_s: np.ndarray, tp: np.ndarray, col: tuple, row: tuple) -> np.ndarray:
    """Exposed seconds of one layer's forward TP collectives under asynchronous tensor
    parallelism, one micro-batch: each all-gather before a column-parallel matmul (``col``) and
    reduce-scatter after a row-parallel one (``row``) split in tp chunks and pipelined with it (Wang
    et al., ASPLOS 2023): max(one/tp, one − matmul·(tp − 1)/tp). ``one_s``: one all-gather of the
    layer's activations. The forward's four only (docs/derivations.md, "Asynchronous tensor
    parallelism"): a form chosen on one pair of calibration rows (torchtitan's 70B, in-sample), checked
    held out in tests/test_async_tp.py."""
    return sum(np.maximum(one_s / tp, one_s - g * (tp - 1) / tp) for g in (*col, *row))


def tp_comm_s(ctx: StepContext, lt: LayerTimes) -> np.ndarray:
    """Exposed TP seconds of one layer, one micro-batch, as Megatron-LM runs it: the forward's two
    all-reduces, twice under full recomputation, one more backward all-gather under sequence
    parallelism; the input projections' backward ones hide behind their GEMMs where they can
    (Korthikanti et al. 2022 Table 4; docs/derivations.md, "Tensor-parallel communication")."""
    L, c, e, d = ctx.L, ctx.c, ctx.e, ctx.m.d_model
    tp = L.tp
    tp_ar = all_reduce_s(e * ctx.T * d, 1, tp, ctx.fab) * (1 - c["tp_overlap"])
    sp_on = L.dims.sp_on
    full_rc = L.recomputes(Recompute.FULL)
    tp_exposed = (2 + np.where(full_rc, 2, 0) + np.where(sp_on, 1, 0)) * tp_ar
    col_gemm = lt.qkv + lt.up  # one forward of the input projections
    window = (lt.w_share + np.where(sp_on, lt.b_share, 0.0)) * col_gemm
    tp_bwd = 2 * tp_ar
    tp_late = np.maximum(0.0, tp_bwd - window)
    tp_layer = (
        tp_exposed
        + tp_late
        + collective_interference_s(
            tp_bwd - tp_late,
            ctx.consts["memory"]["nccl_channels"],
            ctx.cluster.hardware.compute_units,
        )
    )
    if ctx.plan.async_tp:  # the forward's four collectives paired with their matmuls (async_tp_s)
        rs_sum = ctx.hbm_s(2 * e * ctx.T * d * (1 + 1 / tp))  # the reduce-scatters' local sums
        # one all-gather or reduce-scatter is half an all-reduce (tp_ar)
        tp_async = (
            tp_layer
            - 2 * tp_ar
            + async_tp_s(tp_ar / 2, tp, (lt.qkv, lt.up), (lt.out, lt.mlp_fwd - lt.up))
            + rs_sum
        )
        tp_layer = np.where(sp_on, tp_async, tp_layer)
    return tp_layer


def cp_comm_s(ctx: StepContext, lt: LayerTimes) -> np.ndarray:
    """Exposed CP seconds of one layer: the ring exchange of K and V, 3 all-gathers' worth (forward,
    and the backward's K/V and their gradients), hidden behind the attention core where it can."""
    L, m = ctx.L, ctx.m
    kv = m.d_qk + m.d_attn if m.is_mla else 2 * m.d_kv  # MLA's ring carries decompressed K and V
    kv_bytes = ctx.e * L.micro_batch * ctx.seq * kv / L.tp
    return np.maximum(
        0.0, 3 * all_gather_s(kv_bytes, L.tp, L.cp, ctx.fab) - (lt.attn_fwd + lt.attn_bwd)
    )


def ep_comm_s(ctx: StepContext, lt: LayerTimes) -> np.ndarray | float:
    """Exposed EP seconds of one layer (by the MoE layers' share): 4 all-to-alls of the top_k routed
    token vectors (dispatch and combine, forward and backward), stride tp·cp; node-limited where the
    stack limits it (StackSpec.ep_node_limit); the two towards the experts in fp8 where the stack
    sends them so in fp8 training (StackSpec.ep_fp8_dispatch). A stack that overlaps them (StackSpec.ep_overlap,
    DeepSeek-V3's DualPipe, arXiv 2412.19437 §3.2.1) hides them behind another micro-batch's forward
    and backward of the layer; the hidden part still slows it (collective_interference_s)."""
    m, L, st = ctx.m, ctx.L, ctx.stack
    if not m.is_moe:
        return 0.0
    stride, fab = L.dims.expert_stride, ctx.fab

    def one(e: float) -> np.ndarray:  # one all-to-all of the routed copies, ``e`` bytes an element
        copy_bytes = e * ctx.T * m.d_model * L.sp_share
        if st.ep_node_limit:
            return node_limited_all_to_all_s(
                copy_bytes, m.top_k, st.ep_node_limit, stride, L.ep, fab
            )
        return all_to_all_s(copy_bytes * m.top_k, stride, L.ep, fab)

    # arXiv 2412.19437 §3.3.3: the activation before the up-projections and the activation gradient
    # before the down-projections go to the experts in fp8 (1 byte an element; the per-128-element
    # scales are left out); "the forward and backward combine components" stay in BF16
    fp8 = st.ep_fp8_dispatch and str(ctx.plan.precision) == Precision.FP8.value
    ep = (
        m.n_moe_layers
        / m.n_layers
        * (2 * one(ctx.e) + 2 * one(DTYPE_BYTES["fp8"] if fp8 else ctx.e))
    )
    if not st.ep_overlap:
        return ep
    late = np.maximum(0.0, ep - (lt.layer_fwd + lt.layer_bwd))
    return late + collective_interference_s(
        ep - late, ctx.consts["memory"]["nccl_channels"], ctx.cluster.hardware.compute_units
    )


__all__ = ["async_tp_s", "collective_interference_s", "cp_comm_s", "ep_comm_s", "tp_comm_s"]
