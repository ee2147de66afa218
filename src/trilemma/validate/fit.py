"""Predict each published case, fit the efficiency constants, cross-validate by source.

The fit (reproduce with ``python scripts/calibrate.py``):
1. Time: the per-GEMM efficiency ceiling and half-size and the attention efficiency minimise a
   robust (soft-L1) sum of squared log(predicted / reported) over the throughput cases
   (scipy.optimize.least_squares); layouts the rows do not fix are searched once with the
   current constants, then held fixed, and the fit runs twice so that search and fit agree.
2. Goodput: nothing is fitted. Whole-run GPU-hours (and days) include failures, checkpoints and
   restarts (trilemma.estimate.goodput) and each step's wait for the slowest GPU
   (trilemma.estimate.stragglers), both from published figures (presets/reliability.toml), and
   evaluation, idle time and stalls, which no published figure sizes: they stay in the runs'
   residuals and band (fit_goodput).
3. Memory: the framework residual (bytes, what the CUDA context and NCCL's buffers leave of the device
   total) and fragmentation (fraction) by bounded linear least squares on relative memory residuals;
   the context and NCCL terms are measured and cited, not fitted.
Leave-one-source-out (LOSO) repeats the fit without each source group and predicts that group's
rows: the honest estimate of error on a cluster the constants never saw.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import least_squares, lsq_linear

from trilemma.parallel import spawn_pool
from trilemma.presets import constants as default_constants
from trilemma.specs.constants import Constants
from trilemma.units import GIB
from trilemma.validate import MEMORY_METRICS, Case
from trilemma.validate.predict import (
    RUN_METRICS,
    TIME_METRICS,
    Prediction,
    predict,
    resolve_layout,
    with_params,
)

#: (section, key, lower, upper) of the fitted time constants
TIME_PARAMS: tuple[tuple[str, str, float, float], ...] = (
    ("efficiency", "gemm_max", 0.2, 0.98),
    ("efficiency", "gemm_half_dim", 1.0, 4096.0),
    ("efficiency", "attention", 0.05, 0.95),
    ("efficiency", "balance_exponent", 0.0, 1.5),
    ("efficiency", "attention_balance_exponent", 0.0, 2.5),
    ("efficiency", "dp_overlap", 0.0, 1.0),
    ("efficiency", "kernel_s", 5e-7, 1e-5),
    ("host", "host_eager_op_s", 2e-6, 5e-5),
)
#: (section, key, lower, upper) of the whole-run constants (fit_goodput): none, its inputs are published
RUN_PARAMS: tuple[tuple[str, str, float, float], ...] = ()
#: (section, key, lower, upper) of the memory overheads (fit_memory): bytes, fraction
MEMORY_PARAMS: tuple[tuple[str, str, float, float], ...] = (
    ("memory", "framework_residual_bytes", 0.0, 8.0 * GIB),
    ("memory", "fragmentation", 0.0, 0.5),
)
#: every fitted constant with its bounds, in the order calibrated.toml lists them
FITTED_PARAMS = TIME_PARAMS + RUN_PARAMS + MEMORY_PARAMS
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
    """The whole-run constants from whole-run cases: none (RUN_PARAMS is empty), so ``consts`` unchanged.

    A whole run's wall time is its busy time over the failure model's goodput (trilemma.estimate.goodput:
    Llama 3's failure rate and storage, MegaScale's restart time) times the straggler share
    (trilemma.estimate.stragglers: Sinha et al. 2022's spread of GPU paces), every input published. What
    runs lose beyond them (evaluation, idle time, data stalls, rollbacks after loss spikes) varies with the
    stack, not with a quantity the plan states: a constant fitted to it would carry one stack's efficiency
    to every plan, so it is left in the runs' residuals, which set the runs' band (trilemma.validate.bands).
    Kept as the goodput step of ``calibrate`` and ``loso``."""
    del cases  # nothing to fit: the signature is the other fits'
    return consts


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


#: the stack of a calibration row whose source names none
UNTAGGED_STACK = "untagged"
#: what a held-out unit is: a source group (leave-one-source-out) or a chip family (cross-family)
HOLD_OUT_BY: dict[str, Callable[[Case], str]] = {
    "group": lambda c: c.group,
    "family": lambda c: c.hardware.family,
    "stack": lambda c: getattr(c, "stack", "") or UNTAGGED_STACK,
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
    with spawn_pool(workers) as pool:
        for g, preds in zip(groups, pool.map(_held_out, jobs)):
            if progress:
                progress(g)
            out.extend(preds)
    return out


#: the metrics whose rows, held out, make a fold refit (_held_out): step times the time constants, peaks
#: the memory ones, whole runs the goodput's where RUN_PARAMS has any; a fold without them is the full fit
REFIT_METRICS: frozenset[str] = frozenset(
    TIME_METRICS | MEMORY_METRICS | (RUN_METRICS if RUN_PARAMS else set())
)


def _held_out(job: tuple[str, list[Case], Constants, Constants, str]) -> list[Prediction]:
    """One held-out group (a source, or a chip family): refit what its rows test without them (from
    ``base``; the rest from ``full``), then predict them."""
    g, cases, base, full, by = job
    key = HOLD_OUT_BY[by]
    held = [c for c in cases if key(c) == g]
    train = [c for c in cases if key(c) != g]
    cc = full
    if not any(c.metric in REFIT_METRICS for c in held):
        return predict(held, cc)
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
