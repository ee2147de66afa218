"""The loss laws' formulas, each once, and their inverse in D: every caller in the package uses these.

- chinchilla form (Hoffmann et al. 2022, arXiv 2203.15556, Eq. 2): L = E + A/N^α + B/D^β; also the
  muennighoff form (Muennighoff et al. 2023, arXiv 2305.16264), which is the same law on N', D'.
- kaplan form (Kaplan et al. 2020, arXiv 2001.08361, Eq. 1.5 / 4.1): L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D,
  plus an irreducible E where the constants give one (trilemma.quality.fit_kaplan).
- fine-grained mixture of experts (Krajewski et al. 2024, arXiv 2402.07871, Eq. 9):
  L = c + (g/G^γ + a)/N^α + b/D^β, G the granularity.
- tokens for a target loss: the smallest D with L(N, D) ≤ target, by bisection in ln D (the loss falls
  monotonically with D in both forms, with or without repetition and precision factors).

Loss in the law's own unit (``law.loss_unit``: nats/token or bits/byte); N in parameters as the law
counts them; D in tokens. Every function broadcasts over numpy arrays, constants included (the law's
uncertainty samples are arrays of constants).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

ArrayLike = Any


def chinchilla_loss(c: Mapping[str, Any], n: ArrayLike, d: ArrayLike) -> np.ndarray:
    """L = E + A/N^α + B/D^β (Hoffmann 2022 Eq. 2), loss in the law's unit; N parameters, D tokens."""
    return (
        c["E"]
        + c["A"] / np.asarray(n, float) ** c["alpha"]
        + c["B"] / np.asarray(d, float) ** c["beta"]
    )


def kaplan_loss(c: Mapping[str, Any], n: ArrayLike, d: ArrayLike) -> np.ndarray:
    """L = E + [(N_c/N)^(α_N/α_D) + D_c/D]^α_D (Kaplan 2020 Eq. 1.5; E = 0 unless the constants give
    it), loss in the law's unit."""
    return (
        c.get("E", 0.0)
        + ((c["N_c"] / n) ** (c["alpha_N"] / c["alpha_D"]) + c["D_c"] / d) ** c["alpha_D"]
    )


def fine_grained_moe_loss(c: Mapping[str, Any], n: ArrayLike, d: ArrayLike, g: float) -> np.ndarray:
    """L = c + (g/G^γ + a)/N^α + b/D^β (Krajewski 2024 Eq. 9): N total non-embedding parameters, D tokens,
    G the granularity; loss in nats/token on the paper's data."""
    n_term = (c["g"] / g ** c["gamma"] + c["a"]) / np.asarray(n, float) ** c["alpha"]
    return c["c"] + n_term + c["b"] / np.asarray(d, float) ** c["beta"]


def tokens_for_loss(
    loss_of_d: Callable[[np.ndarray], np.ndarray],
    target: float,
    shape: tuple[int, ...],
    *,
    d_min: float,
    d_max: float,
    iters: int,
) -> np.ndarray:
    """Smallest D (tokens) in [d_min, d_max] with ``loss_of_d(D) ≤ target``, per element of ``shape``.

    Bisection in ln D, ``iters`` halvings of ln(d_max/d_min) (the answer is the upper end, so its loss
    meets the target); inf where even ``d_max`` tokens fall short. ``loss_of_d`` maps an array of D of
    ``shape`` to the losses (the caller's law, N, repetition and precision held fixed).
    """
    lo = np.full(shape, math.log(d_min))
    hi = np.full(shape, math.log(d_max))
    reach = loss_of_d(np.exp(hi)) <= target
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        ok = loss_of_d(np.exp(mid)) <= target
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(reach, np.exp(hi), np.inf)
