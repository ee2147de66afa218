"""A loss-law fit whose exponents are shrunk toward the literature instead of fixed to it.

The free five-constant fit (Hoffmann et al. 2022, arXiv 2203.15556, App. D.2) lets α and β drift on small
runs (0.5-0.6 on Pythia's four smaller models, against 0.28-0.37 in the published fits) and a run 10×
larger in compute then lands several percent off; fixing them (the staged fit, the literature form) throws
away what the runs do say. Here α and β get a Gaussian prior: centre ``LITERATURE_EXPONENT`` (0.35,
Muennighoff et al. 2023's fit on C4, data other than the suites trilemma is checked on), width the spread
of the published exponents of this law (``PUBLISHED``). The fit is the posterior mode (MAP) under the
Huber likelihood the plain fit uses: with the data term F = Σ Huber(r) ≈ Σ r²/2 the negative log
posterior, times the noise variance σ², is F + σ²·Σ z²/2 (z = (exponent − centre)/width), and σ² is
estimated from the free fit's own residuals, 2·F_free/(n − k) (n runs, k free constants; Gelman et al.
2013, "Bayesian Data Analysis" 3rd ed., §14.8: ridge regression as the posterior mode under a normal
prior, σ² from the residuals). Many runs that pin the exponents barely move them; a few that cannot are
held near the literature, by as much as the literature itself disagrees.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.quality.fit_pinning import LITERATURE_EXPONENT
from trilemma.quality.fit_procedure import fit_point
from trilemma.quality.objective import PointFit

#: published fits of L = E + A/N^α + B/D^β: (α, β, source)
PUBLISHED: tuple[tuple[float, float, str], ...] = (
    (0.34, 0.28, "Hoffmann et al. 2022, arXiv 2203.15556, §3.3 Approach 3"),
    (0.3478, 0.3658, "Besiroglu et al. 2024, arXiv 2404.10102, Table 1"),
    (0.353, 0.353, "Muennighoff et al. 2023, arXiv 2305.16264, §3.1 (alpha = beta fitted)"),
)
#: the prior's width: the sample standard deviation of the six published exponents (≈ 0.031)
WIDTH = statistics.stdev([v for al, be, _ in PUBLISHED for v in (al, be)])


@dataclass(frozen=True)
class Prior:
    """A Gaussian prior N(centre, width²) on α and β, its penalty scaled by ``weight`` (σ²/2 in the
    objective's units: the free fit's objective per degree of freedom)."""

    weight: float
    centre: float = LITERATURE_EXPONENT
    width: float = WIDTH

    def wrap(self, obj: Any) -> _WithPrior:
        """The objective ``obj`` (``trilemma.quality.objective._Objective``) plus this prior's penalty."""
        return _WithPrior(obj, self)


class _WithPrior:
    """``obj``'s Huber objective + weight·Σ((exponent − centre)/width)² over α, β (α alone at one D);
    the exponents are coordinates of the internal θ (indices 3, 4; 2 without the data term)."""

    def __init__(self, obj: Any, prior: Prior) -> None:
        self.obj, self.prior = obj, prior
        self.delta, self.l, self.d_term = obj.delta, obj.l, obj.d_term
        self.idx = [3, 4] if obj.d_term else [2]

    def to_internal(self, th: np.ndarray) -> np.ndarray:
        return self.obj.to_internal(th)

    def to_hoffmann(self, t: np.ndarray) -> np.ndarray:
        return self.obj.to_hoffmann(t)

    def residuals(self, t: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        return self.obj.residuals(t)

    def huber(self, r: np.ndarray) -> np.ndarray:
        return self.obj.huber(r)

    def __call__(self, t: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = self.obj(t)
        p = self.prior
        z = (np.asarray(t, dtype=float)[self.idx] - p.centre) / p.width
        g = np.array(g, dtype=float)
        g[self.idx] += 2.0 * p.weight * z / p.width
        return f + p.weight * float(z @ z), g


def noise_weight(objective: float, runs: int, free: int) -> float | None:
    """σ²/2 in the objective's units, 2·F/(n − k) / 2: the free fit's objective F per degree of freedom;
    None when the runs leave none (n ≤ k)."""
    return objective / (runs - free) if runs > free else None


def prior_fit(
    n: np.ndarray, d: np.ndarray, loss: np.ndarray, free: PointFit, *, starts: int
) -> PointFit:
    """The posterior mode of the runs' law under the prior, σ² from ``free`` (their free fit); the
    literature exponent fixed when the runs leave no degree of freedom to estimate σ² from."""
    weight = noise_weight(free.objective, len(n), 5 if free.d_term else 3)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if weight is None:
            return fit_point(n, d, loss, fix=LITERATURE_EXPONENT, starts=starts)
        return fit_point(n, d, loss, starts=starts, prior=Prior(weight))
