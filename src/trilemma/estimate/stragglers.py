"""Stragglers: the share of a synchronous job's time left after each step waits for its slowest GPU.

A synchronous step (data-, tensor- and pipeline-parallel alike) ends when the last of the job's n GPUs
does. GPUs of one SKU do not run at one pace: manufacturing variability and power management spread
their speed (Sinha et al., "Not All GPUs Are Created Equal", SC22, arXiv 2208.11035; the figures and
their definition are in ``presets/reliability.toml`` [stragglers]). With each GPU's time per step
T·(1 + σZ), Z a standard normal, the step takes T·(1 + σ·E[max of n Z]) and the share is

    s(n) = 1 / (1 + σ·(E[M_n] − E[M_1])),    E[M_n] = b − ∫_{−∞}^{b} F(x)^n dx,

the expected largest of n i.i.d. draws of Z truncated at b (F its distribution function,
F(x) = Φ(x)/Φ(b)), an exact order statistic evaluated by quadrature (not the √(2 ln n) asymptote);
E[M_1] is the mean of one draw, so one GPU keeps all its time. Derivation: docs/derivations.md,
"Goodput: the slowest GPU".

What is modelled: a spread of GPU paces measured on whole clusters, σ = the published variation over
4·IQR of a standard normal (the variation is the box plot's whisker span, 4 IQR, over the median).
Whether a GPU keeps its draw (a persistently slower chip) or draws anew each step (jitter independent
across steps and GPUs), the expected step is the same E[M_n]. GPUs beyond the whiskers (Tukey's fence
b = Q3 + 1.5·IQR = 2.70 σ; the paper's outliers, up to 1.5× the median) are the fail-slow parts that
operators find and drain (fail-slow detection: Wu et al., Falcon, arXiv 2410.12588; lemon nodes:
Kokolis et al., arXiv 2410.21680), so the draws stop at the fence and a drained part is not charged.
Not modelled: evaluation, idle time and data stalls, which have no published figure that scales with
a run; what whole runs lose to them shows in the runs' band (trilemma.validate). The step-time
calibration's benchmarks ran on many GPUs too, so they already hold part of this share (at most the
share at their own size); it is charged to whole runs only, as ``goodput`` is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.special import log_ndtr, ndtri

from trilemma.estimate.goodput import ArrayLike, _scalar_or_array, reliability_data

#: the interquartile range of a standard normal, 2·Φ⁻¹(3/4) = 1.349
NORMAL_IQR = float(2.0 * ndtri(0.75))
#: quadrature: below this a standard normal's distribution function is < 1e-33 (nothing to integrate)
_LOW_Z = -12.0
#: an untruncated spread is integrated up to here: n·(1 − Φ(12)) stays below 1e-20 for n < 1e13
_HIGH_Z = 12.0
#: Simpson's rule in u on [0, 1], x = top − (top + 12)·(e^{αu} − 1)/(e^α − 1): the nodes crowd towards the
#: top, where F^n climbs to 1 within ~1/(n·φ(b)) of a fence. Against adaptive quadrature: within 1e-12 of
#: E[M_n] for n up to 1e6, 2e-7 at n = 1e9 (tests/test_goodput.py).
_NODES, _ALPHA = 8001, 10.0
_BLOCK = 256  # distinct n per block: bounds the (n, grid) array at 16 MB


@dataclass(frozen=True)
class GpuSpread:
    """The spread of GPU paces the share is charged for (``reliability.toml`` [stragglers])."""

    sigma: float  # relative standard deviation of a GPU's time per step
    fence_z: float  # drained beyond this many σ above the median (inf: nothing drained)


@cache
def gpu_spread() -> GpuSpread:
    """σ and the fence, derived from the measurement ``reliability.toml`` names (cached):
    σ = variation / (4·IQR of a standard normal), fence = Φ⁻¹(3/4) + 1.5·IQR (Tukey's upper fence)."""
    data = reliability_data()
    m = data["stragglers"][data["defaults"]["gpu_speed_spread"]]
    if m["variation_whisker_iqrs"] != 4.0:
        raise ValueError("reliability.toml: the variation is read as a whisker span of 4 IQR")
    sigma = m["performance_variation"] / (m["variation_whisker_iqrs"] * NORMAL_IQR)
    fence = float(ndtri(0.75)) + 1.5 * NORMAL_IQR if m["outliers_drained"] else np.inf
    return GpuSpread(sigma=float(sigma), fence_z=float(fence))


def expected_max_normal(n: ArrayLike, fence_z: float = np.inf) -> ArrayLike:
    """E[max of n i.i.d. standard normals truncated above at ``fence_z``] (inf: not truncated), for n ≥ 1
    (real n interpolates): b − ∫ F(x)^n dx over (−12, b], F = Φ/Φ(b), by Simpson's rule on a fixed grid
    that crowds towards b, vectorised over the distinct n. Exact values: n = 2 → 1/√π, n = 3 → 3/(2√π) (untruncated)."""
    n_arr = np.maximum(np.asarray(n, dtype=float), 1.0)
    distinct, where = np.unique(n_arr, return_inverse=True)
    top = min(fence_z, _HIGH_Z)
    u = np.linspace(0.0, 1.0, _NODES)
    stretch = (top - _LOW_Z) / np.expm1(_ALPHA)
    x = top - stretch * np.expm1(_ALPHA * u)
    log_f = log_ndtr(x) - log_ndtr(fence_z)  # log F(x) ≤ 0
    weights = stretch * _ALPHA * np.exp(_ALPHA * u) / (3.0 * (_NODES - 1))  # dx/du × Simpson's h/3
    weights[1:-1:2] *= 4.0
    weights[2:-1:2] *= 2.0
    e_max = np.empty(distinct.shape)
    for i in range(0, distinct.size, _BLOCK):  # F(x)^n for a block of distinct n at a time
        e_max[i : i + _BLOCK] = top - np.exp(distinct[i : i + _BLOCK, None] * log_f) @ weights
    return _scalar_or_array(e_max[where].reshape(n_arr.shape))


def straggler_share(
    n_gpus: ArrayLike, sigma: float | None = None, fence_z: float | None = None
) -> ArrayLike:
    """Share of a synchronous job's time left after every step waits for the slowest of its n GPUs,
    1 / (1 + σ·(E[M_n] − E[M_1])) (this module's docstring; Sinha et al. 2022 for σ and the fence, None =
    ``gpu_spread()``'s). 1 on one GPU, falling with n towards 1 / (1 + σ·(b − E[M_1])). Units: GPUs; σ a
    fraction; the fence in σ. Returns a fraction in (0, 1]."""
    d = gpu_spread()
    s = d.sigma if sigma is None else sigma
    b = d.fence_z if fence_z is None else fence_z
    lag = np.asarray(expected_max_normal(n_gpus, b)) - float(expected_max_normal(1.0, b))
    return _scalar_or_array(1.0 / (1.0 + s * np.maximum(lag, 0.0)))
