"""The least-squares fit of a saturating efficiency curve to measured rates: the planner's form for GEMMs
(``trilemma.estimate.roofline.gemm_efficiency``, cubed over a square matmul's dimension) and for a CPU's
attention kernel by head dimension (``trilemma.probe.attention_rate``)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["saturating_fit"]


def saturating_fit(
    dims: Any, eff: Any, power: int, half0: float, max_floor: float
) -> tuple[float, float]:
    """(max, half) of the least-squares fit, in log rate, of eff = max · (d / (d + half))^power over the
    measured dimensions ``dims`` (the planner's saturating efficiency forms); ``half0`` starts the
    search, ``max_floor`` bounds max from below (max ≤ 2, half in [0, 1e5])."""
    from scipy.optimize import least_squares

    d = np.asarray(dims, dtype=float)
    e = np.asarray(eff, dtype=float)

    def resid(x: np.ndarray) -> np.ndarray:
        g, h = x
        return np.log(g) + power * np.log(d / (d + h)) - np.log(e)

    fit = least_squares(resid, x0=[1.0, half0], bounds=([max_floor, 0.0], [2.0, 1e5]))
    return float(fit.x[0]), float(fit.x[1])
