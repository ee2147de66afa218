"""Compute-optimal allocation under a law, and the inference-aware variant of Sardana et al. 2023.

FLOP convention: training C = 6·N·D (Kaplan 2020 §2.1; Hoffmann 2022 §3.3), N counted as the law counts
it (``law.n_counts``); inference 2·N FLOPs per token (a forward pass; Sardana et al. 2023, arXiv 2401.00448).

- chinchilla form: closed form (Hoffmann 2022 Eq. 4): N* = G·(C/6)^a, D* = G^(−1)·(C/6)^b,
  G = (αA/(βB))^(1/(α+β)), a = β/(α+β), b = α/(α+β). Low-precision training scales A by k^(−α)
  (N_eff = k·N, Kumar 2024), which keeps it closed form.
- kaplan form: minimising [(N_c/N)^p + D_c·6N/C]^α_D, p = α_N/α_D, at fixed C gives
  N* = (p·N_c^p·C/(6·D_c))^(1/(p+1)) [D: derivative set to zero].
- muennighoff form, or any law with unique tokens: no closed form (Muennighoff 2023 grid-search too);
  a log-spaced grid in N with D = C/(6N), then golden-section refinement.
- Sardana 2023: for a target loss ℓ and lifetime inference tokens D_inf, minimise 6·N·D_tr + 2·N·D_inf
  over the (N, D_tr) with L(N, D_tr) = ℓ (numeric: D_tr(N) by bisection, then a 1-D minimum over N).

The band on N*, D* comes from the law's uncertainty samples (the same samples as the loss band).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trilemma.errors import InfeasibleError, InputError
from trilemma.quality.allocation import (
    D_MAX,
    FLOPS_MAX,
    MAX_TARGET_LOSS,
    check_allocation,
    check_target_loss,
    closed_form,
    min_total_flops,
    n_band,
    numeric_optimum,
)
from trilemma.quality.laws import DEFAULT_LAW, DEFAULT_LAW_REASON, Form, Law, get_law
from trilemma.quality.predict import (
    check_positive,
    check_unique_tokens,
    precision_factor,
    predict_loss,
    result_dict,
)
from trilemma.specs.enums import LossUnit, NCounts

FLOP_CONVENTION = "training C = 6·N·D, inference 2·N per token; N as the law counts it"


@dataclass(frozen=True)
class Allocation:
    """Compute-optimal N, D and loss for a FLOP budget under one law."""

    law: str
    flops: float
    n_params: float  # as the law counts them (n_counts)
    tokens: float
    tokens_per_param: float
    n_params_low: float  # band from the law's uncertainty samples
    n_params_high: float
    tokens_low: float
    tokens_high: float
    loss: dict[str, Any]  # predict_loss at (N*, D*): mean, low, high, interval, ...
    n_counts: NCounts
    loss_unit: LossUnit
    method: str
    flop_convention: str
    exponent_a: float | None  # N* ∝ C^a (closed form only)
    unique_tokens: float | None
    epochs: float | None
    precision: str
    notes: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return result_dict(self)


def _check_flops(flops: Any) -> float:
    """A positive FLOP budget no larger than FLOPS_MAX, else InputError."""
    flops = check_positive("flops", flops)
    if flops > FLOPS_MAX:
        raise InputError(
            "flops",
            flops,
            f"at most {FLOPS_MAX:.0e} FLOP (6 × 10^15 parameters × 10^18 tokens, "
            "the largest plan trilemma represents)",
        )
    return flops


def _exponent_a(law: Law) -> float:
    """a in N* ∝ C^a of a closed-form law: β/(α+β) (chinchilla), 1/(p+1) with p = α_N/α_D (kaplan)."""
    if law.form is Form.CHINCHILLA:
        return law.constants["beta"] / (law.constants["alpha"] + law.constants["beta"])
    p = law.constants["alpha_N"] / law.constants["alpha_D"]
    return 1.0 / (p + 1.0)


def compute_optimal(
    law: Law | str | None,
    flops: float,
    *,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> Allocation:
    """N*, D*, tokens/parameter and loss (with band) minimising the law's loss at C = 6·N·D = ``flops``."""
    law = get_law(law)
    flops = _check_flops(flops)
    u = None if unique_tokens is None else check_unique_tokens(unique_tokens)
    kfac = precision_factor(law, precision)
    closed = u is None and law.form is not Form.MUENNIGHOFF
    if closed:
        n, d = closed_form(law, law.constants, flops, kfac)
        method = (
            "closed form (Hoffmann 2022 Eq. 4)"
            if law.form is Form.CHINCHILLA
            else "closed form (Kaplan 2020 Eq. 1.5 minimised at fixed C = 6ND)"
        )
    else:
        n, d = numeric_optimum(law, law.constants, flops, u, kfac)
        method = (
            "numeric: log grid of tokens/parameter + golden-section refinement (no closed form)"
        )
    n, d = float(n), float(d)
    check_allocation(law, n, d)
    s = law.samples
    n_lo = n_hi = n
    d_lo = d_hi = d
    if s:
        ns, _ = (
            closed_form(law, s, flops, kfac) if closed else numeric_optimum(law, s, flops, u, kfac)
        )
        n_lo, n_hi = n_band(law, n, np.asarray(ns, dtype=float))
        d_lo, d_hi = flops / (6 * n_hi), flops / (6 * n_lo)
    pred = predict_loss(law, n, n, d, u, precision)
    exponent = _exponent_a(law) if closed else None
    notes = [f"N counts {law.n_counts_text} ({law.name}); {FLOP_CONVENTION}", law.specificity_note]
    notes += [
        x
        for x in pred.notes
        if x.startswith(("training precision", "repeated data", "Kaplan's form"))
    ]
    # the optimiser chose the epochs, so the too-many-epochs warning of a single plan is only a note here
    warnings = [w for w in pred.warnings if "epochs over" not in w]
    notes += [w for w in pred.warnings if "epochs over" in w]
    return Allocation(
        law=pred.law,
        flops=flops,
        n_params=n,
        tokens=d,
        tokens_per_param=d / n,
        n_params_low=n_lo,
        n_params_high=n_hi,
        tokens_low=d_lo,
        tokens_high=d_hi,
        loss={
            k: getattr(pred, k) for k in ("mean", "low", "high", "interval", "level", "loss_unit")
        },
        n_counts=law.n_counts,
        loss_unit=law.loss_unit,
        method=method,
        flop_convention=FLOP_CONVENTION,
        exponent_a=exponent,
        unique_tokens=u,
        epochs=None if u is None else d / u,
        precision=str(precision),
        notes=tuple(notes),
        warnings=tuple(warnings),
    )


# ------------------------------------------------------------------ Sardana 2023: inference-aware


@dataclass(frozen=True)
class InferenceAllocation:
    """Sardana et al. 2023: the model reaching ``target_loss`` with the least training + inference FLOPs."""

    law: str
    target_loss: float
    inference_tokens: float
    n_params: float
    tokens: float
    tokens_per_param: float
    training_flops: float
    inference_flops: float
    total_flops: float
    # the compute-optimal (training-only) model reaching the same loss, for comparison
    chinchilla_n_params: float
    chinchilla_tokens: float
    chinchilla_total_flops: float
    saving: float  # 1 − total / chinchilla_total
    n_counts: NCounts
    loss_unit: LossUnit
    method: str
    flop_convention: str
    notes: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return result_dict(self)


def inference_optimal(
    law: Law | str | None,
    target_loss: float,
    inference_tokens: float,
    *,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> InferenceAllocation:
    """Sardana 2023: argmin over {N, D_tr : L(N, D_tr) = ℓ} of 6·N·D_tr + 2·N·D_inf (numeric)."""
    law = get_law(law)
    target = check_target_loss(check_positive("loss", target_loss), "loss")
    d_inf = float(inference_tokens)
    if not math.isfinite(d_inf) or d_inf < 0:
        raise InputError("inference-tokens", inference_tokens, "a non-negative number of tokens")
    u = None if unique_tokens is None else check_unique_tokens(unique_tokens)
    kfac = precision_factor(law, precision)
    n, d, total = min_total_flops(law, target, d_inf, u, kfac)
    n0, d0, _ = min_total_flops(law, target, 0.0, u, kfac)
    total0 = 6.0 * n0 * d0 + 2.0 * n0 * d_inf
    notes = [
        f"N counts {law.n_counts_text} ({law.name}); {FLOP_CONVENTION}",
        law.specificity_note,
        (
            "Sardana et al. 2023 (arXiv 2401.00448) also find that Chinchilla-style fits over-predict the value of "
            "extreme token/parameter ratios: read very small models with care"
        ),
    ]
    warnings = []
    if d / n > 1e4:
        warnings.append(f"{d / n:,.0f} tokens/parameter is beyond the 10,000 Sardana et al. tested")
    if d > 0.1 * D_MAX:
        warnings.append(
            f"the training tokens ({d:.3g}) are at or near the search's limit of {D_MAX:.0e}: so many "
            "inference tokens push toward ever-smaller models trained ever longer, far outside any "
            "law's data"
        )
    if u is not None and d > 4 * u:
        warnings.append(f"the inference-aware model repeats the unique tokens {d / u:.1f} times")
    return InferenceAllocation(
        law=law.name if law.path is None else law.path,
        target_loss=target,
        inference_tokens=d_inf,
        n_params=n,
        tokens=d,
        tokens_per_param=d / n,
        training_flops=6.0 * n * d,
        inference_flops=2.0 * n * d_inf,
        total_flops=total,
        chinchilla_n_params=n0,
        chinchilla_tokens=d0,
        chinchilla_total_flops=total0,
        saving=1.0 - total / total0 if total0 > 0 else 0.0,
        n_counts=law.n_counts,
        loss_unit=law.loss_unit,
        method="numeric: D_tr(N) by bisection on L(N, D_tr) = target, minimum over a log grid of N + golden section",
        flop_convention=FLOP_CONVENTION,
        notes=tuple(notes),
        warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class OptimalReport:
    """What ``trilemma optimal`` answers: per law, the compute-optimal allocation at a FLOP budget
    and/or the inference-aware one for a target loss, with the inputs and warnings."""

    SCHEMA = "trilemma.optimal/1"

    flops: float | None  # training FLOP budget
    target_loss: float | None  # in each law's unit
    inference_tokens: float | None  # lifetime inference tokens
    unique_tokens: float | None
    precision: str
    results: list[
        dict[str, Any]
    ]  # one per law: law, title, n_counts, loss_unit, compute_optimal, inference_optimal, error
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.SCHEMA,
            "flops": self.flops,
            "flop_convention": FLOP_CONVENTION,
            "target_loss": self.target_loss,
            "inference_tokens": self.inference_tokens,
            "unique_tokens": self.unique_tokens,
            "precision": self.precision,
            "default_law": DEFAULT_LAW,
            "default_law_reason": DEFAULT_LAW_REASON,
            "results": self.results,
            "warnings": self.warnings,
        }


def optimal_report(
    laws: list[Law],
    flops: float | None,
    *,
    target_loss: float | None = None,
    inference_tokens: float | None = None,
    unique_tokens: float | None = None,
    precision: str = "bf16",
) -> OptimalReport:
    """``compute_optimal`` at ``flops`` and/or ``inference_optimal`` for the target loss (given, else the
    compute-optimal loss), for each law. With several laws one that cannot reach the target records
    its error; InfeasibleError when every law fails (or the only one does)."""
    results: list[dict[str, Any]] = []
    warnings: list[str] = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for lw in laws:
            r: dict[str, Any] = {
                "law": lw.name if lw.path is None else lw.path,
                "title": lw.title,
                "n_counts": lw.n_counts,
                "loss_unit": lw.loss_unit,
                "compute_optimal": None,
                "inference_optimal": None,
                "error": None,
            }
            try:
                alloc = (
                    compute_optimal(lw, flops, unique_tokens=unique_tokens, precision=precision)
                    if flops is not None
                    else None
                )
                if alloc is not None:
                    r["compute_optimal"] = alloc.to_dict()
                    warnings += [f"{r['law']}: {w}" for w in alloc.warnings]
                if inference_tokens is not None or target_loss is not None:
                    target = target_loss if target_loss is not None else alloc.loss["mean"]  # type: ignore[union-attr]
                    if (
                        target_loss is None and target > MAX_TARGET_LOSS
                    ):  # the user gave flops, not a loss
                        raise InputError(
                            "flops",
                            flops,
                            f"enough compute for a compute-optimal loss of at most {MAX_TARGET_LOSS:g} "
                            f"to match with --inference-tokens (here it is {target:.4g})",
                        )
                    inf = inference_optimal(
                        lw,
                        target,
                        inference_tokens or 0.0,
                        unique_tokens=unique_tokens,
                        precision=precision,
                    )
                    r["inference_optimal"] = inf.to_dict()
                    warnings += [f"{r['law']}: {w}" for w in inf.warnings]
            except InfeasibleError as exc:
                if len(laws) == 1:
                    raise
                r["error"] = str(exc)
                warnings.append(f"{r['law']}: {exc}")
            results.append(r)
    if all(r["error"] for r in results):
        raise InfeasibleError("; ".join(f"{r['law']}: {r['error']}" for r in results))
    return OptimalReport(
        flops, target_loss, inference_tokens, unique_tokens, precision, results, warnings
    )
