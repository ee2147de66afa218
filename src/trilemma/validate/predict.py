"""One backtest row predicted: its plan evaluated with the constants under test (the layout the row
pins, else the one the planner picks), the metric it reports read off the evaluation, and the
ratio to the reported value (trilemma.validate.fit fits the constants on these)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.estimate.choose import evaluate_candidates, pinned_axes
from trilemma.estimate.evaluate import Evaluation, evaluate
from trilemma.estimate.layouts import R_OOM, LayoutArrays, legal_mask
from trilemma.resolve import make_cluster
from trilemma.specs import Layout
from trilemma.specs.constants import Constants
from trilemma.units import DAY, HOUR, TERA
from trilemma.validate import MEMORY_METRICS, Case

# busy_gpu_hours (a run's GPU-hours as its source computes them: tokens over the measured rate, no idle time)
# tests the step time alone, as a rate does: a time metric, not a whole-run one (no goodput in it)
TIME_METRICS = {
    "tokens_per_s_per_gpu",
    "model_tflops_per_gpu",
    "hardware_tflops_per_gpu",
    "mfu",
    "hfu",
    "step_s",
    "forward_backward_s",
    "busy_gpu_hours",
}
RUN_METRICS = {"gpu_hours", "days"}
DURATION_METRICS = {
    "step_s",
    "forward_backward_s",
    "gpu_hours",
    "days",
    "busy_gpu_hours",
}  # the others of TIME_METRICS are rates


@dataclass(frozen=True)
class Prediction:
    case: Case
    predicted: float | None  # None when the case could not be evaluated
    layout: Layout | None
    fits: bool
    note: str = ""
    unfitted_bytes: float = (
        0.0  # of ``predicted``: the CUDA context + NCCL when the metric counts them
    )

    @property
    def log_ratio(self) -> float | None:
        if self.predicted is None or not self.predicted > 0:
            return None
        return math.log(self.predicted / self.case.reported)

    @property
    def time_log_ratio(self) -> float | None:
        """log(predicted time / reported time): the log ratio with the sign of a duration. A rate
        (tokens/s, TFLOP/s, MFU, HFU) predicted above the reported one is a time predicted below it,
        so its sign flips; step time, GPU-hours and days keep theirs. None for other metrics."""
        r = self.log_ratio
        if r is None or self.case.metric not in TIME_METRICS | RUN_METRICS:
            return None
        return r if self.case.metric in DURATION_METRICS else -r


def with_params(consts: Constants, values: dict[tuple[str, str], float]) -> Constants:
    return consts.with_values(values)


def resolve_layout(case: Case, consts: Constants) -> tuple[Layout | None, bool, str]:
    """The case's layout: the axes the row fixes, the rest searched (fastest legal, preferring
    layouts that fit). Returns (layout, fits, note)."""
    cl = make_cluster(
        case.hardware, case.n_gpus, memory_headroom=0.0
    )  # the job ran: its peak against capacity
    ev = evaluate_candidates(case.model, cl, case.plan, pinned_axes(case.layout), consts)
    if ev is None:
        return None, False, "no candidate layout for the row's degrees"
    legal = (ev.reasons & ~R_OOM) == 0
    if not legal.any():
        return None, False, "no legal layout for the row's configuration"
    fits = legal & (ev.reasons == 0)
    pool = fits if fits.any() else legal
    i = int(np.argmin(np.where(pool, ev.total_s, np.inf)))
    return ev.layouts.row(i), bool(fits.any()), "" if fits.any() else "predicted out of memory"


def metric_value(case: Case, ev: Evaluation) -> float:
    """The case's metric from a one-row evaluation, in the units of Case.reported."""
    n = case.n_gpus
    peak = case.hardware.peak(case.plan.precision)
    m = case.metric
    if m == "gpu_hours":
        return n * float(ev.total_s[0]) / HOUR
    if m == "days":
        return float(ev.total_s[0]) / DAY
    if m == "busy_gpu_hours":
        return n * float(ev.busy_s[0]) / HOUR
    if m == "tokens_per_s_per_gpu":
        return float(ev.tokens_per_s[0]) / n
    if m == "model_tflops_per_gpu":
        return float(ev.mfu[0]) * peak / TERA
    if m == "hardware_tflops_per_gpu":
        return float(ev.hfu[0]) * peak / TERA
    if m == "mfu":
        return float(ev.mfu[0])
    if m == "hfu":
        return float(ev.hfu[0])
    if m == "step_s":
        return float(ev.stages[0].time.step_s[0])
    if (
        m == "forward_backward_s"
    ):  # the step without its optimizer update (and the clipping pass counted with it)
        t = ev.stages[0].time
        return float(t.step_s[0] - t.optimizer_s[0])
    if m in MEMORY_METRICS:
        return memory_quantity(m, float(ev.per_gpu_bytes[0]), ev)
    raise ValueError(f"unknown metric {m}")


def memory_quantity(metric: str, device_bytes: float, ev: Evaluation) -> float:
    """The planner's peak in the quantity a memory figure counts, bytes, from its total (allocated peak
    + what is outside the allocator; trilemma.estimate.memory.MemoryArrays.total): the allocated peak is
    the tensors alone, the caching allocator's reserved peak that × (1 + fragmentation), and the device
    memory in use (nvidia-smi, NVML) the reserved peak + the CUDA context + NCCL's buffers + the residual."""
    mem = ev.stages[0].memory
    overhead = float(np.asarray(mem.overhead_bytes).reshape(-1)[0])
    allocated = device_bytes - overhead
    if metric == "peak_allocated_bytes":
        return allocated
    reserved = allocated * (1 + mem.fragmentation)
    return reserved if metric == "peak_reserved_bytes" else reserved + overhead


def predict(
    cases: Iterable[Case],
    consts: Constants,
    layouts: dict[tuple[str, int], tuple] | None = None,
    memory: bool = True,
    prepared: dict | None = None,
) -> list[Prediction]:
    """Predict every case with ``consts``; ``layouts`` (kind, row) → (Layout, fits, note) skips the search.
    ``memory=False`` (time metrics only: the fit's residuals) skips the memory model; ``fits`` is then
    the layout's as resolved. ``prepared``: a dict the caller keeps across repeated predictions of the same
    cases (``fit_time``), in which each (case, layout)'s cluster and layout arrays and each case's
    configuration (_configuration) are built once."""
    out = []
    prepared = {} if prepared is None else prepared
    alike: dict[tuple, tuple] = {}  # rows of one configuration: searched and evaluated once
    for c in cases:
        key = (c.kind, c.row)
        given = layouts.get(key) if layouts else None
        if key not in prepared:  # the case's configuration, serialised once a fit
            prepared[key] = _configuration(c)
        same = (prepared[key], given)
        if same not in alike:
            lay, fits, note = given or resolve_layout(c, consts)
            ev = None
            if lay is not None:
                cl, arrays, legal = _prepared(c, lay, consts, prepared)
                ev = evaluate(c.model, cl, c.plan, arrays, consts, memory=memory, legal=legal)
            alike[same] = (lay, fits, note, ev)
        lay, fits, note, ev = alike[same]
        if lay is None:
            out.append(Prediction(c, None, None, False, note))
            continue
        if not memory:
            out.append(Prediction(c, metric_value(c, ev), lay, bool(fits), note))
            continue
        fits = bool(ev.reasons[0] == 0)
        mem = ev.stages[0].memory
        fixed = (
            mem.context_bytes + float(np.asarray(mem.nccl_bytes).reshape(-1)[0])
            if c.metric == "peak_memory_bytes"
            else 0.0
        )
        out.append(
            Prediction(
                c,
                metric_value(c, ev),
                lay,
                fits,
                note or ("" if fits else "predicted out of memory"),
                unfitted_bytes=fixed,
            )
        )
    return out


def _configuration(case: Case) -> tuple:
    """What a case's layout search and evaluation depend on (its metric and label aside): the rows of a
    file that share it are predicted from one evaluation (5,000 rows of a few hundred configurations
    searched each layout space once per row, and took most of a minute)."""
    return (
        case.model.model_dump_json(),
        case.hardware.model_dump_json(),
        case.n_gpus,
        case.plan.model_dump_json(),
        json.dumps(case.layout, sort_keys=True, default=str),
    )


def _prepared(
    case: Case, lay: Layout, consts: Constants, cache: dict
) -> tuple[Any, LayoutArrays, tuple]:
    """The case's cluster (no memory headroom: a row is timed whether or not it would count as fitting),
    ``lay`` as one-row arrays and each stage's ``legal_mask`` on them, kept in ``cache`` under (kind, row,
    layout, batch tolerance): none depends on the fitted constants, so a fit's repeated predictions of the
    same (case, layout) build them once (a fit re-times each row ~170 times: building them took a third of
    its time)."""
    tolerance = consts["batch"]["tolerance"]
    key = (case.kind, case.row, lay, tolerance)
    if key not in cache:
        cl, arrays = (
            make_cluster(case.hardware, case.n_gpus, memory_headroom=0.0),
            LayoutArrays.from_layouts([lay]),
        )
        legal = tuple(
            legal_mask(case.model, arrays, st, cl.n_gpus, tolerance) for st in case.plan.stages
        )
        cache[key] = (cl, arrays, legal)
    return cache[key]
