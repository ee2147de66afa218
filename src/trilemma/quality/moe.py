"""The loss of a mixture of experts: Krajewski et al. 2024's fine-grained MoE law (arXiv 2402.07871, Eq. 9,
§5.4 Table 1) carried onto the dense law trilemma predicts with. The derivation: docs/moe-loss.md.

1. The model in the law's variables: N_act, the active non-embedding parameters; R, the routed experts'
   parameters a token goes through; G = top-k (a token goes to G experts, Krajewski §4, with the active
   routed width as the base feed-forward); E = routed experts / top-k (§4's expansion rate).
2. On the law's own data and tokenizer: the MoE at the fitted E = 64 with the same active size,
   N_64 = N_act + 63·R (Eq. 9), against the dense law at N_act (Table 1 Dense), both on D tokens — equal
   compute (6·N_act·D). Another E follows Clark et al. 2022's form, log L linear in log E at a fixed
   active size (as Krajewski Eq. 2 quotes it), between E = 1 (the dense law) and E = 64.
3. r = (L_K(E) − c)/(L_K,dense − c), the share of a dense model's reducible loss the MoE keeps; the
   host law's loss at the active size L_h becomes E_h + r·(L_h − E_h) (E_h = 0 for Kaplan's form).
4. The band: the host law's band at the active size, carried the same way, and the MoE law's own error
   added in quadrature — its held-out RMSE (§5.4, 0.019 nats) and, per e-fold of N_64, D, G or E beyond
   the runs it was fitted on, the host law's measured growth of its log-loss error (σ₁; the default law's
   where the host has none), both carried through r.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from statistics import NormalDist
from typing import Any

import numpy as np

from trilemma.quality.forms import chinchilla_loss, fine_grained_moe_loss
from trilemma.quality.law import DEFAULT_LEVEL
from trilemma.quality.laws import _ROOT, DEFAULT_LAW, Form, Law, get_law, tomllib
from trilemma.units import fmt_count

ArrayLike = Any


@cache
def moe_constants() -> dict[str, Any]:
    """presets/moe_law.toml: Krajewski 2024's MoE and dense rows, its fitted runs, Clark 2022's E form."""
    return tomllib.loads(_ROOT.joinpath("moe_law.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class MoeShape:
    """A mixture of experts in the MoE law's variables (parameter counts in elements)."""

    active_total: float  # parameters a token uses, embeddings included
    active_non_embedding: float  # N_act
    routed_active: float  # R: the routed experts' parameters a token goes through, all MoE layers
    granularity: float  # G = top-k
    expansion: float  # E = routed experts / top-k

    @property
    def n_at_fitted_expansion(self) -> float:
        """N_64: the total non-embedding parameters of the same active model at the fitted E = 64."""
        e = float(moe_constants()["fit"]["expansion"])
        return self.active_non_embedding + (e - 1.0) * self.routed_active


def moe_shape(model: Any) -> MoeShape | None:
    """The MoE law's variables of a ModelSpec; None for a dense model."""
    from trilemma.estimate.params import param_counts

    if not model.is_moe:
        return None
    p = param_counts(model)
    return MoeShape(
        active_total=float(p.active),
        active_non_embedding=float(p.active - p.embedding),
        routed_active=float(model.n_moe_layers * model.top_k * p.per_expert),
        granularity=float(model.top_k),
        expansion=model.n_experts / model.top_k,
    )


def law_losses(shape: MoeShape, tokens: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(L_K(E), L_K,dense) on Krajewski's data at D tokens, nats/token: the MoE at its own E (Clark 2022's
    log-linear form between the dense law at E = 1 and Eq. 9 at E = 64) and the dense law at N_act."""
    k = moe_constants()
    d = np.asarray(tokens, dtype=float)
    dense = chinchilla_loss(k["dense"], shape.active_non_embedding, d)
    at_64 = fine_grained_moe_loss(k["moe"], shape.n_at_fitted_expansion, d, shape.granularity)
    w = np.log(shape.expansion) / np.log(float(k["fit"]["expansion"]))
    return dense * (at_64 / dense) ** w, dense


def reducible_ratio(shape: MoeShape, tokens: ArrayLike) -> np.ndarray:
    """r = (L_K(E) − c)/(L_K,dense − c): the share of the reducible loss of a dense model of the same active
    size, trained on the same tokens, that the MoE keeps (< 1: the MoE is better)."""
    c = float(moe_constants()["moe"]["c"])
    moe, dense = law_losses(shape, tokens)
    return (moe - c) / (dense - c)


def beyond_moe_fit(shape: MoeShape, tokens: float) -> float:
    """e-folds beyond the runs the MoE law was fitted on: the most of ln(N_64/N_max), ln(D/D_max),
    ln(G/G_max), ln(E/64), and 0."""
    f = moe_constants()["fit"]
    return max(
        0.0,
        float(np.log(shape.n_at_fitted_expansion / f["N_max"])),
        float(np.log(tokens / f["D_max"])),
        float(np.log(shape.granularity / f["G_max"])),
        float(np.log(shape.expansion / f["expansion"])),
    )


def _host_floor(law: Law) -> float:
    """E_h: the host law's irreducible loss (0 for Kaplan's form, which has none)."""
    return 0.0 if law.form is Form.KAPLAN else float(law.constants["E"])


def per_e_fold(law: Law) -> float:
    """σ₁: the growth of log-loss error per e-fold beyond the fitted runs, the host law's, else the
    default law's (the one measured on a Chinchilla-form law)."""
    for candidate in (law, get_law(DEFAULT_LAW)):
        r = candidate.uncertainty.residual if candidate.uncertainty is not None else None
        if r:
            return float(r["log_sd_per_e_fold"])
    return 0.0


def carried(law: Law, r: ArrayLike, host_loss: ArrayLike, penalty: float = 0.0) -> np.ndarray:
    """The host law's loss at the active size carried to the MoE: r·L_h + (1 − r)·E_h·(1 + penalty)
    (the penalty of a low training precision multiplies the whole loss)."""
    floor = _host_floor(law) * (1.0 + penalty)
    return np.asarray(r) * np.asarray(host_loss) + (1.0 - np.asarray(r)) * floor


def moe_sd(law: Law, shape: MoeShape, tokens: float, host_loss: float, penalty: float) -> float:
    """One standard deviation of the MoE loss (host law's unit) from the MoE law's own error: its
    held-out RMSE and σ₁ per e-fold beyond its runs, on Krajewski's log-loss, carried through r."""
    k = moe_constants()
    moe, dense = (float(v) for v in law_losses(shape, tokens))
    sd_log = float(
        np.hypot(k["fit"]["validation_rmse"] / moe, per_e_fold(law) * beyond_moe_fit(shape, tokens))
    )
    d_ratio = moe * sd_log / (dense - float(k["moe"]["c"]))
    return abs(host_loss - _host_floor(law) * (1.0 + penalty)) * d_ratio


def moe_band(
    low: float, high: float, mean: float, sd: float, level: float | None
) -> tuple[float, float]:
    """The carried host band (``low``, ``high`` around ``mean``) widened by the MoE law's error ``sd``:
    independent errors add in quadrature, the MoE's at the band's level (80% when the band is a range)."""
    z = NormalDist().inv_cdf((1.0 + (level or DEFAULT_LEVEL)) / 2.0)
    return mean - float(np.hypot(mean - low, z * sd)), mean + float(np.hypot(high - mean, z * sd))


def moe_notes(law: Law, shape: MoeShape, tokens: float, r: float, n_counted: float) -> list[str]:
    """What the MoE law did, and where it extrapolates."""
    f = moe_constants()["fit"]
    notes = [
        f"mixture of experts (E = {shape.expansion:g}, G = {shape.granularity:g}): Krajewski et al. 2024's "
        f"fine-grained MoE law (arXiv 2402.07871 Table 1) keeps {r:.3f} of the reducible loss of a dense "
        f"model of its {fmt_count(shape.active_total)} active parameters on the same tokens; {law.name} is "
        f"evaluated at N = {fmt_count(n_counted)} active and carried by that share (docs/moe-loss.md)"
    ]
    x = beyond_moe_fit(shape, tokens)
    where = []
    if shape.expansion != f["expansion"]:
        where.append(
            f"E = {shape.expansion:g} from the fitted E = {f['expansion']:g} by Clark et al. 2022's form"
        )
    if shape.n_at_fitted_expansion > f["N_max"]:
        where.append(
            f"N at E = {f['expansion']:g} is {shape.n_at_fitted_expansion / f['N_max']:.0f}x its largest run"
        )
    if tokens > f["D_max"]:
        where.append(f"D is {tokens / f['D_max']:.0f}x its most tokens")
    if shape.granularity > f["G_max"]:
        where.append(f"G is above its largest {f['G_max']:g}")
    if where:
        notes.append(
            f"the MoE law extrapolates ({'; '.join(where)}): its band is widened by {x:.1f} e-folds"
        )
    return notes


def moe_prediction(law: Law | str | None, shape: MoeShape, dense: Any, pen: float) -> Any:
    """A LossPrediction of the host law at the MoE's active size (``dense``) carried to the MoE: point,
    band widened by the MoE law's error, notes. ``pen``: the host law's precision penalty (nats/token)."""
    law = get_law(law)
    r = float(reducible_ratio(shape, dense.tokens))
    mean, low, high = (float(carried(law, r, v, pen)) for v in (dense.mean, dense.low, dense.high))
    sd = moe_sd(law, shape, dense.tokens, dense.mean, pen)
    low, high = moe_band(low, high, mean, sd, dense.level)
    notes = (*dense.notes, *moe_notes(law, shape, dense.tokens, r, dense.params_used))
    return replace(dense, mean=mean, low=low, high=high, notes=notes, moe_ratio=r)
