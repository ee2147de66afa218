"""Evaluate a training plan for many candidate layouts at once: legality, memory, time, cost.

This is the single place where the estimators are combined; `estimate`, the solver and
`validate` all call :func:`evaluate`. The scalar path is the same code with one row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trilemma.estimate.cost import CostArrays, run_cost
from trilemma.estimate.flops import hardware_flop_per_token, model_flop_per_token
from trilemma.estimate.layouts import R_OOM, LayoutArrays, legal_mask
from trilemma.estimate.memory import MemoryArrays, memory_per_device
from trilemma.estimate.params import ParamCounts, param_counts
from trilemma.estimate.time import TimeArrays, step_time
from trilemma.presets import constants
from trilemma.specs import ClusterSpec, ModelSpec, TrainingPlan


@dataclass(frozen=True)
class StageArrays:
    """One training stage evaluated for every layout row."""

    batch_seqs: np.ndarray  # global batch after rounding, sequences
    n_micro: np.ndarray  # micro-batches per pipeline per step
    steps: np.ndarray  # optimizer steps (fractional: tokens / tokens per step)
    memory: MemoryArrays
    time: TimeArrays
    reasons: np.ndarray  # 0 = legal and fits


@dataclass(frozen=True)
class Evaluation:
    """All corners for every layout row; per-stage detail in ``stages``."""

    layouts: LayoutArrays
    params: ParamCounts
    stages: tuple[StageArrays, ...]
    reasons: np.ndarray  # OR over stages
    per_gpu_bytes: np.ndarray  # max over stages
    busy_s: np.ndarray  # Σ steps × step time (no goodput)
    total_s: np.ndarray  # busy / goodput
    model_flop: float  # total model FLOPs of the plan (PaLM convention)
    hardware_flop: np.ndarray  # total with recomputation, per row
    mfu: np.ndarray
    hfu: np.ndarray
    tokens_per_s: np.ndarray  # while training (excludes goodput losses)
    cost: CostArrays

    @property
    def ok(self) -> np.ndarray:
        return self.reasons == 0


def evaluate(model: ModelSpec, cluster: ClusterSpec, plan: TrainingPlan, layouts: LayoutArrays,
             consts: dict | None = None) -> Evaluation:
    consts = consts or constants()
    pc = param_counts(model)
    peak = cluster.hardware.peak(plan.precision)
    capacity = cluster.hardware.hbm_bytes
    n = cluster.n_gpus
    stages = []
    reasons = np.zeros(len(layouts), dtype=np.int64)
    per_gpu = np.zeros(len(layouts))
    busy = np.zeros(len(layouts))
    model_flop = 0.0
    hw_flop = np.zeros(len(layouts))
    for st in plan.stages:
        batch, r = legal_mask(model, layouts, st, n, consts["batch"]["tolerance"])
        safe_batch = np.maximum(batch, layouts.dp * layouts.mb)
        n_micro = safe_batch / (layouts.dp * layouts.mb)
        mem = memory_per_device(model, pc, plan, layouts, st.seq_len, n_micro, consts["memory"])
        t = step_time(model, pc, plan, cluster, layouts, st.seq_len, safe_batch, consts)
        r = r | np.where(mem.total > capacity, R_OOM, 0)
        steps = st.tokens / (safe_batch * st.seq_len)
        stages.append(StageArrays(batch_seqs=safe_batch, n_micro=n_micro, steps=steps, memory=mem, time=t, reasons=r))
        reasons |= r
        per_gpu = np.maximum(per_gpu, mem.total)
        busy = busy + steps * t.step_s
        model_flop += st.tokens * float(model_flop_per_token(model, st.seq_len, pc))
        hw_flop = hw_flop + st.tokens * hardware_flop_per_token(model, st.seq_len, layouts.rc, pc)
    total = busy / plan.goodput
    tokens = plan.total_tokens
    tokens_per_s = tokens / busy
    mfu = model_flop / busy / (n * peak)
    hfu = hw_flop / busy / (n * peak)
    cost = run_cost(n, total, cluster.price, cluster.hardware.board_power_w, cluster.power_fraction,
                    cluster.host_power_fraction, cluster.pue, cluster.grid_kg_co2_per_kwh)
    return Evaluation(layouts=layouts, params=pc, stages=tuple(stages), reasons=reasons, per_gpu_bytes=per_gpu,
                      busy_s=busy, total_s=total, model_flop=model_flop, hardware_flop=hw_flop, mfu=mfu, hfu=hfu,
                      tokens_per_s=tokens_per_s, cost=cost)


def best_row(ev: Evaluation) -> int | None:
    """Index of the fastest legal row that fits (ties: less memory); None when there is none."""
    ok = ev.ok
    if not ok.any():
        return None
    key = np.where(ok, ev.total_s, np.inf)
    fastest = key.min()
    near = ok & (key <= fastest * (1 + 1e-9))
    return int(np.argmin(np.where(near, ev.per_gpu_bytes, np.inf)))
