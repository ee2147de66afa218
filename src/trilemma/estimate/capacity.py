"""What a device and its node may hold: the share of device memory a plan must leave free, the
memory outside PyTorch's allocator, the host memory for offloaded states; and one stage's bytes per
device for every layout row with the reasons a layout does not fit (used by
trilemma.estimate.evaluate)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from trilemma.estimate.distill import teacher_bytes
from trilemma.estimate.layouts import R_OOM, LayoutArrays
from trilemma.estimate.memory import MemoryArrays, memory_per_device
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.rl import rollout_memory
from trilemma.specs import ClusterSpec, ModelSpec, TrainingPlan
from trilemma.specs.axes import R_HOST_OOM
from trilemma.specs.constants import Constants
from trilemma.specs.enums import Offload


def outside_allocator(cluster: ClusterSpec, consts: Constants) -> dict[str, float]:
    """The memory terms outside PyTorch's allocator for this device, as ``consts["memory"]`` keys:
    ``cuda_context_bytes`` (the device's measured context, else memory.cuda_context_bytes),
    ``framework_residual_bytes`` (fitted) and ``nccl_channels`` (NCCL's buffers follow the layout).
    A device with a measured overhead (a `trilemma probe` CPU profile: oneDNN/MKL and OpenMP buffers,
    code paged in) carries it whole as the residual, with no context and no NCCL; a CPU without
    one has none of the three (no CUDA context, gloo instead of NCCL, no caching allocator)."""
    hw = cluster.hardware
    if hw.framework_overhead_bytes is not None or cluster.is_cpu:
        return {
            "cuda_context_bytes": 0.0,
            "nccl_channels": 0.0,
            "framework_residual_bytes": float(hw.framework_overhead_bytes or 0.0),
        }
    mem = consts["memory"]
    ctx = mem["cuda_context_bytes"] if hw.cuda_context_bytes is None else hw.cuda_context_bytes
    return {
        "cuda_context_bytes": float(ctx),
        "framework_residual_bytes": float(mem["framework_residual_bytes"]),
    }


def framework_overhead_bytes(cluster: ClusterSpec, consts: Constants) -> float:
    """Memory a training process holds beyond its tensors that does not depend on the layout, bytes: the
    CUDA context + the fitted residual (a CPU: its measured overhead or 0). NCCL's buffers, which follow
    the process groups, come on top (trilemma.estimate.memory.nccl_buffer_bytes)."""
    t = outside_allocator(cluster, consts)
    return t["cuda_context_bytes"] + t["framework_residual_bytes"]


def host_memory_bytes(cluster: ClusterSpec, consts: Constants) -> float:
    """Host memory of one node for offloaded states, bytes: the cluster's, else
    offload.host_memory_bytes_per_device × devices per node (constants.toml, assumed)."""
    if cluster.host_memory_bytes is not None:
        return cluster.host_memory_bytes
    return float(consts["offload"]["host_memory_bytes_per_device"]) * cluster.node_size


def memory_headroom(cluster: ClusterSpec) -> float:
    """Share of device memory a plan must leave free to count as fitting: the cluster's, or from the
    memory model's leave-one-source-out residuals r = log(predicted / measured peak): the measured peak
    exceeds the prediction by exp(−q10) or less in 90% of held-out rows, so a plan at
    capacity · exp(q10) fits with 90% confidence (headroom 1 − exp(q10); 0 when q10 ≥ 0)."""
    if cluster.memory_headroom is not None:
        return cluster.memory_headroom
    from trilemma.presets import calibration

    q10 = calibration().get("bands", {}).get("memory_log_q10")
    return 0.0 if q10 is None else float(min(0.5, max(0.0, 1.0 - math.exp(q10))))


def memory_limits(cluster: ClusterSpec, consts: Constants) -> tuple[float, float]:
    """(bytes a plan may use per device and still count as fitting: capacity less the headroom,
    bytes of host memory of one node for offloaded states)."""
    # what a plan may use and still count as fitting
    capacity = cluster.hardware.hbm_bytes * (1 - memory_headroom(cluster))
    return capacity, host_memory_bytes(cluster, consts)


def stage_memory(
    model: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    cluster: ClusterSpec,
    layouts: LayoutArrays,
    seq_len: int,
    batch_seqs: np.ndarray,
    mem_consts: dict[str, float],
) -> MemoryArrays:
    """One stage's bytes per device for every layout row, at ``batch_seqs`` sequences of
    ``seq_len`` tokens per step: the memory model's, with an RL plan's reference model and
    rollout generation added."""
    n_micro = batch_seqs / (layouts.dp * layouts.micro_batch)
    mem = memory_per_device(model, pc, plan, layouts, seq_len, n_micro, mem_consts)
    if plan.rl is not None:
        states = mem.weights + mem.gradients + mem.optimizer
        ro = rollout_memory(
            model, pc, plan, layouts, seq_len, batch_seqs, cluster.hardware.hbm_bytes, states
        )
        mem = replace(
            mem,
            reference_bytes=ro.reference,
            generation_bytes=ro.generation,
            reward_bytes=ro.reward,
            critic_bytes=ro.critic,
        )
    if plan.distill is not None:
        mem = replace(mem, teacher_bytes=teacher_bytes(plan, layouts))
    return mem


def memory_constants(cluster: ClusterSpec, consts: Constants) -> dict[str, float]:
    """The memory model's constants for ``cluster``: the fitted ones, what lives outside the
    allocator, the offload bucket (parameters), and no fragmentation on a CPU."""
    # the fitted fragmentation is the CUDA caching allocator's (reserved over allocated); a CPU has none:
    # the probe measures it with glibc's mmap threshold fixed, where freed tensors leave the resident set
    # (trilemma.probe.train._mmap_large_allocations)
    return {
        **consts["memory"],
        **outside_allocator(cluster, consts),
        "offload_bucket_params": float(consts.get("offload", {}).get("bucket_params", 0.0)),
        **({"fragmentation": 0.0} if cluster.is_cpu else {}),
    }


def memory_reasons(
    mem: MemoryArrays,
    capacity: float,
    host_capacity: float,
    plan: TrainingPlan,
    cluster: ClusterSpec,
    n: Any,
) -> Any:
    """R_OOM where a device holds more than ``capacity`` bytes, R_HOST_OOM where a node's devices
    offload more than its ``host_capacity`` bytes of host memory."""
    r = np.where(mem.total > capacity, R_OOM, 0)
    if plan.offload != Offload.NONE:  # the node's host memory holds what its devices offload
        r = r | np.where(
            mem.host_bytes * np.minimum(n, cluster.node_size) > host_capacity, R_HOST_OOM, 0
        )
    return r
