"""The steps of a scaling-law fit (trilemma.quality.fit): the point fit from Hoffmann's grid, the
bootstrap over runs, goodness of fit, the leave-out check, what the runs cannot pin and the error
of an extrapolation. The procedure and its sources: trilemma.quality.fit's docstring."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from trilemma.parallel import spawn_pool
from trilemma.quality.extrapolation_band import e_folds_beyond, runs_range, suite_sd
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.objective import (
    DELTA,
    PARAMS,
    PointFit,
    _constants,
    _Constrained,
    _grad_tol,
    _minimise,
    _Objective,
    hoffmann_grid,
)
from trilemma.quality.runs import MIN_RUNS, MIN_SIZES, n_sizes, size_groups

#: Runs above which the grid is scored and the L-BFGS starts are run on a fixed random subsample of this
#: many runs, and only the best start is then refined on every run (the objective is a sum over runs, so
#: a start costs O(runs); on a million runs the 64 starts alone took minutes). At or below it: Hoffmann's
#: procedure unchanged.
SCREEN_RUNS = 2048
#: Runs above which a bootstrap refit draws this many runs (not all of them) and its deviation from the
#: point estimate is scaled by sqrt(m/n): the "m out of n" bootstrap (Bickel, Götze & van Zwet 1997,
#: Statistica Sinica 7:1; Politis & Romano 1994 subsampling), valid for this smooth, root-n estimator.
BOOT_RUNS = 2048
SUBSAMPLE_SEED = 20160
RUNS_LISTED = 10_000  # runs listed one by one in the fit's JSON document (and its leave-out rows)  # a fixed seed: the same file always gives the same fit


#: starts from which fit_point runs them on every core, one spawned process each (independent L-BFGS runs,
#: returned in order: the same results as one process): Hoffmann's full grid (``starts=0``, 4500) took
#: 33-40 s on one core of this project's 2-core machine, 21-29 s on both; the default 64 starts stay in
#: this process
PARALLEL_STARTS = 1024


def _minimise_chunk(job: tuple[Any, np.ndarray, float]) -> list[Any]:
    obj, t0s, gtol = job
    return [_minimise(obj, t0, gtol) for t0 in t0s]


def _minimise_all(obj: Any, t0s: np.ndarray, gtol: float) -> list[Any]:
    """L-BFGS from every start in ``t0s`` (rows), in order; on every core when there are at least
    ``PARALLEL_STARTS`` of them per core (spawned: a script that asks for that many needs the
    ``if __name__ == "__main__":`` guard, as for trilemma.validate.fit.loso)."""
    workers = min(os.cpu_count() or 1, len(t0s) // PARALLEL_STARTS)
    if workers < 2:
        return _minimise_chunk((obj, t0s, gtol))
    jobs = [(obj, chunk, gtol) for chunk in np.array_split(t0s, workers)]
    with spawn_pool(workers) as pool:
        return [r for part in pool.map(_minimise_chunk, jobs) for r in part]


def _subsample(m: int, k: int, seed: int = SUBSAMPLE_SEED) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).choice(m, size=k, replace=False))


TIE = "tie"  # ``fix`` of fit_point: β tied to α; a number: α = β = that number; None: all five free


def _objective(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    delta: float,
    d_term: bool,
    fix: str | float | None,
    prior: Any = None,
) -> Any:
    obj = _Objective(n, d, loss, delta, d_term)
    if prior is not None:  # a Gaussian prior on the exponents (trilemma.quality.fit_prior)
        return prior.wrap(obj)
    if fix is None or (not d_term and fix == TIE):  # one D: no β to tie; a number fixes α alone
        return obj
    return _Constrained(obj, None if fix == TIE else float(fix))


def fit_point(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    *,
    delta: float = DELTA,
    starts: int = 64,
    init: np.ndarray | None = None,
    fix: str | float | None = None,
    prior: Any = None,
) -> PointFit:
    """Hoffmann's fit: score the grid, L-BFGS from the best ``starts`` points (0 = all), keep the best.

    Above ``SCREEN_RUNS`` runs the grid and the starts run on a subsample of that size, and the best of
    them is refined on all runs (the reported objective, gradient and convergence are the full data's).
    ``fix``: ``TIE`` fits β = α, a number fixes α = β to it (α alone when the runs share one D).
    ``prior``: a ``trilemma.quality.fit_prior.Prior`` whose penalty on α, β is added to the objective.
    """
    n, d, loss = (np.asarray(v, dtype=float) for v in (n, d, loss))
    d_term = bool(np.ptp(np.log(d)) > 1e-9)
    obj = _objective(n, d, loss, delta, d_term, fix, prior)
    screen = obj
    if init is None and len(n) > SCREEN_RUNS:
        idx = _subsample(len(n), SCREEN_RUNS)
        screen = _objective(n[idx], d[idx], loss[idx], delta, d_term, fix, prior)
    if init is not None:
        t0s = obj.to_internal(np.asarray(init, dtype=float)[None, :])
    else:
        grid = screen.to_internal(hoffmann_grid())
        if not d_term or fix is not None:
            grid = np.unique(grid, axis=0)
        if starts and starts < len(grid):
            scores = np.concatenate(
                [
                    screen.huber(screen.residuals(chunk)[0])
                    for chunk in np.array_split(grid, max(1, len(grid) // 256))
                ]
            )
            t0s = grid[np.argsort(scores, kind="stable")[:starts]]
        else:
            t0s = grid
    # many runs from a given start (a leave-out or bootstrap refit): stop at the convergence test itself
    gtol = _grad_tol(obj) if init is not None and len(n) > SCREEN_RUNS else 1e-12
    results = _minimise_all(screen, t0s, gtol)
    funs = np.array([r.fun if np.isfinite(r.fun) else np.inf for r in results])
    best = results[int(np.argmin(funs))]
    f_best = float(best.fun)
    at_best = int(np.sum(funs <= f_best + max(1e-9 * abs(f_best), 1e-15)))
    message = str(best.message)
    if (
        screen is not obj
    ):  # refine the subsample's best on every run, until it meets the convergence test
        best = _minimise(obj, obj.to_internal(screen.to_hoffmann(best.x)), gtol=_grad_tol(obj))
        message = (
            f"{best.message} (starts screened on {SCREEN_RUNS} of {len(n)} runs, refined on all)"
        )
    grad_max = float(np.abs(obj(best.x)[1]).max())
    th = obj.to_hoffmann(best.x)
    return PointFit(
        constants=_constants(th),
        theta=th,
        objective=float(best.fun),
        grad_max=grad_max,
        converged=bool(grad_max <= _grad_tol(obj)),
        iterations=int(best.nit),
        starts=len(t0s),
        starts_at_best=at_best,
        d_term=d_term,
        message=message,
    )


def bootstrap(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    point: PointFit,
    *,
    n_boot: int = 200,
    seed: int = 0,
    delta: float = DELTA,
    fix: str | float | None = None,
) -> tuple[np.ndarray, int]:
    """Refits on runs resampled with replacement, each started from the point estimate.

    Returns (rows (E, A, B, α, β), how many degenerate refits were left out). A resample with fewer than
    3 model sizes is drawn again; one whose refit does not converge from the point estimate is retried
    from the best grid starts. A refit that still runs off (ln A beyond what a float holds, or a
    non-finite constant) says nothing about the law's spread and would make every percentile NaN: it is
    left out and counted. Above ``BOOT_RUNS`` runs each resample draws ``BOOT_RUNS`` of them and the
    refit's deviation from the point estimate (in ln E, ln A, ln B, α, β) is scaled by sqrt(m/n).
    """
    rng = np.random.default_rng(seed)
    out = []
    m = len(n)
    draw = min(m, BOOT_RUNS)
    shrink = math.sqrt(draw / m)
    tries = degenerate = 0
    init = point.theta if point.d_term else np.where(np.isfinite(point.theta), point.theta, 0.0)
    while len(out) < n_boot and tries < 5 * n_boot:
        tries += 1
        idx = rng.integers(0, m, draw)
        if n_sizes(n[idx]) < MIN_SIZES:
            continue
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                f = fit_point(n[idx], d[idx], loss[idx], delta=delta, init=init, fix=fix)
                if not f.converged or f.d_term != point.d_term:
                    f = fit_point(n[idx], d[idx], loss[idx], delta=delta, starts=8, fix=fix)
                th = (
                    f.theta
                    if draw == m
                    else np.where(
                        np.isfinite(point.theta),
                        point.theta + shrink * (f.theta - point.theta),
                        point.theta,
                    )
                )
                row = [_constants(th)[k] for k in PARAMS]
        except OverflowError:
            degenerate += 1
            continue
        if not np.isfinite(row).all():
            degenerate += 1
            continue
        out.append(row)
    return np.array(out, dtype=float).reshape(-1, len(PARAMS)), degenerate


def goodness(
    constants: dict[str, float], n: np.ndarray, d: np.ndarray, loss: np.ndarray
) -> dict[str, float]:
    """How well the law describes the runs it was fitted on."""
    pred = chinchilla_loss(constants, n, d)
    res = loss - pred
    rel = res / loss
    ss_tot = float(((loss - loss.mean()) ** 2).sum())
    return {
        "runs": len(n),
        "sizes": n_sizes(n),
        "rmse_log_loss": float(np.sqrt(np.mean((np.log(pred) - np.log(loss)) ** 2))),
        "mae_loss": float(np.mean(np.abs(res))),
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "r2_loss": float(1 - (res**2).sum() / ss_tot) if ss_tot > 0 else float("nan"),
    }


def leave_out(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    *,
    fraction: float = 0.2,
    delta: float = DELTA,
    starts: int = 32,
    init: np.ndarray | None = None,
) -> dict[str, Any] | None:
    """Fit on all but the largest model sizes (the top ``fraction`` of sizes, at least one); predict those.

    Returns None when what is left would be too few runs to fit. ``init``: the point fit of all runs, the
    start of the refit when there are more than ``SCREEN_RUNS`` runs.
    """
    g = size_groups(n)
    k = int(g.max()) + 1
    n_out = max(1, round(fraction * k))
    held = g >= k - n_out
    if (~held).sum() < MIN_RUNS or k - n_out < MIN_SIZES:
        return None
    # on many runs, start from the point fit of all runs (screening the grid again would double the cost)
    f = (
        fit_point(n[~held], d[~held], loss[~held], delta=delta, starts=starts, init=init)
        if init is not None and len(n) > SCREEN_RUNS
        else fit_point(n[~held], d[~held], loss[~held], delta=delta, starts=starts)
    )
    pred = chinchilla_loss(f.constants, n[held], d[held])
    rel = (pred - loss[held]) / loss[held]
    rows = (
        [
            {
                "N": float(a),
                "D": float(b),
                "loss": float(c),
                "predicted": float(p),
                "rel_error": float(e),
            }
            for a, b, c, p, e in zip(n[held], d[held], loss[held], pred, rel)
        ]
        if held.sum() <= RUNS_LISTED
        else []
    )
    rows.sort(key=lambda r: (r["N"], r["D"]))
    return {
        "held_out_sizes": n_out,
        "fit_runs": int((~held).sum()),
        "held_out_runs": int(held.sum()),
        "fit_max_N": float(n[~held].max()),
        "held_out_min_N": float(n[held].min()),
        "constants": f.constants,
        "converged": f.converged,
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "mean_rel_error": float(np.mean(rel)),
        "rows": rows,
    }


def extrapolation_error(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    in_sample_sd: float,
    *,
    fix: str | float | None = None,
    fraction: float = 0.2,
    delta: float = DELTA,
) -> tuple[float, int] | None:
    """(log-loss error per e-fold of N beyond the fitted sizes, how many runs it rests on), or None.

    Refit without the largest ``fraction`` of sizes (at least one; 2 sizes must remain), predict them:
    their log residuals r at distances x = e-folds beyond the kept runs (the most of ln(N / N_max kept),
    ln(D / D_max kept) and ln(C / C_max kept), at least 0: extrapolation_band.e_folds_beyond) give, by
    moments,
    σ₁² = max(0, mean(r²) − σ₀²) / mean(x²) with σ₀ the in-sample log residual (the error model of the
    band: σ(N)² = σ₀² + (σ₁·x)², Davison & Hinkley 1997 §6.3.3: prediction error = parameter spread plus
    out-of-sample error). Above ``SCREEN_RUNS`` runs, on a fixed subsample of that many.
    """
    if len(n) > SCREEN_RUNS:
        idx = _subsample(len(n), SCREEN_RUNS)
        n, d, loss = n[idx], d[idx], loss[idx]
    g = size_groups(n)
    k = int(g.max()) + 1
    held = g >= k - max(1, round(fraction * k))
    free = 5 if fix is None else 4 if fix == TIE else 3
    if k - max(1, round(fraction * k)) < 2 or (~held).sum() <= free:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        f = fit_point(n[~held], d[~held], loss[~held], delta=delta, starts=32, fix=fix)
        r = np.log(loss[held] / chinchilla_loss(f.constants, n[held], d[held]))
    # e-folds beyond the kept runs in N, D or compute, whichever is most (predict.beyond_fit's distance)
    kept = runs_range(n[~held], d[~held])
    x = e_folds_beyond(n[held], d[held], kept["N_max"], kept["D_max"], kept["C_max"])
    if not np.isfinite(r).all():
        return None
    return suite_sd(r, x, in_sample_sd), int(held.sum())


def intervals(samples: np.ndarray, level: float) -> dict[str, list[float]]:
    """Each constant's (and the compute-optimal exponent a's) band at ``level`` over the bootstrap
    rows: {name: [low, high]}; {} without samples."""
    if len(samples) == 0:
        return {}
    q = [(1 - level) / 2, (1 + level) / 2]
    out = {k: [float(v) for v in np.quantile(samples[:, j], q)] for j, k in enumerate(PARAMS)}
    al, be = samples[:, 3], samples[:, 4]
    with np.errstate(invalid="ignore", divide="ignore"):
        a = be / (al + be)
    a = a[np.isfinite(a)]
    if a.size:
        out["a"] = [float(v) for v in np.quantile(a, q)]
    return out
