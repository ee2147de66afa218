"""The objective of a scaling-law fit and its optimiser (Hoffmann et al. 2022, arXiv 2203.15556, §3.3
Eq. 3 and App. D.2 Eq. 11; Besiroglu et al. 2024's corrections): the Huber loss of log-sum-exp
predictions summed over runs, minimised by L-BFGS (written out, numpy only) from Hoffmann's grid."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

DELTA = 1e-3  # Hoffmann 2022 App. D.2: Huber δ = 1e-3
#: Hoffmann 2022 App. D.2 initialisation grid
GRID_ALPHA = GRID_BETA = (0.0, 0.5, 1.0, 1.5, 2.0)
GRID_E = (-1.0, -0.5, 0.0, 0.5, 1.0)
GRID_A = GRID_B = (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)
PARAMS = ("E", "A", "B", "alpha", "beta")


class _Objective:
    """Σ Huber_δ(LSE(a' − α·x, b' − β·y, e) − ln L) and its gradient; x, y centred ln N, ln D.

    With ``d_term=False`` (every run has the same D) θ = (a', e, α): the data term is not identifiable
    and is absorbed into E.
    """

    def __init__(
        self, n: np.ndarray, d: np.ndarray, loss: np.ndarray, delta: float, d_term: bool
    ) -> None:
        self.x0, self.y0 = float(np.log(n).mean()), float(np.log(d).mean())
        self.x, self.y, self.l = np.log(n) - self.x0, np.log(d) - self.y0, np.log(loss)
        self.delta, self.d_term = delta, d_term

    # θ in Hoffmann's coordinates (a, b, e, α, β) <-> internal centred coordinates
    def to_internal(self, th: np.ndarray) -> np.ndarray:
        th = np.asarray(th, dtype=float)
        a, b, e, al, be = th[..., 0], th[..., 1], th[..., 2], th[..., 3], th[..., 4]
        if self.d_term:
            return np.stack([a - al * self.x0, b - be * self.y0, e, al, be], axis=-1)
        return np.stack([a - al * self.x0, e, al], axis=-1)

    def to_hoffmann(self, t: np.ndarray) -> np.ndarray:
        if self.d_term:
            ac, bc, e, al, be = t
            return np.array([ac + al * self.x0, bc + be * self.y0, e, al, be])
        ac, e, al = t
        return np.array([ac + al * self.x0, -np.inf, e, al, 0.0])

    def residuals(self, t: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """r (n,), softmax weights of the terms, and their sum-normaliser; t may be (k,) or (m, k)."""
        t = np.asarray(t, dtype=float)
        col = (lambda j: t[..., j, None]) if t.ndim > 1 else (lambda j: t[j])
        if self.d_term:
            terms = [col(0) - col(3) * self.x, col(1) - col(4) * self.y, col(2) + 0 * self.x]
        else:
            terms = [col(0) - col(2) * self.x, col(1) + 0 * self.x]
        m = np.maximum.reduce(terms)
        w = [np.exp(tt - m) for tt in terms]
        s = np.add.reduce(w)
        r = m + np.log(s) - self.l
        return r, w, s

    def huber(self, r: np.ndarray) -> np.ndarray:
        ar = np.abs(r)
        return np.where(ar <= self.delta, 0.5 * r * r, self.delta * (ar - 0.5 * self.delta)).sum(
            axis=-1
        )

    def __call__(self, t: np.ndarray) -> tuple[float, np.ndarray]:
        if self.d_term:
            return self._value_grad(np.asarray(t, dtype=float))
        r, w, s = self.residuals(t)
        g = np.clip(r, -self.delta, self.delta) / s
        if self.d_term:
            g1, g2 = g * w[0], g * w[1]
            grad = np.array([g1.sum(), g2.sum(), (g * w[2]).sum(), -(g1 @ self.x), -(g2 @ self.y)])
        else:
            g1 = g * w[0]
            grad = np.array([g1.sum(), (g * w[1]).sum(), -(g1 @ self.x)])
        return float(self.huber(r)), grad

    def _value_grad(self, t: np.ndarray) -> tuple[float, np.ndarray]:
        """``__call__`` with the data term, in place: the same sums as ``residuals`` + ``huber`` with a
        third of the temporaries (one evaluation on a million runs went from ~180 ms to ~60 ms)."""
        ac, bc, e, al, be = (float(v) for v in t)
        w0 = self.x * -al
        w0 += ac
        w1 = self.y * -be
        w1 += bc
        m = np.maximum(w0, w1)
        np.maximum(m, e, out=m)
        w0 -= m
        np.exp(w0, out=w0)
        w1 -= m
        np.exp(w1, out=w1)
        w2 = np.subtract(e, m)
        np.exp(w2, out=w2)
        s = w0 + w1
        s += w2
        r = np.log(s)
        r += m
        r -= self.l
        ar = np.abs(r)
        q = np.minimum(
            ar, self.delta
        )  # Huber: q·(|r| − q/2) is r²/2 inside δ and δ(|r| − δ/2) outside
        ar -= 0.5 * q
        f = float(q @ ar)
        np.clip(r, -self.delta, self.delta, out=r)
        r /= s
        w0 *= r
        w1 *= r
        grad = np.array(
            [w0.sum(), w1.sum(), float(r @ w2), -float(w0 @ self.x), -float(w1 @ self.y)]
        )
        return f, grad


class _Constrained:
    """The objective with exponents tied (β = α) or fixed (α = β = ``value``): φ = (a', b', e[, γ]).

    θ (internal) = T·φ + c, so the gradient in φ is Tᵀ·∇θ; ``to_internal``/``to_hoffmann`` map Hoffmann's
    (a, b, e, α, β) to φ and back as ``_Objective``'s do, so ``fit_point`` drives either the same way.
    Without the data term (runs at one D) only α is fixed (``value``), φ = (a', e).
    """

    def __init__(self, obj: _Objective, value: float | None) -> None:
        self.obj, self.value, self.delta = obj, value, obj.delta
        self.l = obj.l
        if not obj.d_term:  # θ = (a', e, α): α fixed
            self.T = np.array([[1, 0], [0, 1], [0, 0]], dtype=float)
            self.c = np.array([0.0, 0.0, float(value or 0.0)])
        elif value is None:  # tie: γ drives both exponents
            self.T = np.array(
                [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1]], dtype=float
            )
            self.c = np.zeros(5)
        else:
            self.T = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]], dtype=float)
            self.c = np.array([0.0, 0.0, 0.0, value, value])

    def to_internal(self, th: np.ndarray) -> np.ndarray:
        th = np.array(th, dtype=float)
        if self.value is None:
            th[..., 4] = th[..., 3]
        else:
            th[..., 3] = th[..., 4] = self.value
        if not self.obj.d_term:
            return self.obj.to_internal(th)[..., :2]
        return self.obj.to_internal(th)[..., : self.T.shape[1]]

    def _theta(self, phi: np.ndarray) -> np.ndarray:
        return np.asarray(phi, dtype=float) @ self.T.T + self.c

    def to_hoffmann(self, phi: np.ndarray) -> np.ndarray:
        return self.obj.to_hoffmann(self._theta(phi))

    def residuals(self, phi: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        return self.obj.residuals(self._theta(phi))

    def huber(self, r: np.ndarray) -> np.ndarray:
        return self.obj.huber(r)

    def __call__(self, phi: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = self.obj(self._theta(phi))
        return f, self.T.T @ g


def hoffmann_grid() -> np.ndarray:
    """The 4500 starting points (a, b, e, α, β) of Hoffmann 2022 App. D.2."""
    return np.array(
        [
            (a, b, e, al, be)
            for a, b, e, al, be in itertools.product(GRID_A, GRID_B, GRID_E, GRID_ALPHA, GRID_BETA)
        ],
        dtype=float,
    )


@dataclass(frozen=True)
class PointFit:
    """The best local minimum of the Huber objective, and whether the optimiser really converged."""

    constants: dict[str, float]  # E, A, B, alpha, beta (B = beta = 0 when the runs share one D)
    theta: np.ndarray  # Hoffmann's (a, b, e, α, β), b = -inf without a data term
    objective: float
    grad_max: float
    converged: bool
    iterations: int
    starts: int
    starts_at_best: int  # how many starts reached the best objective (a robustness indicator)
    d_term: bool
    message: str


@dataclass
class _Result:
    x: np.ndarray
    fun: float
    jac: np.ndarray
    nit: int
    nfev: int
    message: str


def lbfgs(
    fun: Any,
    x0: np.ndarray,
    *,
    memory: int = 10,
    maxiter: int = 1000,
    gtol: float = 1e-12,
    ftol: float = 1e-15,
) -> _Result:
    """Minimise ``fun(x) -> (f, grad)`` by L-BFGS (Nocedal & Wright 2006, Alg. 7.4-7.5) with Armijo backtracking.

    Written here rather than scipy's L-BFGS-B, whose BLAS threads spin under CPU contention and made a
    5-parameter fit 100x slower on a busy machine; the problem is small, so plain numpy is as fast.
    Stops when the largest gradient component is ≤ gtol or one step lowers f by ≤ ftol·max(|f|, 1)
    (scipy's factr rule); ``fit_point`` then checks the gradient itself.
    """
    x = np.array(x0, dtype=float)
    f, g = fun(x)
    s_hist: list[np.ndarray] = []
    y_hist: list[np.ndarray] = []
    nfev, it, msg = 1, 0, "maximum iterations reached"
    while it < maxiter:
        it += 1
        if not np.abs(g).max() > gtol:
            msg = "gradient below tolerance"
            break
        # two-loop recursion: p = -H·g
        q = g.copy()
        coeffs = []
        for s, y in zip(reversed(s_hist), reversed(y_hist)):
            rho = 1.0 / (y @ s)
            a = rho * (s @ q)
            q -= a * y
            coeffs.append((rho, a))
        if s_hist:
            q *= (s_hist[-1] @ y_hist[-1]) / (y_hist[-1] @ y_hist[-1])
        for (s, y), (rho, a) in zip(zip(s_hist, y_hist), reversed(coeffs)):
            q += s * (a - rho * (y @ q))
        p = -q
        gp = float(g @ p)
        if not gp < 0:  # not a descent direction: restart from steepest descent
            s_hist.clear()
            y_hist.clear()
            p, gp = -g, float(-(g @ g))
        t = 1.0
        while True:
            x_new = x + t * p
            f_new, g_new = fun(x_new)
            nfev += 1
            if np.isfinite(f_new) and f_new <= f + 1e-4 * t * gp:
                break
            t *= 0.5
            if t < 1e-20:
                return _Result(x, f, g, it, nfev, "line search failed")
        s, y = x_new - x, g_new - g
        sy, yy = float(s @ y), float(y @ y)
        if sy > 1e-12 * np.sqrt(float(s @ s) * yy) and yy > 0:  # curvature condition: keep the pair
            s_hist.append(s)
            y_hist.append(y)
            if len(s_hist) > memory:
                s_hist.pop(0)
                y_hist.pop(0)
        drop = f - f_new
        x, f, g = x_new, float(f_new), g_new
        if drop <= ftol * max(abs(f), abs(f + drop), 1.0):
            msg = "relative reduction of f below tolerance"
            break
    return _Result(x, float(f), g, it, nfev, msg)


def _minimise(obj: Any, t0: np.ndarray, gtol: float = 1e-12) -> _Result:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return lbfgs(obj, t0, gtol=gtol)


def _grad_tol(obj: Any) -> float:
    # the gradient is a sum over runs of clip(r, ±δ)·(weights·ln N ...): its scale is δ·n
    return 1e-6 * obj.delta * max(len(obj.l), 1)


def _constants(th: np.ndarray) -> dict[str, float]:
    a, b, e, al, be = (float(v) for v in th)
    return {
        "E": math.exp(e),
        "A": math.exp(a),
        "B": 0.0 if b == -np.inf else math.exp(b),
        "alpha": al,
        "beta": be,
    }
