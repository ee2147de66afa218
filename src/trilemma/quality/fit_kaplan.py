"""A non-separable member for the extrapolation pool (measured, not used): Kaplan et al. 2020's form.

Every member of ``trilemma.quality.extrapolate``'s pool is Hoffmann's additive law, in which the loss's
fall with D is the same at every N. Kaplan et al. 2020 (arXiv 2001.08361, Eq. 1.5) couple them,
L = [(N_c/N)^(α/β) + D_c/D]^β; with an irreducible term E as every other member has (``forms.kaplan_loss``
with ``E``) its limits are E + (N_c/N)^α and E + (D_c/D)^β. In log coordinates, with u = a − α·ln N and
v = b − β·ln D (Hoffmann's a, b: N_c = e^(a/α), D_c = e^(b/β)),

    ln L = LSE(e, β·LSE(u/β, v/β)),

fitted by Hoffmann's procedure (Huber δ 10⁻³ on log loss, L-BFGS from the best points of his grid, β = 0
left out: the form divides by it; one more start from the additive free fit; docs/derivations.md).
``with_kaplan`` adds the member to an average, scored by the pool's own backtest and weighted 1/e²
beside the others: the ``kaplan`` candidate of `trilemma validate --kind quality`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.quality.extrapolate import ERROR_FLOOR, Averaged, split
from trilemma.quality.fit_procedure import fit_point
from trilemma.quality.forms import kaplan_loss
from trilemma.quality.objective import DELTA, _minimise, hoffmann_grid
from trilemma.quality.runs import MIN_SIZES, n_sizes

#: the form's free constants (E, N_c, D_c, α, β): a backtest needs more runs than this
FREE = 5
#: L-BFGS starts from the best this many points of Hoffmann's grid, and one from the additive free fit's
#: constants (the same limits in N and in D): on the shipped suites the minima 256 grid starts reach (8
#: grid starts alone stopped at worse ones on the OLMo ladder and the Gemstones)
STARTS_KAPLAN = 8


class _Kaplan:
    """Σ Huber_δ(ln L̂ − ln L) and its gradient in θ = (a', b', e, α, ρ), β = e^ρ, x and y centred."""

    def __init__(self, n: np.ndarray, d: np.ndarray, loss: np.ndarray, delta: float) -> None:
        self.x0, self.y0 = float(np.log(n).mean()), float(np.log(d).mean())
        self.x, self.y, self.l = np.log(n) - self.x0, np.log(d) - self.y0, np.log(loss)
        self.delta = delta

    def to_internal(self, th: np.ndarray) -> np.ndarray:
        """Hoffmann's (a, b, e, α, β) (rows) to θ."""
        a, b, e, al, be = np.moveaxis(np.asarray(th, float), -1, 0)
        return np.stack([a - al * self.x0, b - be * self.y0, e, al, np.log(be)], axis=-1)

    def constants(self, t: np.ndarray) -> dict[str, float]:
        """θ to ``forms.kaplan_loss``'s constants (E, N_c, D_c, alpha_N, alpha_D)."""
        ac, bc, e, al, rho = (float(v) for v in t)
        be = math.exp(rho)
        a, b = ac + al * self.x0, bc + be * self.y0
        return {
            "E": math.exp(e),
            "N_c": math.exp(a / al) if al else math.inf,
            "D_c": math.exp(b / be),
            "alpha_N": al,
            "alpha_D": be,
        }

    def __call__(self, t: np.ndarray) -> tuple[float, np.ndarray]:
        ac, bc, e, al, rho = (float(v) for v in t)
        if not abs(rho) < 30.0:  # β beyond e^±30: no loss law; the line search steps back
            return math.inf, np.zeros(5)
        be = math.exp(rho)
        u, v = ac - al * self.x, bc - be * self.y
        inner = np.logaddexp(u / be, v / be)
        w1 = np.exp(u / be - inner)  # softmax weights of the N and D terms inside the bracket
        w2 = 1.0 - w1
        k = be * inner
        out = np.logaddexp(e, k)
        qe = np.exp(e - out)
        r = out - self.l
        ar = np.abs(r)
        q = np.minimum(ar, self.delta)
        f = float(q @ (ar - 0.5 * q))
        g = np.clip(r, -self.delta, self.delta)
        gk = g * (1.0 - qe)
        # ∂k/∂β = LSE(u/β, v/β) − (w1·u + w2·b')/β with v = b' − β·y (b' the centred b)
        dk_dbe = inner - (w1 * u + w2 * bc) / be
        grad = np.array(
            [
                float(gk @ w1),
                float(gk @ w2),
                float(g @ qe),
                -float(gk @ (w1 * self.x)),
                float(gk @ dk_dbe) * be,
            ]
        )
        if not np.isfinite(f) or not np.isfinite(grad).all():
            return math.inf, np.zeros(5)
        return f, grad


def fit_kaplan(
    n: Any, d: Any, loss: Any, *, starts: int = STARTS_KAPLAN, delta: float = DELTA
) -> dict[str, float]:
    """The form's constants fitted to runs of N parameters, D tokens and their losses (any unit): the
    best of L-BFGS from the ``starts`` best points of Hoffmann's grid (β > 0) and from the additive
    free fit's (a, b, e, α, β), whose terms are this form's limits."""
    n, d, loss = (np.asarray(v, float) for v in (n, d, loss))
    obj = _Kaplan(n, d, loss, delta)
    grid = hoffmann_grid()
    grid = obj.to_internal(grid[grid[:, 4] > 0])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        scores = np.array([obj(t)[0] for t in grid])
        seeds = [grid[i] for i in np.argsort(scores, kind="stable")[:starts]]
        additive = fit_point(n, d, loss, starts=starts, delta=delta).theta
        if np.isfinite(additive).all() and additive[4] > 0:
            seeds.append(obj.to_internal(additive))
        best = min((_minimise(obj, t) for t in seeds), key=lambda res: res.fun)
    return obj.constants(best.x)


def backtest_error(n: Any, d: Any, loss: Any) -> float | None:
    """The form's median |relative error| on the runs above 1/SCALE of the largest compute when fitted
    on those below (floored at ERROR_FLOOR), as the pool scores its members; None where the pool scores
    none (too few sizes or runs below, none above) or the runs share one D (no D term to couple)."""
    n, d, loss = (np.asarray(v, float) for v in (n, d, loss))
    small, _ = split(n, d)
    rest = ~small
    if (
        np.ptp(np.log(d)) <= 1e-9
        or not rest.any()
        or n_sizes(n[small]) < MIN_SIZES
        or small.sum() <= FREE
    ):
        return None
    c = fit_kaplan(n[small], d[small], loss[small])
    rel = np.abs(kaplan_loss(c, n[rest], d[rest]) / loss[rest] - 1.0)
    return max(float(np.median(rel)), ERROR_FLOOR) if np.isfinite(rel).all() else None


@dataclass(frozen=True)
class WithKaplan:
    """An average of the pool's members with the Kaplan-form member beside them (weights 1/e²)."""

    averaged: Averaged
    #: the form fitted on every run; None where it is not a member
    constants: dict[str, float] | None
    weight: float  # the form's share of the weights (0 where it is not a member)

    def predict(self, n: Any, d: Any) -> np.ndarray:
        """The weighted mean of the members' losses (the law's unit) at N total parameters, D tokens."""
        base = self.averaged.predict(n, d)
        if self.constants is None:
            return base
        return (1.0 - self.weight) * base + self.weight * kaplan_loss(self.constants, n, d)


def with_kaplan(averaged: Averaged, n: Any, d: Any, loss: Any) -> WithKaplan:
    """``averaged`` (forms on total N, from ``Pool.average``) with the Kaplan-form member added where the
    backtest scores it: its weight 1/e² against the members' Σ 1/e²."""
    e = backtest_error(n, d, loss)
    if e is None or not averaged.held_out_error:
        return WithKaplan(averaged, None, 0.0)
    raw = sum(1.0 / averaged.held_out_error[name] ** 2 for name in averaged.names)
    own = 1.0 / e**2
    return WithKaplan(averaged, fit_kaplan(n, d, loss), own / (raw + own))
