"""Predict each published case, fit the efficiency constants, cross-validate by source.

The fit (reproduce with ``python scripts/calibrate.py``):
1. Time: the per-GEMM efficiency ceiling and half-size and the attention efficiency minimise a
   robust (soft-L1) sum of squared log(predicted / reported) over the throughput cases
   (scipy.optimize.least_squares); layouts the rows do not fix are searched once with the
   current constants, then held fixed, and the fit runs twice so that search and fit agree.
2. Goodput: whole-run GPU-hours (and days) include failures, checkpoints and restarts, which
   trilemma.estimate.goodput models per run, and evaluation, stragglers and idle time, which it
   does not. With the time constants fixed, the rest is the slow-node share of wall time,
   1 / (1 + σ·√(2 ln nodes)) (trilemma.estimate.goodput.slow_node_share), σ = run.slow_node_spread
   fitted by least absolute log deviations (fit_goodput).
3. Memory: the framework residual (bytes, what the CUDA context and NCCL's buffers leave of the device
   total) and fragmentation (fraction) by bounded linear least squares on relative memory residuals;
   the context and NCCL terms are measured and cited, not fitted.
Leave-one-source-out (LOSO) repeats the fit without each source group and predicts that group's
rows: the honest estimate of error on a cluster the constants never saw.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares, lsq_linear, minimize_scalar

from trilemma.estimate.choose import evaluate_candidates, pinned_axes
from trilemma.estimate.evaluate import Evaluation, evaluate
from trilemma.estimate.goodput import slow_node_share
from trilemma.estimate.layouts import R_OOM, LayoutArrays, legal_mask
from trilemma.presets import constants as default_constants
from trilemma.resolve import make_cluster
from trilemma.specs import Layout
from trilemma.specs.constants import Constants
from trilemma.units import DAY, GIB, HOUR, TERA
from trilemma.validate import MEMORY_METRICS, Case

#: (section, key, lower, upper) of the fitted time constants
TIME_PARAMS: tuple[tuple[str, str, float, float], ...] = (
    ("efficiency", "gemm_max", 0.2, 0.98),
    ("efficiency", "gemm_half_dim", 1.0, 4096.0),
    ("efficiency", "attention", 0.05, 0.95),
    ("efficiency", "balance_exponent", 0.0, 1.5),
    ("efficiency", "attention_balance_exponent", 0.0, 2.5),
    ("efficiency", "dp_overlap", 0.0, 1.0),
    ("efficiency", "kernel_s", 1e-6, 1e-5),
)
#: (section, key, lower, upper) of the slow-node spread σ (fit_goodput)
RUN_PARAMS: tuple[tuple[str, str, float, float], ...] = (("run", "slow_node_spread", 0.0, 2.0),)
#: (section, key, lower, upper) of the memory overheads (fit_memory): bytes, fraction
MEMORY_PARAMS: tuple[tuple[str, str, float, float], ...] = (
    ("memory", "framework_residual_bytes", 0.0, 8.0 * GIB),
    ("memory", "fragmentation", 0.0, 0.5),
)
#: every fitted constant with its bounds, in the order calibrated.toml lists them
FITTED_PARAMS = TIME_PARAMS + RUN_PARAMS + MEMORY_PARAMS
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


# ------------------------------------------------------------------ prediction


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
    cases (``fit_time``), in which each (case, layout)'s cluster and layout arrays are built once."""
    out = []
    prepared = {} if prepared is None else prepared
    alike: dict[tuple, tuple] = {}  # rows of one configuration: searched and evaluated once
    for c in cases:
        key = (c.kind, c.row)
        given = layouts.get(key) if layouts else None
        same = (_configuration(c), given)
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


# ------------------------------------------------------------------ fitting


def _log_residuals(preds: list[Prediction]) -> np.ndarray:
    return np.array([p.log_ratio for p in preds if p.log_ratio is not None])


def fit_time(cases: list[Case], consts: Constants, passes: int = 2) -> Constants:
    """Fit TIME_PARAMS on throughput cases; returns updated constants."""
    tcases = [c for c in cases if c.metric in TIME_METRICS]
    if not tcases:
        return consts
    for _ in range(passes):
        layouts = {(c.kind, c.row): resolve_layout(c, consts) for c in tcases}
        usable = [c for c in tcases if layouts[(c.kind, c.row)][0] is not None]
        keys = [(s, k) for s, k, _, _ in TIME_PARAMS]
        lo = np.array([lo for _, _, lo, _ in TIME_PARAMS])
        hi = np.array([hi for _, _, _, hi in TIME_PARAMS])
        x0 = np.clip(np.array([consts[s][k] for s, k in keys]), lo * 1.001, hi * 0.999)
        prepared: dict = {}

        def resid(x: np.ndarray) -> np.ndarray:
            cc = with_params(consts, dict(zip(keys, x)))
            r = _log_residuals(predict(usable, cc, layouts, memory=False, prepared=prepared))
            return r

        sol = least_squares(
            resid,
            x0,
            bounds=(lo, hi),
            loss="soft_l1",
            f_scale=0.1,
            x_scale="jac",
            diff_step=1e-3,
            max_nfev=200,
        )
        consts = with_params(consts, dict(zip(keys, sol.x)))
    return consts


def fit_goodput(cases: list[Case], consts: Constants) -> Constants:
    """run.slow_node_spread σ from whole-run cases, with the time constants fixed: the wall time the
    failure model (trilemma.estimate.goodput) leaves unexplained, as the slow-node share
    1 / (1 + σ·√(2 ln nodes)) (goodput.slow_node_share). σ minimises Σ |log(predicted / reported)|
    (least absolute deviations: a median fit, robust to one odd run) over [0, 2]; single-node runs
    carry no information on σ and do not move it."""
    rcases = [c for c in cases if c.metric in RUN_METRICS]
    if not rcases:
        return consts
    bare = with_params(consts, {("run", "slow_node_spread"): 0.0})
    preds = [p for p in predict(rcases, bare) if p.log_ratio is not None]
    if not preds:
        return consts
    r = np.array(
        [p.log_ratio for p in preds]
    )  # log(prediction with the failure model only / reported)
    # the share for each run's node count at σ = 1 gives its √(2 ln nodes)
    g = np.array(
        [
            1.0 / slow_node_share(p.case.n_gpus, p.case.hardware.devices_per_node, 1.0) - 1.0
            for p in preds
        ]
    )
    (_, _, lo, hi), *_ = RUN_PARAMS
    sol = minimize_scalar(
        lambda s: float(np.abs(r + np.log1p(s * g)).sum()),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return with_params(consts, {("run", "slow_node_spread"): float(sol.x) if g.any() else 0.0})


def fit_memory(cases: list[Case], consts: Constants) -> Constants:
    """The framework residual (bytes) and fragmentation (fraction) from memory cases. The CUDA context and
    NCCL's buffers are stated terms (hardware.toml, constants.toml), not fitted: the residual is what the
    published device totals leave beyond them."""
    mcases = [c for c in cases if c.metric in MEMORY_METRICS]
    if len(mcases) < 2:
        return consts
    bare = with_params(
        consts, {("memory", "framework_residual_bytes"): 0.0, ("memory", "fragmentation"): 0.0}
    )
    preds = predict(mcases, bare)
    rows, rhs = [], []
    for p in preds:
        if p.predicted is None:
            continue
        rep = p.case.reported
        # with both at 0: allocated = base, reserved = base, device = base + context + NCCL (the
        # prediction's unfitted_bytes). The model: reserved = base·(1 + frag), device =
        # base·(1 + frag) + context + NCCL + residual: the relative residual is linear in (frag, residual),
        # each counted where the figure counts it
        base = p.predicted - p.unfitted_bytes
        frag_counts = p.case.metric != "peak_allocated_bytes"
        residual_counts = p.case.metric == "peak_memory_bytes"
        rows.append([base / rep if frag_counts else 0.0, 1.0 / rep if residual_counts else 0.0])
        rhs.append(1.0 - p.predicted / rep)
    A, b = np.array(rows), np.array(rhs)
    scale = np.array([1.0, GIB])  # solve for the residual in GiB for conditioning
    (_, _, res_lo, res_hi), (_, _, frag_lo, frag_hi) = MEMORY_PARAMS
    sol = lsq_linear(
        A * scale, b, bounds=(np.array([frag_lo, res_lo]), np.array([frag_hi, res_hi])) / scale
    )
    frag, residual = sol.x * scale
    return with_params(
        consts,
        {
            ("memory", "fragmentation"): float(frag),
            ("memory", "framework_residual_bytes"): float(residual),
        },
    )


def calibrate(cases: list[Case], consts: Constants | None = None) -> Constants:
    """All fits in order: time constants, then goodput, then memory overheads."""
    consts = consts or default_constants()
    consts = fit_time(cases, consts)
    consts = fit_goodput(cases, consts)
    consts = fit_memory(cases, consts)
    return consts


#: what a held-out unit is: a source group (leave-one-source-out) or a chip family (cross-family)
HOLD_OUT_BY: dict[str, Callable[[Case], str]] = {
    "group": lambda c: c.group,
    "family": lambda c: c.hardware.family,
}


def loso(
    cases: list[Case],
    consts: Constants | None = None,
    progress: Callable[[str], None] | None = None,
    full: Constants | None = None,
    by: str = "group",
) -> list[Prediction]:
    """Leave one source group out: calibrate without it, predict its cases. ``full``: the fit on all
    cases from ``consts`` (``calibrate(cases, consts)``), when the caller has it already. ``by="family"``
    holds out one chip family (``HardwareSpec.family``) at a time instead: the error on a chip the
    constants never saw."""
    base = consts or default_constants()
    full = full or calibrate(cases, base)
    key = HOLD_OUT_BY[by]
    groups = sorted({key(c) for c in cases})
    jobs = [(g, cases, base, full, by) for g in groups]
    workers = min(len(groups), os.cpu_count() or 1)
    out: list[Prediction] = []
    if workers < 2:
        for job in jobs:
            if progress:
                progress(job[0])
            out.extend(_held_out(job))
        return out
    # the groups are independent refits: one process per core (spawned, so no state is inherited);
    # results come back in group order, identical to the serial loop
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        for g, preds in zip(groups, pool.map(_held_out, jobs)):
            if progress:
                progress(g)
            out.extend(preds)
    return out


def _held_out(job: tuple[str, list[Case], Constants, Constants, str]) -> list[Prediction]:
    """One held-out group (a source, or a chip family): refit what its rows test without them (from
    ``base``; the rest from ``full``), then predict them."""
    g, cases, base, full, by = job
    key = HOLD_OUT_BY[by]
    held = [c for c in cases if key(c) == g]
    train = [c for c in cases if key(c) != g]
    cc = full
    if any(c.metric in TIME_METRICS for c in held):
        cc = fit_time(train, base)
    if any(c.metric in RUN_METRICS for c in held):
        cc = fit_goodput(train, cc)
    if any(c.metric in MEMORY_METRICS for c in held):
        cc = fit_memory(train, cc)
    return predict(held, cc)


# ------------------------------------------------------------------ summaries


def summarise(preds: list[Prediction]) -> dict[str, Any]:
    """Median and worst |log ratio| (as %), share within 10% and 25%."""
    r = np.abs(_log_residuals(preds))
    if len(r) == 0:
        return {"n": 0}
    pct = lambda x: float(math.exp(x) - 1)  # noqa: E731
    return {
        "n": int(len(r)),
        "median_error": pct(float(np.median(r))),
        "worst_error": pct(float(r.max())),
        "within_10pct": float(np.mean(r <= math.log(1.1))),
        "within_25pct": float(np.mean(r <= math.log(1.25))),
        "not_evaluated": sum(1 for p in preds if p.log_ratio is None),
    }


def kind_of(p: Prediction) -> str:
    return p.case.kind
