"""Fit L = E + A/N^α + B/D^β to a table of runs: the Hoffmann 2022 procedure, done right.

Procedure (Hoffmann et al. 2022, arXiv 2203.15556, §3.3 Eq. 3 and App. D.2 Eq. 11):

    minimise over θ = (a, b, e, α, β)   Σ_runs Huber_δ( LSE(a − α·ln N, b − β·ln D, e) − ln L ),   δ = 1e-3
    A, B, E = e^a, e^b, e^e

with L-BFGS from the grid α, β ∈ {0, 0.5, …, 2}, e ∈ {−1, −0.5, …, 1}, a, b ∈ {0, 5, …, 25}, keeping the
best local minimum. Two corrections from Besiroglu et al. 2024 (arXiv 2404.10102, §2 and their code):
the Huber loss is *summed* over runs (Hoffmann's averaged objective let the optimiser stop early) and
convergence is checked (gradient norm). For speed the whole grid is scored and L-BFGS starts from the
best ``starts`` grid points (``starts=0``: every grid point, as Hoffmann did); internally ln N and ln D
are centred (a' = a − α·mean ln N), a linear change of variables that leaves the minimiser unchanged but
makes L-BFGS converge in far fewer steps.

Uncertainty: bootstrap over runs (resample with replacement, refit from the point estimate), as
Besiroglu et al. (4000 resamples) and Hoffmann Table 2 (10th/90th percentiles). Leave-out check: fit
on all but the largest model sizes and report the error on those. L-BFGS is written out below (numpy
only). The plot of a fit is ``trilemma.report.fit_plot.plot_fit`` (quality imports no report module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from trilemma.errors import InputError
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.law import EXPONENT_MIN
from trilemma.quality.laws import DEFAULT_LEVEL, Form, Law, Uncertainty
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
from trilemma.quality.plausible import plausible_runs
from trilemma.quality.runs import MIN_RUNS, MIN_SIZES, Runs, check_enough, n_sizes, size_groups
from trilemma.specs.enums import LossUnit, NCounts

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
) -> Any:
    obj = _Objective(n, d, loss, delta, d_term)
    return (
        obj if fix is None or not d_term else _Constrained(obj, None if fix == TIE else float(fix))
    )


def fit_point(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    *,
    delta: float = DELTA,
    starts: int = 64,
    init: np.ndarray | None = None,
    fix: str | float | None = None,
) -> PointFit:
    """Hoffmann's fit: score the grid, L-BFGS from the best ``starts`` points (0 = all), keep the best.

    Above ``SCREEN_RUNS`` runs the grid and the starts run on a subsample of that size, and the best of
    them is refined on all runs (the reported objective, gradient and convergence are the full data's).
    ``fix``: ``TIE`` fits β = α, a number fixes α = β to it (runs at several D only).
    """
    n, d, loss = (np.asarray(v, dtype=float) for v in (n, d, loss))
    d_term = bool(np.ptp(np.log(d)) > 1e-9)
    obj = _objective(n, d, loss, delta, d_term, fix)
    screen = obj
    if init is None and len(n) > SCREEN_RUNS:
        idx = _subsample(len(n), SCREEN_RUNS)
        screen = _objective(n[idx], d[idx], loss[idx], delta, d_term, fix)
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
    results = [_minimise(screen, t0, gtol) for t0 in t0s]
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


# ------------------------------------------------------------------ what the runs cannot pin

#: E below this share of the lowest loss: the runs show no irreducible loss (E ran to its boundary, 0).
E_FLOOR = 0.01
#: Exponents outside (0, EXP_MAX] are not physical for a ladder: Hoffmann 2022 App. D.2 searched α, β in
#: [0, 2] ("the optimal initialisation is not on the boundary"); published fits give 0.28-0.37.
EXP_MAX = 2.0
#: An exponent whose bootstrap band is wider than this is not pinned by the runs: ~3x the published
#: exponents themselves (Hoffmann 0.34/0.28, Besiroglu 2024 0.348/0.366 with 95% bands 0.06-0.08 wide).
EXP_BAND_MAX = 1.0
#: α = β when the runs cannot pin them apart: Muennighoff et al. 2023 (arXiv 2305.16264) fit α = β = 0.353;
#: Besiroglu et al. 2024's refit has α ≈ β (0.348, 0.366); Gadre et al. 2024 tie them. When even the tied
#: exponent is not pinned it is fixed to 0.35, the value of those two fits.
LITERATURE_EXPONENT = 0.35
_STAGES: tuple[tuple[str | float | None, str], ...] = (
    (None, "all five constants free"),
    (TIE, "beta tied to alpha (Muennighoff 2023's fitted form; Besiroglu 2024: alpha ~ beta)"),
    (
        LITERATURE_EXPONENT,
        f"alpha = beta fixed at {LITERATURE_EXPONENT} (Besiroglu 2024: 0.348/0.366; "
        "Muennighoff 2023: 0.353)",
    ),
)


def unpinned(point: PointFit, samples: np.ndarray, loss_min: float, level: float) -> list[str]:
    """Why the runs do not pin the fit's constants (empty: they do): E at 0, an exponent outside
    [EXPONENT_MIN, EXP_MAX] (below it a law file is refused), or a bootstrap band of an exponent wider than EXP_BAND_MAX or of E reaching 0."""
    c = point.constants
    why = []
    if c["E"] < E_FLOOR * loss_min:
        why.append(f"E = {c['E']:.3g} is ~0 (below {E_FLOOR:.0%} of the lowest loss)")
    exps = ("alpha", "beta") if point.d_term else ("alpha",)
    why += [
        f"{k} = {c[k]:.3g} is outside [{EXPONENT_MIN:g}, {EXP_MAX:g}]"
        for k in exps
        if not EXPONENT_MIN <= c[k] <= EXP_MAX
    ]
    if len(samples):
        ci = _ci(samples, level)
        why += [
            f"{k}'s {level:.0%} band [{ci[k][0]:.3g}, {ci[k][1]:.3g}] is wider than {EXP_BAND_MAX:g}"
            for k in exps
            if ci[k][1] - ci[k][0] > EXP_BAND_MAX
        ]
        if ci["E"][0] < E_FLOOR * loss_min <= c["E"]:
            why.append(f"E's {level:.0%} band reaches ~0 ({ci['E'][0]:.3g})")
    return why


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
    their log residuals r at distances x = ln(N / largest N kept) give, by moments,
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
    x = np.log(n[held] / n[~held].max())
    if not np.isfinite(r).all():
        return None
    return float(
        math.sqrt(max(0.0, float(np.mean(r * r)) - in_sample_sd**2) / float(np.mean(x * x)))
    ), int(held.sum())


# ------------------------------------------------------------------ the whole fit


@dataclass(frozen=True)
class FitReport:
    SCHEMA: ClassVar[str] = (
        "trilemma.fit/1"  # the document of `trilemma fit --json` and the ladder's fit block
    )

    law: Law
    point: PointFit
    samples: np.ndarray  # bootstrap rows (E, A, B, alpha, beta)
    level: float
    ci: dict[str, list[float]]
    gof: dict[str, float]
    leave_out: dict[str, Any] | None
    runs: Runs
    warnings: tuple[str, ...] = ()
    law_path: str | None = None
    plot_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    fixed: str = "all five constants free"  # or which exponents were tied or fixed, and to what
    unpinned: tuple[str, ...] = ()  # why each looser fit was not kept

    def to_dict(self) -> dict[str, Any]:
        """The law first (linear constants), then its intervals, then the checks."""
        c = self.point.constants
        a = c["beta"] / (c["alpha"] + c["beta"]) if c["alpha"] + c["beta"] > 0 else float("nan")
        pred = chinchilla_loss(c, self.runs.n, self.runs.d)
        return {
            "law": {"form": "chinchilla", **{k: c[k] for k in PARAMS}},
            "constants_fixed": {"fit": self.fixed, "looser_fits_not_pinned": list(self.unpinned)},
            "prediction_error": dict(self.law.uncertainty.residual or {})
            if self.law.uncertainty
            else None,
            "ci": {
                "level": self.level,
                "method": f"bootstrap over runs, {len(self.samples)} refits, "
                f"{(1 - self.level) / 2:.0%}/{(1 + self.level) / 2:.0%} percentiles",
                **self.ci,
            },
            "schema": self.SCHEMA,
            "law_path": self.law_path,
            "plot_path": self.plot_path,
            "formula": "L = E + A/N^alpha + B/D^beta",
            "n_counts": self.law.n_counts,
            "loss_unit": self.law.loss_unit,
            "data": self.law.data,
            "tokenizer": self.law.tokenizer,
            "compute_optimal": {
                "a": a,
                "b": 1 - a,
                "note": "N* ∝ C^a, D* ∝ C^b with C = 6·N·D (Hoffmann 2022 Eq. 4)",
            },
            "goodness_of_fit": self.gof,
            "convergence": {
                "converged": self.point.converged,
                "objective": self.point.objective,
                "grad_max": self.point.grad_max,
                "iterations": self.point.iterations,
                "starts": self.point.starts,
                "starts_at_best": self.point.starts_at_best,
                "delta": DELTA,
                "objective_form": "sum over runs of Huber_delta(LSE - ln L)",
            },
            "leave_out": self.leave_out,
            "runs": [
                {"N": float(a_), "D": float(b_), "loss": float(l_), "predicted": float(p_)}
                for a_, b_, l_, p_ in zip(self.runs.n, self.runs.d, self.runs.loss, pred)
            ]
            if len(self.runs) <= RUNS_LISTED
            else [],
            "warnings": list(self.warnings)
            + (
                [
                    f"{len(self.runs):,} runs: the per-run list is left out of this "
                    f"document (more than {RUNS_LISTED:,}); the fit used every run"
                ]
                if len(self.runs) > RUNS_LISTED
                else []
            ),
        }


def _ci(samples: np.ndarray, level: float) -> dict[str, list[float]]:
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


def fit_runs(
    runs: Runs,
    *,
    name: str = "fitted",
    n_counts: NCounts | str = NCounts.TOTAL,
    loss_unit: LossUnit | str = LossUnit.NATS_PER_TOKEN,
    data: str = "unknown data (say with --data)",
    tokenizer: str = "unknown tokenizer (say with --tokenizer)",
    n_boot: int = 200,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    starts: int = 64,
    holdout: float = 0.2,
    delta: float = DELTA,
) -> FitReport:
    """Fit, bootstrap, goodness of fit and leave-out check; the result's ``law`` is usable everywhere."""
    counts, unit = NCounts.parse(n_counts, "n-counts"), LossUnit.parse(loss_unit, "loss-unit")
    runs, warnings = plausible_runs(runs, unit)
    check_enough(runs)
    n, d, loss = runs.n, runs.d, runs.loss
    point = fit_point(n, d, loss, delta=delta, starts=starts)
    c = point.constants
    if c["alpha"] <= 0 or (point.d_term and c["beta"] <= 0):
        raise InputError(
            "runs",
            runs.source,
            "runs in which loss falls with N and with D "
            f"(the best fit has alpha = {c['alpha']:.3g}, beta = {c['beta']:.3g})",
        )

    def _boot(p: PointFit, fix: str | float | None) -> tuple[np.ndarray, int]:
        return (
            bootstrap(n, d, loss, p, n_boot=n_boot, seed=seed, delta=delta, fix=fix)
            if n_boot > 0
            else (np.empty((0, 5)), 0)
        )

    fix: str | float | None = None
    fixed_text, why_all = "", []
    stages = _STAGES if point.d_term else _STAGES[:1]
    for stage, (stage_fix, words) in enumerate(stages):
        if stage:
            point = fit_point(n, d, loss, delta=delta, starts=starts, fix=stage_fix)
        fix, fixed_text = stage_fix, words
        why = unpinned(point, np.empty((0, 5)), float(loss.min()), level)
        samples, degenerate = (
            (np.empty((0, 5)), 0) if why and stage < len(stages) - 1 else _boot(point, stage_fix)
        )
        why = why or unpinned(point, samples, float(loss.min()), level)
        if not why:
            break
        why_all.append(f"{words}: {'; '.join(why)}")
    c = point.constants
    if fix is not None:
        warnings.append(
            f"the runs cannot pin every constant, so the fit is made with {fixed_text} "
            f"(reported as fixed; {' | '.join(why_all)})"
        )
    if why_all and len(why_all) == len(_STAGES):
        warnings.append(
            "even with alpha = beta fixed the runs leave a constant unpinned: "
            "treat the law as a rough description of these runs only"
        )
    if not point.converged:
        warnings.append(
            f"the optimiser did not converge (largest gradient {point.grad_max:.2e}, {point.message}); "
            "treat the constants with care"
        )
    if not point.d_term:
        warnings.append(
            f"every run has the same D ({d[0]:.4g} tokens): the data term cannot be separated from E; "
            "fitted L = E + A/N^alpha with B = beta = 0, valid at that D only"
        )
    elif len(np.unique(np.round(np.log(d), 3))) < 3:
        warnings.append("fewer than 3 distinct token counts: B and beta are weakly determined")
    if c["E"] < 1e-3 * loss.min():
        warnings.append(
            "the fitted E is ~0: the runs do not show an irreducible loss; extrapolations are unreliable"
        )
    if degenerate:
        warnings.append(
            f"{degenerate} bootstrap refit(s) ran off to non-finite constants (degenerate resamples) "
            f"and were left out; the intervals use the other {len(samples)}"
        )
    if n_boot > 0 and len(samples) < n_boot:
        warnings.append(
            f"only {len(samples)} of {n_boot} bootstrap resamples gave a usable refit "
            f"({MIN_SIZES}+ model sizes, finite constants)"
        )
    lo = (
        leave_out(
            n,
            d,
            loss,
            fraction=holdout,
            delta=delta,
            init=np.where(np.isfinite(point.theta), point.theta, 0.0),
        )
        if holdout > 0
        else None
    )
    if holdout > 0 and lo is None:
        warnings.append(
            "leave-out check skipped: without the largest sizes too few runs remain to fit"
        )
    gof = goodness(c, n, d, loss)
    ci = _ci(samples, level)
    ext = extrapolation_error(n, d, loss, gof["rmse_log_loss"], fix=fix, delta=delta)
    if ext is None:
        warnings.append(
            "too few model sizes to measure the error of an extrapolation: the band holds the "
            "parameter spread and the in-sample error only"
        )
    free = 5 if fix is None else 4 if fix == TIE else 3
    error = {
        "log_sd": gof["rmse_log_loss"],
        "log_sd_per_e_fold": ext[0] if ext else 0.0,
        "df": ext[1] if ext else max(1, len(n) - free),
    }
    unc = None
    if len(samples):
        unc = Uncertainty(
            "samples",
            PARAMS,
            level,
            f"bootstrap over runs ({len(samples)} refits, seed {seed})",
            samples=samples,
            residual=MappingProxyType(error),
        )
    fit_info = {
        "runs_file": runs.source,
        "columns": list(runs.columns),
        "runs": len(n),
        "sizes": gof["sizes"],
        "procedure": "Hoffmann 2022 App. D.2: Huber delta=1e-3 on log loss, summed; L-BFGS from the best "
        f"{point.starts} of the 4500-point grid; bootstrap {len(samples)} refits",
        "converged": point.converged,
        "objective": point.objective,
        "constants_fixed": fixed_text,
        "rmse_log_loss": gof["rmse_log_loss"],
        "mean_abs_rel_error": gof["mean_abs_rel_error"],
    }
    if lo is not None:
        fit_info["leave_out_mean_abs_rel_error"] = lo["mean_abs_rel_error"]
        fit_info["leave_out_max_abs_rel_error"] = lo["max_abs_rel_error"]
    notes = []
    if not point.d_term:
        notes.append(f"fitted at a single D = {d[0]:.4g} tokens: the law ignores D (B = beta = 0)")
    law = Law(
        name=name,
        form=Form.CHINCHILLA,
        constants=MappingProxyType(dict(c)),
        n_counts=counts,
        loss_unit=unit,
        data=data,
        tokenizer=tokenizer,
        source=f"trilemma fit on {runs.source} ({len(n)} runs)",
        title=f"fitted on {Path(runs.source).name}",
        notes=tuple(notes),
        uncertainty=unc,
        fit_range=MappingProxyType(
            {
                "N_min": float(n.min()),
                "N_max": float(n.max()),
                "D_min": float(d.min()),
                "D_max": float(d.max()),
            }
        ),
        fit_report=MappingProxyType(fit_info),
    )
    return FitReport(
        law=law,
        point=point,
        samples=samples,
        level=level,
        ci=ci,
        gof=gof,
        leave_out=lo,
        runs=runs,
        warnings=tuple(warnings),
        fixed=fixed_text,
        unpinned=tuple(why_all),
    )
