"""Extrapolating a loss law to larger runs: forms averaged by their held-out error.

A free five-constant fit of L = E + A/N^α + B/D^β (Hoffmann et al. 2022, arXiv 2203.15556, App. D.2)
describes the runs it saw well and can extrapolate badly: on small runs the exponents drift (β 0.5-0.7 on
Hoffmann's smaller runs, against 0.28-0.37 in the published fits on all of them), and a run 10× larger in
compute lands several percent off. trilemma fits three forms, each with Hoffmann's procedure
(``trilemma.quality.fit_procedure.fit_point``):

- free: all five constants;
- tied: β = α (Muennighoff et al. 2023, arXiv 2305.16264, fit that form);
- literature: α = β = 0.35, the exponent of Muennighoff et al. 2023 on C4 (0.353), data other than the
  suites trilemma is checked on (``trilemma.quality.fit_pinning.LITERATURE_EXPONENT``).

and averages their predictions with weights 1/e² (e: each form's median absolute relative error on the
runs' own larger part, fitted on the part ``SCALE``× smaller in compute: forecasts combined with
weights inverse to their squared error, Bates & Granger 1969, "The combination of forecasts", Oper. Res.
Q. 20(4)). When the runs are too few to hold any out, the literature form alone is used (as the
staged fit does when the runs cannot pin the exponents). Runs that share one D fit α alone (B = β = 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.quality.fit_pinning import LITERATURE_EXPONENT
from trilemma.quality.fit_procedure import TIE, fit_point
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.runs import MIN_SIZES, n_sizes

#: held-out runs are at least this many times the largest fitted run's compute (6·N·D)
SCALE = 10.0
#: the forms averaged: (``fix`` of fit_point, name, free constants)
FORMS: tuple[tuple[str | float | None, str, int], ...] = (
    (None, "free", 5),
    (TIE, "tied", 4),
    (LITERATURE_EXPONENT, "literature", 3),
)
#: the averaged fit in words (validate's method line and fit's document)
METHOD = (
    "free, tied (beta = alpha) and literature-exponent (alpha = beta = 0.35) forms, each weighted by "
    "1/e^2, e its median error on the runs' larger part fitted on the part 10x smaller in compute "
    "(Bates & Granger 1969; trilemma.quality.extrapolate)"
)
#: L-BFGS starts from the best this many points of Hoffmann's grid (fit_point's ``starts``): on the shipped
#: suites the same minima as from 32, in a quarter of the time
STARTS = 8
#: a held-out error never counts as smaller than this (relative): the digitised losses' precision,
#: ±0.01 nats on ~2.5 (Epoch AI's reading of Hoffmann's Fig. 4, trilemma/data/losses.csv notes)
ERROR_FLOOR = 0.004


@dataclass(frozen=True)
class Averaged:
    """Each form's constants (fitted on every run given) and its weight (the weights sum to 1)."""

    constants: tuple[dict[str, float], ...]
    weights: tuple[float, ...]
    names: tuple[str, ...]
    held_out_error: dict[
        str, float
    ]  # each scored form's median |relative error| on the larger runs

    def to_dict(self) -> dict[str, Any]:
        """The averaged fit as `trilemma fit --method averaged` reports it: each form's weight, held-out
        error (fraction; None where the form was not scored) and constants."""
        return {
            "method": METHOD,
            "forms": [
                {
                    "form": name,
                    "weight": w,
                    "held_out_error": self.held_out_error.get(name),
                    **{k: float(c[k]) for k in ("E", "A", "B", "alpha", "beta")},
                }
                for name, w, c in zip(self.names, self.weights, self.constants)
            ],
        }

    def predict(self, n: Any, d: Any) -> np.ndarray:
        """The weighted mean of the forms' losses (the law's unit) at N parameters, D tokens."""
        return sum(
            (w * chinchilla_loss(c, n, d) for c, w in zip(self.constants, self.weights)),
            start=np.zeros(np.broadcast(np.asarray(n), np.asarray(d)).shape),
        )


def split(n: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fitted, held out) masks: the runs at most 1/SCALE of the largest compute, and the runs at least
    SCALE× the largest of those."""
    c = 6.0 * np.asarray(n, float) * np.asarray(d, float)  # C = 6·N·D, FLOP (Kaplan 2020 §2.1)
    small = c <= c.max() / SCALE
    large = c >= SCALE * c[small].max() if small.any() else np.zeros_like(small)
    return small, large


def _forms(d: np.ndarray) -> tuple[tuple[str | float | None, str, int], ...]:
    """The forms a set of runs can take: at one D no β to tie (α alone is fixed; 2 constants)."""
    if np.ptp(np.log(d)) > 1e-9:
        return FORMS
    return ((None, "free", 3), (LITERATURE_EXPONENT, "literature", 2))


def _fits(n: np.ndarray, d: np.ndarray, loss: np.ndarray, fix: str | float | None) -> dict:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return fit_point(n, d, loss, fix=fix, starts=STARTS).constants


def held_out_errors(n: np.ndarray, d: np.ndarray, loss: np.ndarray) -> dict[str, float]:
    """Each form's median |relative error| on the runs above 1/SCALE of the largest compute, fitted on
    the runs below; a form whose fit would have as many constants as runs is not scored."""
    small, _ = split(n, d)
    rest = ~small
    out: dict[str, float] = {}
    if not rest.any() or n_sizes(n[small]) < MIN_SIZES:
        return out
    for fix, name, free in _forms(d):
        if small.sum() <= free:
            continue
        c = _fits(n[small], d[small], loss[small], fix)
        rel = np.abs(chinchilla_loss(c, n[rest], d[rest]) / loss[rest] - 1.0)
        if np.isfinite(rel).all():
            out[name] = max(float(np.median(rel)), ERROR_FLOOR)
    return out


def averaged_fit(n: Any, d: Any, loss: Any) -> Averaged:
    """The forms' fits on every run, weighted by 1/(held-out error)²; the literature form alone when no
    form can be scored."""
    n, d, loss = (np.asarray(v, float) for v in (n, d, loss))
    errors = held_out_errors(n, d, loss)
    forms = [f for f in _forms(d) if f[1] in errors] or [
        f for f in _forms(d) if f[1] == "literature"
    ]
    raw = [1.0 / errors[name] ** 2 if errors else 1.0 for _, name, _ in forms]
    total = sum(raw)
    return Averaged(
        constants=tuple(_fits(n, d, loss, fix) for fix, _, _ in forms),
        weights=tuple(w / total for w in raw),
        names=tuple(name for _, name, _ in forms),
        held_out_error=errors,
    )
