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

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from trilemma.errors import InputError
from trilemma.quality.extrapolation_band import EXTRAPOLATION_FLOOR, runs_range
from trilemma.quality.fit_pinning import STAGES, Staged, staged_fit
from trilemma.quality.fit_procedure import (
    RUNS_LISTED,
    TIE,
    extrapolation_error,
    fit_point,
    goodness,
    intervals,
    leave_out,
)
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.laws import DEFAULT_LEVEL, Form, Law, Uncertainty
from trilemma.quality.objective import (
    DELTA,
    PARAMS,
    PointFit,
)
from trilemma.quality.plausible import plausible_runs
from trilemma.quality.runs import MIN_SIZES, Runs, check_enough
from trilemma.specs.enums import LossUnit, NCounts

#: what `trilemma fit --method` takes: the staged fit alone, or with it the averaged fit
METHODS = ("staged", "averaged")


def check_method(v: Any) -> str:
    """``v`` if it names a fit method (METHODS), else InputError naming the field and what is allowed."""
    if v not in METHODS:
        raise InputError(
            "method",
            v,
            "staged (one law, exponents fixed only when the runs cannot pin them) or averaged (also "
            "the forms averaged by held-out error that validate --kind quality checks)",
        )
    return str(v)


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
            # which fit the document reports: the staged one (the law above, the law file) and, with
            # --method averaged, the averaged forms beside it
            "method": self.extra.get("method", "staged"),
            "averaged": self.extra.get("averaged"),
            "extrapolation_sd": self.extra.get("extrapolation_sd"),
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
    method: str = "staged",
    extrapolation_floor: float = EXTRAPOLATION_FLOOR,
) -> FitReport:
    """Fit, bootstrap, goodness of fit and leave-out check; the result's ``law`` (the staged fit) is
    usable everywhere. ``method="averaged"`` adds the forms averaged by held-out error
    (trilemma.quality.extrapolate, what validate --kind quality checks) in ``extra["averaged"]``.
    ``extrapolation_floor``: the least σ₁ (log loss per e-fold beyond the runs) the band carries
    (trilemma.quality.extrapolation_band; validate passes one measured without the runs' source)."""
    counts, unit = NCounts.parse(n_counts, "n-counts"), LossUnit.parse(loss_unit, "loss-unit")
    method = check_method(method)
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
    st = staged_fit(runs, point, n_boot=n_boot, seed=seed, delta=delta, starts=starts, level=level)
    point, samples, fix, fixed_text, why_all = st.point, st.samples, st.fix, st.fixed, st.why_all
    warnings += _fit_warnings(st, d, loss, n_boot)
    lo = _leave_out(runs, point, holdout, delta, warnings)
    c = point.constants
    gof = goodness(c, n, d, loss)
    ci = intervals(samples, level)
    ext = extrapolation_error(n, d, loss, gof["rmse_log_loss"], fix=fix, delta=delta)
    unc = _uncertainty(samples, level, seed, gof, ext, fix, len(n), extrapolation_floor)
    law = _fitted_law(
        runs,
        point,
        st,
        gof,
        lo,
        unc,
        name=name,
        counts=counts,
        unit=unit,
        data=data,
        tokenizer=tokenizer,
    )
    extra = {
        "method": method,
        "extrapolation_sd": {"runs": ext and ext[0], "floor": extrapolation_floor},
    }
    if method == "averaged":
        from trilemma.quality.extrapolate import averaged_fit

        extra["averaged"] = averaged_fit(n, d, loss).to_dict()
    return FitReport(
        extra=extra,
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


def _fit_warnings(st: Staged, d: np.ndarray, loss: np.ndarray, n_boot: int) -> list[str]:
    """What the reader of a fit must know: constants fixed or unpinned, no convergence, one token
    count, no irreducible loss, degenerate or missing bootstrap refits."""
    point, samples, degenerate = st.point, st.samples, st.degenerate
    fix, fixed_text, why_all = st.fix, st.fixed, st.why_all
    c = point.constants
    warnings: list[str] = []
    if fix is not None:
        warnings.append(
            f"the runs cannot pin every constant, so the fit is made with {fixed_text} "
            f"(reported as fixed; {' | '.join(why_all)})"
        )
    if why_all and len(why_all) == len(STAGES):
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
    return warnings


def _leave_out(
    runs: Runs, point: PointFit, holdout: float, delta: float, warnings: list[str]
) -> dict[str, Any] | None:
    """The leave-out check on the largest ``holdout`` share of sizes (None when off or too few
    runs remain, said in ``warnings``)."""
    n, d, loss = runs.n, runs.d, runs.loss
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
    return lo


def _uncertainty(
    samples: np.ndarray,
    level: float,
    seed: int,
    gof: dict[str, float],
    ext: tuple[float, int] | None,
    fix: str | float | None,
    n_runs: int,
    floor: float,
) -> Uncertainty | None:
    """The law's uncertainty: the bootstrap rows with the prediction error (log sd in-sample and
    per e-fold of extrapolation, at least ``floor``, degrees of freedom); None without samples."""
    free = 5 if fix is None else 4 if fix == TIE else 3
    error = {
        "log_sd": gof["rmse_log_loss"],
        "log_sd_per_e_fold": max(ext[0] if ext else 0.0, floor),
        "df": ext[1] if ext else max(1, n_runs - free),
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
    return unc


def _fitted_law(
    runs: Runs,
    point: PointFit,
    st: Staged,
    gof: dict[str, float],
    lo: dict[str, Any] | None,
    unc: Uncertainty | None,
    *,
    name: str,
    counts: NCounts,
    unit: LossUnit,
    data: str,
    tokenizer: str,
) -> Law:
    """The fitted Law with its fit range and the fit's report (procedure, convergence, errors)."""
    n, d = runs.n, runs.d
    c, samples, fixed_text = point.constants, st.samples, st.fixed
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
        fit_range=MappingProxyType(runs_range(n, d)),
        fit_report=MappingProxyType(fit_info),
    )
    return law
