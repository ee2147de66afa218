"""Data parallelism, ZeRO and the optimizer step: per-step seconds once the micro-batches are done.

Gradients (and ZeRO's gathers) go over the dp·cp ranks, stride tp: DP gradient all-reduce or ZeRO
reduce-scatter + all-gather once per step, ZeRO-3 gathers per micro-batch (Rajbhandari et al. 2020
§5); the optimizer step is a memory-bound pass over the local states; offloading moves it to the
host (Ren et al. 2021 §4.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.estimate.comm import all_gather_s, all_reduce_s, reduce_scatter_s
from trilemma.estimate.finetune import ADAPTER_BYTES, state_bytes, trainable_params
from trilemma.estimate.host import optimizer_elements_s, optimizer_host_s, param_tensors, sync_s
from trilemma.estimate.layer_time import LayerTimes
from trilemma.estimate.memory import model_state_bytes
from trilemma.estimate.parallel_time import collective_interference_s
from trilemma.estimate.step_context import StepContext
from trilemma.specs import Precision, TrainingPlan
from trilemma.specs.enums import Offload
from trilemma.units import MEGA


@dataclass(frozen=True)
class TrainedState:
    """What each device reduces and updates."""

    local_params: np.ndarray  # parameters on the device (the last stage's)
    train: Any  # the share of them that trains
    g_b: float  # bytes per gradient element (a fine-tune's adapters: fp32)
    w_b: float  # bytes per weight element

    @property
    def g_bytes(self) -> np.ndarray:
        return self.local_params * self.train * self.g_b

    @property
    def w_bytes(self) -> np.ndarray:
        return self.local_params * self.w_b


def trained_state(ctx: StepContext) -> TrainedState:
    """The device's parameters and what of them trains; a fine-tune reduces and updates only what
    trains (adapters in fp32: PEFT's autocast_adapter_dtype)."""
    m, pc, plan = ctx.m, ctx.pc, ctx.plan
    _, _, _, local_params = model_state_bytes(m, pc, plan, ctx.L, first=False)
    if plan.finetune is None:
        train = plan.trainable_fraction
        g_b, w_b = plan.dtypes.bytes_of("grad"), plan.dtypes.bytes_of("weight")
    else:
        train = trainable_params(m, pc, plan.finetune) / pc.total
        adapters = plan.finetune.adapters
        g_b = ADAPTER_BYTES if adapters else plan.dtypes.bytes_of("grad")
        w_b = ADAPTER_BYTES if adapters else plan.dtypes.bytes_of("weight")
    return TrainedState(local_params, train, g_b, w_b)


def dp_comm_s(
    ctx: StepContext,
    st: TrainedState,
    n_micro: np.ndarray,
    layers: np.ndarray,
    lt: LayerTimes,
    compute_mb: np.ndarray,
) -> np.ndarray:
    """Exposed data-parallel / ZeRO seconds per step, plus the compute its hidden part slows
    (collective_interference_s). ZeRO-0: the gradient all-reduce behind the last micro-batch's
    backward; ZeRO-1/2: reduce-scatter behind it and the parameter all-gather behind the next
    forward (Megatron-Core overlap_param_gather); the last bucket cannot hide (PyTorch DDP, Li et al.
    2020 §3.2.3; Megatron-Core buckets of max(40M, 1M·dp) parameters). ZeRO-3: per micro-batch.
    ``layers``: the heaviest pipeline rank's layer count, whose backward and forward hide them."""
    L, c, fab = ctx.L, ctx.c, ctx.fab
    tp, n_dp = L.tp, L.dims.shard_ranks
    g_bytes, w_bytes = st.g_bytes, st.w_bytes
    overlap = c["dp_overlap"] if ctx.stack.dp_overlap else 0.0  # StackSpec.dp_overlap
    hide_bwd = overlap * layers * lt.layer_bwd
    hide_fwd = overlap * layers * lt.layer_fwd
    bucket = np.minimum(
        1.0, np.maximum(c["dp_bucket_params"], MEGA * n_dp) / np.maximum(st.local_params, 1.0)
    )
    ar_full = all_reduce_s(g_bytes, tp, n_dp, fab)
    rs_full = reduce_scatter_s(g_bytes, tp, n_dp, fab)
    ag_full = all_gather_s(w_bytes * st.train, tp, n_dp, fab)
    ar = np.maximum(bucket * ar_full, ar_full - hide_bwd)
    rs_ag = np.maximum(bucket * rs_full, rs_full - hide_bwd) + np.maximum(
        bucket * ag_full, ag_full - hide_fwd
    )
    exposed_once = np.where(L.zero == 0, ar, rs_ag)
    z3_mb = 2 * all_gather_s(w_bytes, tp, n_dp, fab) + reduce_scatter_s(g_bytes, tp, n_dp, fab)
    exposed_z3 = n_micro * np.maximum(0.0, z3_mb - overlap * compute_mb)
    dp_exposed = np.where(L.zero >= 3, exposed_z3, exposed_once)
    hidden = np.where(
        L.zero >= 3,
        n_micro * np.minimum(z3_mb, overlap * compute_mb),
        np.where(L.zero == 0, ar_full - ar, rs_full + ag_full - rs_ag),
    )
    return dp_exposed + collective_interference_s(
        np.maximum(hidden, 0.0),
        ctx.consts["memory"]["nccl_channels"],
        ctx.cluster.hardware.compute_units,
    )


#: synchronisations per step that drain the device's queue: the gradient norm for clipping and the
#: loss for logging, each read back with .item() (Megatron-LM training.py train_step; nanoGPT's
#: loss.item()); fp16 adds the loss scaler's overflow check (found_inf)
STEP_SYNCS = 2


def optimizer_s(
    ctx: StepContext,
    st: TrainedState,
    n_micro: np.ndarray,
    backward_s: np.ndarray,
    compute_mb: np.ndarray,
) -> np.ndarray:
    """Seconds of the optimizer step: a memory-bound read and write of the local (ZeRO-sharded)
    states — master and moments read and written, gradient read, weight written — plus the
    gradient-norm pass of clipping (Megatron clip_grad_norm), and the step's synchronisations
    (STEP_SYNCS; host.sync_s); offloaded: ``offload_s``."""
    m, pc, plan, L = ctx.m, ctx.pc, ctx.plan, ctx.L
    n_dp = L.dims.shard_ranks
    g_b, w_b = st.g_b, st.w_b
    sb = state_bytes(m, pc, plan)
    opt_b = (
        sb.layer_optim / np.maximum(sb.layer_grad, 1e-30) * g_b
        if plan.finetune is not None
        else plan.dtypes.optimizer_bytes(plan.optimizer_moments)
    )
    per_param = 2 * opt_b + g_b + w_b
    opt_params = st.local_params * st.train / np.where(L.zero >= 1, n_dp, 1)
    syncs = (STEP_SYNCS + (plan.precision == Precision.FP16)) * sync_s(ctx.c, ctx.host)
    # the host's loop over the stage's parameter tensors (a ZeRO rank still visits each one's shard)
    tensors = param_tensors(m) * st.train / L.pp
    syncs = syncs + optimizer_host_s(ctx.c, tensors, ctx.async_launch, ctx.host)
    if plan.offload == Offload.NONE:
        memory = ctx.hbm_s(opt_params * (per_param + g_b))
        return optimizer_elements_s(ctx.c, opt_params, ctx.async_launch, memory) + syncs
    return offload_s(
        plan,
        opt_params,
        n_micro,
        backward_s,
        st.w_bytes / np.maximum(n_dp, 1),
        compute_mb,
        ctx.cluster.node_size,
        ctx.consts,
    )


def offload_s(
    plan: TrainingPlan,
    opt_params: np.ndarray,
    n_micro: np.ndarray,
    backward_s: np.ndarray,
    w_bytes: np.ndarray,
    compute_mb: np.ndarray,
    node_size: int,
    consts: dict,
) -> np.ndarray:
    """Seconds per step that offloading adds, in place of the device's optimizer step (ZeRO-Offload, Ren et
    al. 2021 §4.1): the 16-bit gradients cross the host link during the last micro-batch's backward (what
    does not hide behind it is exposed); CPU Adam updates ``opt_params`` parameters on the host, bound by host
    memory bandwidth (26 bytes per parameter, shared by the node's devices: constants.toml [offload]); the
    updated 16-bit weights cross back before the next forward. ZeRO-Infinity (optimizer+params) also
    streams every layer's weights in for each micro-batch's forward and backward, hidden behind the compute
    when the link keeps up."""
    o = consts["offload"]
    link = float(o["host_link_bytes_per_s"])
    grads = opt_params * 2.0 / link
    exposed = np.maximum(grads - backward_s, 0.0)
    cpu_adam = opt_params * 26.0 * node_size / float(o["host_memory_bytes_per_s"])
    upload = opt_params * 2.0 / link
    total = exposed + cpu_adam + upload
    if plan.offload == Offload.OPTIMIZER_PARAMS:
        total = total + n_micro * np.maximum(2 * w_bytes / link - compute_mb, 0.0)
    return total


__all__ = ["TrainedState", "dp_comm_s", "offload_s", "optimizer_s", "trained_state"]
