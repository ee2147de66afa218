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
from trilemma.quality.effective import loss_at
from trilemma.quality.forms import tokens_for_loss as invert
from trilemma.quality.laws import DEFAULT_LAW, DEFAULT_LAW_REASON, DEFAULT_LEVEL, Form, Law, get_law
from trilemma.quality.predict import (
    check_positive,
    check_unique_tokens,
    precision_factor,
    predict_loss,
    result_dict,
)
from trilemma.specs.enums import LossUnit, NCounts
from trilemma.units import SI

FLOP_CONVENTION = "training C = 6·N·D, inference 2·N per token; N as the law counts it"
_RATIO_MIN, _RATIO_MAX, _GRID = 1e-2, 1e5, 1601  # tokens/parameter searched by the numeric optimum
_N_MIN, _N_MAX = 1e4, 1e15  # parameters searched by the inference-aware optimum
#: the largest budget: C = 6·N·D at the most parameters searched and the most tokens a plan may train
#: (trilemma.specs.plan.Stage.tokens ≤ 10^18); beyond it the laws' terms overflow to NaN
FLOPS_MAX = 6.0 * _N_MAX * SI["E"]


def _closed_form(law: Law, c: Any, flops: float, kfac: float) -> tuple[Any, Any]:
    """(N*, D*) in closed form, vectorised over constant samples, in numpy floats: a power that leaves
    a double's range gives inf or 0 (``_allocation_problem`` refuses it), not a Python exception."""
    c = {k: np.asarray(v, dtype=float) for k, v in c.items()}
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        if law.form is Form.CHINCHILLA or law.form is Form.MUENNIGHOFF:
            al, be = c["alpha"], c["beta"]
            a_eff = c["A"] * kfac ** (-al)
            g = (al * a_eff / (be * c["B"])) ** (1.0 / (al + be))  # Hoffmann 2022 Eq. 4
            n = g * (flops / 6.0) ** (be / (al + be))
            return n, flops / (6.0 * n)
        p = c["alpha_N"] / c["alpha_D"]
        n_c = c["N_c"] / kfac
        n = (p * n_c**p * flops / (6.0 * c["D_c"])) ** (1.0 / (p + 1.0))
        return n, flops / (6.0 * n)


def _check_allocation(law: Law, n: float, d: float) -> None:
    """InputError naming the law unless (N*, D*) are finite and positive: a law without a data term
    (B = beta = 0, fitted at one D) has no compute-optimal split, and constants at the edges of their
    bounds can put the closed form's powers outside a double's range."""
    c = law.constants
    if law.form is not Form.KAPLAN and c["B"] == c["beta"] == 0:
        raise InputError(
            "law",
            law.path or law.name,
            "a law with a data term (B, beta > 0) for a compute-optimal allocation: with "
            "B = beta = 0 (fitted at one D) its loss falls with N alone",
        )
    if not (math.isfinite(n) and math.isfinite(d) and n > 0 and d > 0):
        raise InputError(
            "law",
            law.path or law.name,
            f"constants whose compute-optimal allocation is finite (N* = {n:g}, D* = {d:g})",
        )


def _golden(f: Any, lo: float, hi: float, iters: int = 80) -> float:
    """Minimum of a unimodal f on [lo, hi] (golden-section search)."""
    r = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c1, c2 = b - r * (b - a), a + r * (b - a)
    f1, f2 = f(c1), f(c2)
    for _ in range(iters):
        if f1 <= f2:
            b, c2, f2 = c2, c1, f1
            c1 = b - r * (b - a)
            f1 = f(c1)
        else:
            a, c1, f1 = c1, c2, f2
            c2 = a + r * (b - a)
            f2 = f(c2)
    return (a + b) / 2


def _numeric(law: Law, c: Any, flops: float, u: float | None, kfac: float) -> tuple[Any, Any]:
    """(N*, D*) on a log grid of tokens/parameter, vectorised over samples (arrays (S,)) or not."""
    ratio = np.logspace(math.log10(_RATIO_MIN), math.log10(_RATIO_MAX), _GRID)
    n = np.sqrt(flops / (6.0 * ratio))
    samples = np.ndim(next(iter(c.values()))) > 0
    cc = {k: (np.asarray(v)[:, None] if samples else v) for k, v in c.items()}
    loss = loss_at(law, cc, n, flops / (6.0 * n), u, kfac)
    i = np.argmin(loss, axis=-1)
    if samples:
        n_star = n[i]
        return n_star, flops / (6.0 * n_star)
    lo, hi = math.log(n[min(i + 1, _GRID - 1)]), math.log(n[max(i - 1, 0)])
    x = _golden(
        lambda t: float(loss_at(law, c, np.exp(t), flops / (6.0 * np.exp(t)), u, kfac)), lo, hi
    )
    return math.exp(x), flops / (6.0 * math.exp(x))


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


def _n_band(law: Law, n: float, ns: np.ndarray) -> tuple[float, float]:
    """(low, high) of N* over the law's constant samples ``ns`` around the point ``n``; a draw whose
    allocation leaves a double's range (inf, 0, NaN) says nothing of the band and is left out."""
    ns = ns[np.isfinite(ns) & (ns > 0)]
    if not ns.size:
        return n, n
    if law.uncertainty is not None and law.uncertainty.kind == "range":
        return min(n, float(ns.min())), max(n, float(ns.max()))
    level = (law.uncertainty.level if law.uncertainty else None) or DEFAULT_LEVEL
    lo, hi = _q(ns, level)
    return min(lo, n), max(hi, n)


def _q(x: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def compute_optimal(
    law: Law | str | None,
    flops: float,
    *,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> Allocation:
    """N*, D*, tokens/parameter and loss (with band) minimising the law's loss at C = 6·N·D = ``flops``."""
    law = get_law(law)
    flops = check_positive("flops", flops)
    if flops > FLOPS_MAX:
        raise InputError(
            "flops",
            flops,
            f"at most {FLOPS_MAX:.0e} FLOP (6 × 10^15 parameters × 10^18 tokens, "
            "the largest plan trilemma represents)",
        )
    u = None if unique_tokens is None else check_unique_tokens(unique_tokens)
    kfac = precision_factor(law, precision)
    closed = u is None and law.form is not Form.MUENNIGHOFF
    if closed:
        n, d = _closed_form(law, law.constants, flops, kfac)
        method = (
            "closed form (Hoffmann 2022 Eq. 4)"
            if law.form is Form.CHINCHILLA
            else "closed form (Kaplan 2020 Eq. 1.5 minimised at fixed C = 6ND)"
        )
    else:
        n, d = _numeric(law, law.constants, flops, u, kfac)
        method = (
            "numeric: log grid of tokens/parameter + golden-section refinement (no closed form)"
        )
    n, d = float(n), float(d)
    _check_allocation(law, n, d)
    s = law.samples
    n_lo = n_hi = n
    d_lo = d_hi = d
    if s:
        ns, _ = _closed_form(law, s, flops, kfac) if closed else _numeric(law, s, flops, u, kfac)
        n_lo, n_hi = _n_band(law, n, np.asarray(ns, dtype=float))
        d_lo, d_hi = flops / (6 * n_hi), flops / (6 * n_lo)
    pred = predict_loss(law, n, n, d, u, precision)
    exponent = None
    if closed and law.form is Form.CHINCHILLA:
        exponent = law.constants["beta"] / (law.constants["alpha"] + law.constants["beta"])
    elif closed:
        p = law.constants["alpha_N"] / law.constants["alpha_D"]
        exponent = 1.0 / (p + 1.0)
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

#: the highest target loss accepted, in a law's unit: a uniform guess over a million-token vocabulary
#: scores ln(1e6) = 13.8 nats/token, and over bytes 8 bits/byte; no trained model does worse
MAX_TARGET_LOSS = 20.0


def check_target_loss(value: float, field: str = "target-loss") -> float:
    """A target loss below MAX_TARGET_LOSS (nats/token or bits/byte), else InputError naming ``field``."""
    if value > MAX_TARGET_LOSS:
        raise InputError(
            field,
            value,
            f"at most {MAX_TARGET_LOSS:g}: a uniform guess over a million-token "
            "vocabulary scores 13.8 nats/token, over bytes 8 bits/byte",
        )
    return value


#: most training tokens the inference-aware search considers (the plan's own limit, specs.plan.Stage.tokens)
D_MAX = 1e18


def tokens_for_loss(
    law: Law,
    c: Any,
    n: np.ndarray,
    target: float,
    u: float | None,
    kfac: float,
    d_max: float = D_MAX,
) -> np.ndarray:
    """Training tokens D with L(N, D) = target for each N (inf where even ``d_max`` tokens fall short);
    the inverse is trilemma.quality.forms.tokens_for_loss (bisection in ln D from 1 token, 90 halvings)."""
    n = np.asarray(n, dtype=float)
    return invert(
        lambda d: loss_at(law, c, n, d, u, kfac), target, n.shape, d_min=1.0, d_max=d_max, iters=90
    )


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


def _min_total(
    law: Law, target: float, d_inf: float, u: float | None, kfac: float
) -> tuple[float, float, float]:
    """(N, D_tr, total FLOPs) minimising 6·N·D_tr + 2·N·D_inf on L(N, D_tr) = target."""
    c = law.constants
    n = np.logspace(math.log10(_N_MIN), math.log10(_N_MAX), 1201)
    d = tokens_for_loss(law, c, n, target, u, kfac)
    with np.errstate(over="ignore"):
        total = 6.0 * n * d + 2.0 * n * d_inf
    if np.isfinite(d).any() and not np.isfinite(total).any():
        raise InputError(
            "inference-tokens",
            d_inf,
            "few enough that their FLOPs (2 per parameter per token) stay below 1e308",
        )
    if not np.isfinite(total).any():
        floor = float(loss_at(law, c, np.asarray(_N_MAX), np.asarray(D_MAX), u, kfac))
        raise InfeasibleError(
            f"target loss {target:g} {law.loss_unit} is out of reach under {law.name}: even "
            f"{_N_MAX:.0e} parameters on 1e18 tokens give {floor:.4f}"
            + (f" (irreducible loss E = {c['E']:.4f})" if "E" in c else "")
        )
    i = int(np.argmin(total))

    def f(t: float) -> float:
        nn = np.asarray([math.exp(t)])
        dd = tokens_for_loss(law, c, nn, target, u, kfac)[0]
        return float(6.0 * nn[0] * dd + 2.0 * nn[0] * d_inf) if np.isfinite(dd) else math.inf

    # refine between the grid neighbours that still reach the target (a neighbour past the edge of the
    # reachable region, where D_tr would pass D_MAX, has no finite total)
    lo = math.log(n[max(i - 1, 0)])
    if i > 0 and not np.isfinite(
        total[i - 1]
    ):  # the edge lies below n[i]: find it (bisection in ln N)
        a, b = lo, math.log(n[i])
        for _ in range(60):
            mid = 0.5 * (a + b)
            a, b = (a, mid) if math.isfinite(f(mid)) else (mid, b)
        lo = b
    hi = math.log(n[i + 1]) if i + 1 < len(n) and np.isfinite(total[i + 1]) else math.log(n[i])
    x = _golden(f, lo, hi, iters=60)
    n_best = math.exp(x)
    d_best = float(tokens_for_loss(law, c, np.asarray([n_best]), target, u, kfac)[0])
    if not (math.isfinite(d_best) and f(x) <= total[i]):  # the grid point is as good
        n_best, d_best = float(n[i]), float(d[i])
    return n_best, d_best, 6.0 * n_best * d_best + 2.0 * n_best * d_inf


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
    n, d, total = _min_total(law, target, d_inf, u, kfac)
    n0, d0, _ = _min_total(law, target, 0.0, u, kfac)
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
