"""Backtest against published figures: map rows to plans, calibrate constants, report errors.

- ``cases``: each row of ``trilemma/data/{runs,throughput,memory}.csv`` → a :class:`Case` (a plan
  with a reported figure to compare with) or a :class:`Skipped` with the reason.
- ``fit``: predictions for cases, the reproducible fit of the efficiency constants, and the
  leave-one-source-out (LOSO) cross-validation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from trilemma.specs import HardwareSpec, ModelSpec, TrainingPlan

Kind = Literal["runs", "throughput", "memory"]
#: what a case compares: predicted vs reported, in SI units
Metric = Literal[
    "gpu_hours",  # whole run, device-hours (includes goodput losses)
    "days",  # whole run wall-clock, days
    "busy_gpu_hours",  # whole run, device-hours of the training steps alone: tokens over the measured rate (no goodput losses)
    "tokens_per_s_per_gpu",  # training throughput per device
    "model_tflops_per_gpu",  # achieved model FLOP/s per device / 1e12 (PaLM convention)
    "hardware_tflops_per_gpu",  # achieved hardware FLOP/s per device / 1e12 (with recomputation)
    "mfu",  # model FLOPs utilisation, 0-1
    "hfu",  # hardware FLOPs utilisation, 0-1
    "step_s",  # seconds per optimizer step
    "forward_backward_s",  # seconds of one step's forward and backward, no optimizer update (benchmarks that time loss.backward() alone)
    "peak_memory_bytes",  # peak device memory in use (nvidia-smi / NVML: reserved + CUDA context + NCCL), bytes
    "peak_reserved_bytes",  # peak of the caching allocator's reserved memory (torch.cuda.max_memory_reserved), bytes
    "peak_allocated_bytes",  # peak of allocated tensor memory (torch.cuda.max_memory_allocated), bytes
]
#: the memory metrics, from the most the device holds to the tensors alone
MEMORY_METRICS: frozenset[str] = frozenset(
    {"peak_memory_bytes", "peak_reserved_bytes", "peak_allocated_bytes"}
)


@dataclass(frozen=True)
class Case:
    """One published figure mapped to a plan trilemma can evaluate."""

    kind: Kind
    row: int  # 0-based data row index in the CSV
    label: str  # the row's model name
    source: str  # the row's source text
    group: str  # first arXiv id or URL in the source (leave-one-source-out unit)
    model: ModelSpec
    hardware: HardwareSpec
    n_gpus: int
    plan: TrainingPlan
    layout: dict  # axes the row fixes (tp, pp, dp, cp, vp, zero, recompute, micro_batch, sp); others searched
    metric: Metric
    reported: float
    assumptions: tuple[str, ...] = field(default=())  # what the mapping had to assume
    stack: str = ""  # the software stack that produced it (data/SCHEMA.md `stack`); "": not given


@dataclass(frozen=True)
class Skipped:
    kind: Kind
    row: int
    label: str
    reason: str


def source_group(source: str) -> str:
    """The source group of a row that names only its ``source`` (the leave-one-source-out unit of
    ``Case.group``): its first arXiv id, else its first github.com/owner/repo (an "owner/repo" first
    word taken as one), else its first word."""
    if m := re.search(r"arXiv[: ]?(\d{4}\.\d{4,5})", source):
        return f"arXiv:{m.group(1)}"
    if m := re.search(r"github\.com/[\w.-]+/[\w.-]+", source):
        return m.group(0)
    first = source.split(" ")[0]
    return f"github.com/{first}" if re.fullmatch(r"[\w.-]+/[\w.-]+", first) else first
