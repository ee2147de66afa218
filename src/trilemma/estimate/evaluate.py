"""Evaluate a training plan for many candidate layouts at once: legality, memory, time, cost.

This is the single place where the estimators are combined; `estimate`, the solver and
`validate` all call :func:`evaluate`. The scalar path is the same code with one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from trilemma.estimate.capacity import (
    memory_constants,
    memory_limits,
    memory_reasons,
    stage_memory,
)
from trilemma.estimate.cost import CostArrays, facility_power_w, run_cost, wall_power_w
from trilemma.estimate.distill import teacher_seconds
from trilemma.estimate.finetune import checkpoint_bytes as ft_checkpoint_bytes
from trilemma.estimate.flops import (
    finetune_flop_per_token,
    hardware_flop_per_token,
    model_flop_per_token,
    recompute_flop_per_token,
)
from trilemma.estimate.goodput import Goodput, cluster_reliability
from trilemma.estimate.goodput import goodput as run_goodput
from trilemma.estimate.layouts import LayoutArrays, legal_mask
from trilemma.estimate.memory import MemoryArrays
from trilemma.estimate.params import ParamCounts, param_counts
from trilemma.estimate.rl import beside_seconds, rollout_seconds
from trilemma.estimate.stragglers import gpu_spread, straggler_share
from trilemma.estimate.time import TimeArrays, step_time
from trilemma.specs import ClusterSpec, HardwareSpec, ModelSpec, TrainingPlan
from trilemma.specs.axes import R_OFFLOAD_ZERO
from trilemma.specs.constants import Constants
from trilemma.specs.enums import Task


@dataclass(frozen=True)
class StageArrays:
    """One training stage evaluated for every layout row."""

    batch_seqs: np.ndarray  # global batch after rounding, sequences
    n_micro: np.ndarray  # micro-batches per pipeline per step
    steps: np.ndarray  # optimizer steps (fractional: tokens / tokens per step)
    memory: MemoryArrays | None  # None when evaluated without memory (``evaluate(memory=False)``)
    time: TimeArrays
    reasons: np.ndarray  # 0 = legal and fits


@dataclass(frozen=True)
class Evaluation:
    """All corners for every layout row; per-stage detail in ``stages``. Derived figures (MFU,
    cost, …) are computed on first access, so the solver pays only for what it reads."""

    layouts: LayoutArrays
    params: ParamCounts
    stages: tuple[StageArrays, ...]
    reasons: np.ndarray  # OR over stages
    per_gpu_bytes: np.ndarray  # max over stages
    busy_s: np.ndarray  # Σ steps × step time (no goodput)
    model_flop: np.ndarray  # total model FLOPs of the plan (PaLM convention); 0-d for one model
    hardware_flop: np.ndarray  # total with recomputation, per row
    tokens: float
    goodput_given: (
        float | None
    )  # the plan's --goodput; None: modelled (``reliability``) × other_share
    gpu_speed_spread: float  # σ of trilemma.estimate.stragglers.straggler_share; 0: not charged
    checkpoint_bytes: np.ndarray | float  # one checkpoint of the whole job's state, bytes
    peak_flop_per_s: float
    n_gpus: np.ndarray | int
    cluster: ClusterSpec
    host_w_per_device: float = 0.0  # host and network power per device, W (host_power_w_per_device)

    @property
    def ok(self) -> np.ndarray:
        return self.reasons == 0

    @cached_property
    def reliability(self) -> Goodput:
        """Failures, checkpoint writes and restarts over the run (trilemma.estimate.goodput), per row, at the
        cluster's failure rate, restart time and storage bandwidth where it sets them (``reliability.toml``'s
        defaults where not)."""
        cl = self.cluster
        return run_goodput(
            self.busy_s,
            self.n_gpus,
            self.checkpoint_bytes,
            **cluster_reliability(
                cl.failures_per_gpu_hour, cl.restart_s, cl.storage_write_bytes_per_s
            ),
        )

    @cached_property
    def other_share(self) -> np.ndarray | float:
        """Share of wall time left after each step waits for the slowest of this many GPUs
        (trilemma.estimate.stragglers.straggler_share; 1 on one GPU, or when not charged)."""
        return straggler_share(self.n_gpus, self.gpu_speed_spread)

    @cached_property
    def goodput(self) -> np.ndarray | float:
        """Useful share of wall time: the plan's, or the failure model's times the straggler share."""
        if self.goodput_given is not None:
            return self.goodput_given
        return self.reliability.goodput * self.other_share

    @cached_property
    def total_s(self) -> np.ndarray:
        """Wall-clock seconds: busy / goodput."""
        return self.busy_s / self.goodput

    @cached_property
    def tokens_per_s(self) -> np.ndarray:
        """While training (excludes goodput losses), whole cluster."""
        return self.tokens / self.busy_s

    @cached_property
    def mfu(self) -> np.ndarray:
        return self.model_flop / self.busy_s / (self.n_gpus * self.peak_flop_per_s)

    @cached_property
    def hfu(self) -> np.ndarray:
        return self.hardware_flop / self.busy_s / (self.n_gpus * self.peak_flop_per_s)

    @cached_property
    def cost(self) -> CostArrays:
        cl = self.cluster
        return run_cost(
            self.n_gpus,
            self.total_s,
            cl.price,
            cl.hardware.board_power_w,
            cl.power_fraction,
            cl.host_power_fraction,
            cl.pue,
            cl.grid_kg_co2_per_kwh,
            self.host_w_per_device,
        )

    @cached_property
    def power_w(self) -> np.ndarray | float:
        """The run's facility power while it runs, W (trilemma.estimate.cost.facility_power_w)."""
        cl = self.cluster
        return facility_power_w(
            self.n_gpus,
            wall_power_w(
                cl.hardware.board_power_w,
                cl.power_fraction,
                cl.host_power_fraction,
                cl.pue,
                self.host_w_per_device,
            ),
        )


def host_power_w_per_device(cluster: ClusterSpec, consts: Constants) -> float:
    """Host and network power per device, W, of ``cluster`` (host_w_for)."""
    return host_w_for(
        cluster.hardware, cluster.host_power_w_per_node, cluster.node_size, consts["energy"]
    )


def host_w_for(
    hw: HardwareSpec, per_node_w: float | None, node_size: int, energy: dict[str, Any]
) -> float:
    """Host and network power per device, W: ``per_node_w`` (--host-power) over the devices per node,
    else the share of the system class the chip ships in (its preset's host_power_w_per_device, each with
    its source: DGX-1, DGX A100, DGX H100/H200, DGX B200, a desktop), else energy.host_power_w_per_device
    (constants.toml: a DGX H100's share); 0 on a CPU profile, whose board power is the host's."""
    if per_node_w is not None:
        return per_node_w / node_size
    if hw.family == "cpu":
        return 0.0
    if hw.host_power_w_per_device is not None:
        return float(hw.host_power_w_per_device)
    return float(energy.get("host_power_w_per_device", 0.0))


def gpu_speed_spread_for(plan: TrainingPlan) -> float:
    """σ of the straggler share for this plan (trilemma.estimate.stragglers: GPU paces measured by Sinha et
    al. 2022), charged to pre-training runs. A fine-tune, a job of hours on a few devices, is charged as
    the throughput benchmarks the step time is calibrated on are, not at all (σ = 0): its goodput is the
    failure model's alone (checkpoint writes, failures, restarts for its GPU count and duration:
    trilemma.estimate.goodput)."""
    return 0.0 if plan.finetune is not None else gpu_spread().sigma


def evaluate(
    model: ModelSpec,
    cluster: ClusterSpec,
    plan: TrainingPlan,
    layouts: LayoutArrays,
    consts: Constants,
    n_gpus: np.ndarray | None = None,
    target_batch_seqs: np.ndarray | None = None,
    memory: bool = True,
    legal: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None,
    memories: tuple[MemoryArrays, ...] | None = None,
) -> Evaluation:
    """Every corner for every layout row. ``model``: a ModelSpec or a grid of shapes with array fields
    (trilemma.solve.space.ShapeGrid); ``consts``: the planner's constants (trilemma.presets.constants()
    or a calibration's trial); ``n_gpus``: device counts that broadcast with the layouts (default: the
    cluster's); ``target_batch_seqs``: a target global batch in sequences per row, replacing the (single)
    stage's (the solver: one per model shape). ``memory=False`` skips the memory model (no OOM verdict,
    no per-device bytes: the time constants' fit, trilemma.validate.fit.fit_time, reads none). ``legal``,
    ``memories``: what ``legal_mask`` (cluster's device count, ``consts``' batch tolerance) and the memory
    model give for each stage of ``plan`` on these rows, when the caller kept them: a fit re-times the
    same layouts; the solver evaluates the same rows chip after chip (memory_constants alike)."""
    pc = param_counts(model)
    capacity, host_capacity = memory_limits(cluster, consts)
    mem_consts = memory_constants(cluster, consts)
    n = cluster.n_gpus if n_gpus is None else n_gpus
    stages = []
    reasons: np.ndarray | int = 0
    per_gpu: np.ndarray | float = 0.0
    busy: np.ndarray | float = 0.0
    model_flop: np.ndarray | float = 0.0
    hw_flop: np.ndarray | float = 0.0
    for i, st in enumerate(plan.stages):
        batch, r = (
            legal[i]
            if legal is not None
            else legal_mask(model, layouts, st, n, consts["batch"]["tolerance"], target_batch_seqs)
        )
        r = r | np.where(layouts.zero < int(plan.offload.min_zero), R_OFFLOAD_ZERO, 0)
        safe_batch = np.maximum(batch, layouts.dp * layouts.micro_batch)
        n_micro = safe_batch / (layouts.dp * layouts.micro_batch)
        mem = None
        if memory:
            mem = memories[i] if memories is not None else None
            mem = mem or stage_memory(
                model, pc, plan, cluster, layouts, st.seq_len, safe_batch, mem_consts
            )
            r = r | memory_reasons(mem, capacity, host_capacity, plan, cluster, n)
            per_gpu = np.maximum(per_gpu, mem.total)
        t = step_time(model, pc, plan, cluster, layouts, st.seq_len, safe_batch, consts)
        steps = st.tokens / (safe_batch * st.seq_len)
        stages.append(
            StageArrays(
                batch_seqs=safe_batch, n_micro=n_micro, steps=steps, memory=mem, time=t, reasons=r
            )
        )
        reasons = reasons | r
        busy = busy + steps * _step_seconds(model, pc, plan, cluster, layouts, st, safe_batch, t)
        m_flop, h_flop = _stage_flop(model, plan, st, layouts.recompute, pc)
        model_flop = model_flop + m_flop
        hw_flop = hw_flop + h_flop
    return Evaluation(
        layouts=layouts,
        params=pc,
        stages=tuple(stages),
        reasons=np.asarray(reasons),
        per_gpu_bytes=np.asarray(per_gpu),
        busy_s=np.asarray(busy),
        model_flop=np.asarray(model_flop),
        hardware_flop=np.asarray(hw_flop),
        tokens=plan.total_tokens,
        goodput_given=plan.goodput,
        gpu_speed_spread=gpu_speed_spread_for(plan),
        checkpoint_bytes=np.asarray(ft_checkpoint_bytes(model, pc, plan), dtype=float),
        peak_flop_per_s=cluster.hardware.peak(plan.precision),
        n_gpus=n,
        cluster=cluster,
        host_w_per_device=host_power_w_per_device(cluster, consts),
    )


def _step_seconds(
    model: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    cluster: ClusterSpec,
    layouts: LayoutArrays,
    st: Any,
    batch: np.ndarray,
    t: Any,
) -> np.ndarray:
    """Seconds of one optimizer step: the training step, an RL method's generation and log-prob passes
    (trilemma.estimate.rl) and a distillation teacher's forward (zero when there is none)."""
    return (
        t.step_s
        + rl_step_s(model, pc, plan, cluster, layouts, st, batch, t)
        + teacher_seconds(pc, plan, t.step_s)
    )


def _stage_flop(
    model: ModelSpec, plan: TrainingPlan, st: Any, recompute: Any, pc: ParamCounts
) -> tuple[Any, Any]:
    """(model, hardware) FLOPs of one stage's tokens: a pretraining's, or what a fine-tune (or a
    classifier) executes: no weight gradients for frozen weights, no LM head without one
    (flops.finetune_flop_per_token); hardware FLOPs add the recompute."""
    if plan.finetune is None and plan.task == Task.CAUSAL_LM:
        return (
            st.tokens * np.asarray(model_flop_per_token(model, st.seq_len, pc)),
            st.tokens * hardware_flop_per_token(model, st.seq_len, recompute, pc),
        )
    ft_flop = np.asarray(finetune_flop_per_token(model, st.seq_len, plan, pc))
    return (
        st.tokens * ft_flop,
        st.tokens * (ft_flop + recompute_flop_per_token(model, st.seq_len, recompute, pc)),
    )


def best_row(ev: Evaluation) -> int | None:
    """Index of the fastest legal row that fits (ties: less memory); None when there is none."""
    ok = ev.ok
    if not ok.any():
        return None
    key = np.where(ok, ev.total_s, np.inf)
    fastest = key.min()
    near = ok & (key <= fastest * (1 + 1e-9))
    return int(np.argmin(np.where(near, ev.per_gpu_bytes, np.inf)))


def rl_step_s(
    model: ModelSpec, pc: ParamCounts, plan: TrainingPlan, cluster: ClusterSpec, layouts: LayoutArrays,
    st: Any, batch: Any, t: Any,
) -> Any:  # fmt: skip
    """An RL step's seconds beyond the policy's training (trilemma.estimate.rl): the generation, the reference's
    forward and PPO's other forwards and critic step; 0 without an RL plan."""
    if plan.rl is None:
        return 0.0
    hw = cluster.hardware
    gen = rollout_seconds(
        model, pc, plan, layouts, st.seq_len, batch, hw.peak(plan.precision), hw.hbm_bw_bytes_per_s
    )
    return gen + beside_seconds(model, pc, plan, t.step_s)
