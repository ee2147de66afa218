"""The parameters and data a law sees: Muennighoff et al. 2023's effective data D' and parameters N'
under repeated data (arXiv 2305.16264), the low-precision factor on N (Kumar et al. 2024), and the
law's form evaluated at them. The formulas: trilemma.quality.predict's docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trilemma.quality.forms import chinchilla_loss, kaplan_loss
from trilemma.quality.laws import Form, Law, repetition_constants
from trilemma.specs.enums import NCounts

ArrayLike = Any


def effective_data(tokens: ArrayLike, unique_tokens: ArrayLike, r_d_star: float) -> np.ndarray:
    """Muennighoff 2023 D': U_D + U_D·R_D*·(1 − e^(−R_D/R_D*)), U_D = min(U, D). D' ≤ D; D' → D as U → ∞."""
    d = np.asarray(tokens, dtype=float)
    u = np.minimum(np.asarray(unique_tokens, dtype=float), d)
    r_d = np.maximum(d / u - 1.0, 0.0)
    return u + u * r_d_star * -np.expm1(-r_d / r_d_star)


def _g(c: Mapping[str, Any]) -> Any:
    # Hoffmann 2022 Eq. 4: G = (αA/(βB))^(1/(α+β))
    return (c["alpha"] * c["A"] / (c["beta"] * c["B"])) ** (1.0 / (c["alpha"] + c["beta"]))


def effective_params(
    params: ArrayLike, unique_seen: ArrayLike, r_n_star: float, c: Mapping[str, Any]
) -> np.ndarray:
    """Muennighoff 2023 N': parameters beyond the compute-optimal size for U unique tokens decay in value."""
    n = np.asarray(params, dtype=float)
    g = _g(c)
    n_for_u = (np.asarray(unique_seen, dtype=float) * g) ** (
        c["beta"] / c["alpha"]
    ) * g  # D_to_N(U)
    u_n = np.minimum(n, n_for_u)
    r_n = np.maximum(n / u_n - 1.0, 0.0)
    return u_n + u_n * r_n_star * -np.expm1(-r_n / r_n_star)


def params_for(law: Law, params_total: ArrayLike, params_non_embedding: ArrayLike) -> np.ndarray:
    """The parameters the law counts: non-embedding or total."""
    return np.asarray(
        params_non_embedding if law.n_counts is NCounts.NON_EMBEDDING else params_total, dtype=float
    )


def effective_sizes(
    law: Law,
    c: Mapping[str, Any],
    n: np.ndarray,
    d: np.ndarray,
    unique_tokens: ArrayLike | None,
    kfac: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """(N used by the law, D used by the law) after repetition and precision."""
    repeat = law.form is Form.MUENNIGHOFF or unique_tokens is not None
    if not repeat:
        return n * kfac, d
    rep = repetition_constants(law)
    u = d if unique_tokens is None else np.minimum(np.asarray(unique_tokens, dtype=float), d)
    d_eff = effective_data(d, u, rep["R_D_star"])
    if law.form is Form.KAPLAN or not law.constants["B"] > 0 or not law.constants["beta"] > 0:
        # N' needs the chinchilla-form G = (αA/(βB))^(1/(α+β)): Kaplan's form has none, nor a fit without a D term
        return n * kfac, d_eff
    return effective_params(n, u, rep["R_N_star"], c) * kfac, d_eff


def form_loss(law: Law, c: Mapping[str, Any], n_eff: np.ndarray, d_eff: np.ndarray) -> np.ndarray:
    """The law's form at effective N and D (nats/token, or the law's unit)."""
    if law.form is Form.KAPLAN:
        return kaplan_loss(c, n_eff, d_eff)
    return chinchilla_loss(c, n_eff, d_eff)  # Muennighoff 2023: the same law on N', D'


def loss_at(
    law: Law,
    c: Mapping[str, Any],
    n: np.ndarray,
    d: np.ndarray,
    unique_tokens: ArrayLike | None,
    kfac: Any,
) -> np.ndarray:
    """The law's loss at N and D after repetition and precision (``kfac``: the precision factor)."""
    n_eff, d_eff = effective_sizes(law, c, n, d, unique_tokens, kfac)
    return form_loss(law, c, n_eff, d_eff)
