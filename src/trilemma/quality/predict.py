"""Final pre-training loss under a scaling law, with repeated data, low-precision training and a band.

The laws' formulas live in ``trilemma.quality.forms``; this module applies them:

- chinchilla form (Hoffmann et al. 2022, arXiv 2203.15556, Eq. 2): L = E + A/N^α + B/D^β.
- kaplan form (Kaplan et al. 2020, arXiv 2001.08361, Eq. 1.5 / 4.1): L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D.
- repeated data (Muennighoff et al. 2023, arXiv 2305.16264; huggingface/datablations README "Parametric
  Fit"): with U unique tokens seen, R_D = max(D/U − 1, 0), D' = U + U·R_D*·(1 − e^(−R_D/R_D*));
  U_N = min(N, D_to_N(U)) with D_to_N(U) = (U·G)^(β/α)·G and G = (αA/(βB))^(1/(α+β)),
  R_N = max(N/U_N − 1, 0), N' = U_N + U_N·R_N*·(1 − e^(−R_N/R_N*)).
- low-precision training (Kumar et al. 2024, arXiv 2411.04330, Eq. 3-4): N_eff = N·Π_x(1 − e^(−P_x/γ_x)),
  x ∈ {weights, activations, KV cache}; taken relative to 16-bit training (the published laws were fitted
  on bf16 runs, so bf16/fp16/fp32 carry no penalty). The γ's are NOT Kumar's fitted values (not
  retrievable); see ``presets/precision.toml`` and the note every low-precision prediction carries.

``loss_mean`` is the vectorised point estimate the solver calls on millions of candidates;
``predict_loss`` is one plan with its band, notes and warnings; ``predict_loss_block`` is the same for
a ModelSpec (``trilemma estimate``'s loss, a LossPrediction whose ``to_dict()`` is its JSON block).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.quality.effective import effective_sizes, loss_at, params_for
from trilemma.quality.extrapolation_band import e_folds_beyond
from trilemma.quality.law import DRAW_SEED
from trilemma.quality.laws import (
    DEFAULT_LEVEL,
    Law,
    get_law,
    precision_constants,
    precision_table,
)
from trilemma.quality.predict_notes import precision_notes, range_notes, repetition_notes
from trilemma.specs.enums import DTYPE_BYTES, LossUnit, NCounts, Precision

ArrayLike = Any

#: bits of each training precision: the dtype sizes of ``trilemma.specs.enums.DTYPE_BYTES`` × 8 bits per byte
_BITS = {p.value: DTYPE_BYTES[p.value] * 8 for p in Precision}
_BITS_RE = re.compile(r"^(?:int|fp|uint|e\dm\d-?)?(\d+(?:\.\d+)?)(?:-?bits?)?$")


def precision_bits(precision: Any) -> float:
    """Bits of a training precision: bf16/fp16 → 16, fp8 → 8, int4 → 4, '6bit' → 6."""
    p = str(precision).strip().lower()
    if p in _BITS:
        return _BITS[p]
    m = _BITS_RE.match(p)
    if m and 1 <= float(m.group(1)) <= 64:
        return float(m.group(1))
    raise InputError(
        "precision", precision, "bf16, fp16, fp32, tf32, fp8, or a bit width such as int4 or 6bit"
    )


def precision_loss_penalty(law: Law, precision: Any = "bf16") -> float:
    """Relative loss penalty of a named training precision from a published comparison against bf16
    (presets/precision.toml: fp8 → DeepSeek-V3's < 0.25%, arXiv 2412.19437 §3.3): the loss is × (1 + this).
    0 for the rest, and when the law carries its own [precision] table (its Kumar form then applies)."""
    if law.precision:
        return 0.0
    return float(precision_table(str(precision)).get("relative_loss_penalty", 0.0))


def _penalties(law: Law, precision: Any) -> Any:
    """``precision_loss_penalty`` for one precision or an array of them (one lookup per distinct value)."""
    if isinstance(precision, (str, bytes)) or np.ndim(precision) == 0:
        return precision_loss_penalty(law, precision)
    p = np.asarray(precision).astype(str)
    values, inverse = np.unique(p, return_inverse=True)
    return np.array([precision_loss_penalty(law, v) for v in values])[inverse].reshape(p.shape)


def precision_factor(law: Law, precision: Any = "bf16") -> float:
    """N_eff / N for training at ``precision`` relative to 16-bit training (Kumar 2024 Eq. 3-4); 1 for a named
    precision with a measured penalty instead (``precision_loss_penalty``)."""
    if precision_loss_penalty(law, precision) > 0:
        return 1.0
    bits = precision_bits(precision)
    k = precision_constants(law)
    ref = float(k["reference_bits"])
    if bits >= ref:
        return 1.0
    gammas = [float(k["gamma_w"]), float(k["gamma_a"]), float(k["gamma_kv"])]
    num = np.prod([1.0 - np.exp(-bits / g) for g in gammas])
    den = np.prod([1.0 - np.exp(-ref / g) for g in gammas])
    return float(num / den)


def loss_mean(
    law: Law | str | None,
    params_total: ArrayLike,
    params_non_embedding: ArrayLike,
    tokens: ArrayLike,
    unique_tokens: ArrayLike | None = None,
    precision: Any = "bf16",
) -> np.ndarray:
    """Point loss at the law's constants, numpy-vectorised over array inputs (broadcast together).

    The law picks which parameter count it uses (``law.n_counts``). ``precision`` may be one value or an
    array of them. No validation: the solver's fast path.
    """
    law = get_law(law)
    n = params_for(law, params_total, params_non_embedding)
    d = np.asarray(tokens, dtype=float)
    if isinstance(precision, (str, bytes)) or np.ndim(precision) == 0:
        kfac: Any = precision_factor(law, precision)
    else:  # an array of precisions (the solver's candidates): one factor per distinct value
        p = np.asarray(precision).astype(str)
        values, inverse = np.unique(p, return_inverse=True)
        kfac = np.array([precision_factor(law, v) for v in values])[inverse].reshape(p.shape)
    return loss_at(law, law.constants, n, d, unique_tokens, kfac) * (1 + _penalties(law, precision))


def loss_samples(
    law: Law,
    params_total: float,
    params_non_embedding: float,
    tokens: float,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> np.ndarray:
    """Loss under each of the law's uncertainty samples (S,); empty when the law has none."""
    s = law.samples
    if not s:
        return np.empty(0)
    n = params_for(law, params_total, params_non_embedding)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        # an extreme (finite) bootstrap refit can overflow here; band() leaves such samples out
        out = loss_at(
            law,
            s,
            n,
            np.asarray(tokens, dtype=float),
            unique_tokens,
            precision_factor(law, precision),
        )
        out = out * (1 + precision_loss_penalty(law, precision))
        r = law.uncertainty.residual if law.uncertainty is not None else None
        if r and np.ndim(out) == 1 and len(out):
            sd = residual_sd(law, float(n), float(np.asarray(tokens, dtype=float)))
            out = out * np.exp(sd * _t_draws(r["df"], len(out)))
        return out


def residual_sd(law: Law, n: float, d: float | None = None) -> float:
    """A law's out-of-sample log-loss error at N parameters and D tokens: σ² = σ₀² + (σ₁·x)², x the e-folds
    beyond the fitted runs in N or (given ``d``) in D or compute, whichever is most, σ₀ alone within them
    (``trilemma.quality.fit_procedure.extrapolation_error``; 0 for a law that ships no residual)."""
    u = law.uncertainty
    r = u.residual if u is not None else None
    if not r:
        return 0.0
    return float(np.hypot(r["log_sd"], r["log_sd_per_e_fold"] * beyond_fit(law, n, d)))


def beyond_fit(law: Law, n: float, d: float | None = None) -> float:
    """e-folds beyond the law's fitted runs: the most of 0, ln(N / N_max), ln(D / D_max) and
    ln(6·N·D / C_max), each where the law's range gives its maximum (D and C only where ``d`` is given;
    trilemma.quality.extrapolation_band.e_folds_beyond)."""
    rng = law.fit_range or {}
    n_max = float(rng.get("N_max", n))
    return float(e_folds_beyond(n, d, n_max, rng.get("D_max"), rng.get("C_max")))


def _t_draws(df: float, size: int) -> np.ndarray:
    """Student t draws for the out-of-sample error: a fixed seed, so that a band is reproducible."""
    return np.random.default_rng(DRAW_SEED).standard_t(df, size)


def band(law: Law, point: float, samples: np.ndarray) -> tuple[float, float]:
    """(low, high) of the law's band around ``point`` from per-sample values.

    Non-finite per-sample values (a degenerate refit whose loss overflows) are left out: a percentile
    over them would be NaN.
    """
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return point, point
    u = law.uncertainty
    assert u is not None
    if u.kind == "range":
        return float(min(point, samples.min())), float(max(point, samples.max()))
    lvl = u.level or DEFAULT_LEVEL
    # numpy's default ("linear", Hyndman & Fan type 7) quantile, as np.interp over the sorted samples:
    # the same figures as np.quantile, which imports numpy.ma (~40 ms) on first use, at every start
    s = np.sort(samples)
    lo, hi = np.interp(
        [(s.size - 1) * (1 - lvl) / 2, (s.size - 1) * (1 + lvl) / 2], np.arange(s.size), s
    )
    return float(min(lo, point)), float(max(hi, point))


@dataclass(frozen=True)
class LossPrediction:
    """Predicted final training loss for one plan, with its band and what it means."""

    mean: float  # the law's point estimate (its constants), in loss_unit
    low: float
    high: float
    interval: str  # how the band was made, e.g. "80%: percentiles of the loss over 400 parameter draws ..."
    level: float | None  # 0.8 for an 80% band; None for a min-max range
    law: str
    law_source: str
    form: str
    n_counts: NCounts  # which parameters the law counts: total or non_embedding
    params_used: float  # N given to the law (its convention)
    loss_unit: LossUnit
    data: str
    tokenizer: str
    tokens: float
    unique_tokens: float | None
    epochs: float | None  # tokens / unique tokens
    effective_tokens: float  # D' (Muennighoff 2023); = tokens without repetition
    effective_params: (
        float  # N' × precision factor (Muennighoff 2023, Kumar 2024); = N at 16 bits, no repetition
    )
    precision: str
    precision_factor: float  # N_eff / N from training precision (1 for bf16/fp16/fp32)
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    moe_ratio: float | None = None  # a mixture of experts: the share of the reducible loss it keeps

    def to_dict(self) -> dict[str, Any]:
        return result_dict(self)


def _fmt(x: float) -> str:
    from trilemma.units import fmt_count

    return fmt_count(x)


def result_dict(result: Any) -> dict[str, Any]:
    """A result dataclass as its JSON document: its fields, with ``notes`` and ``warnings`` as lists."""
    d = asdict(result)
    d["notes"], d["warnings"] = list(result.notes), list(result.warnings)
    return d


def check_positive(field: str, v: Any) -> float:
    """``v`` as a finite positive float, else an InputError naming ``field``."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(field, v, "a positive number") from None
    if not np.isfinite(f) or f <= 0:
        raise InputError(field, v, "a positive number")
    return f


def check_unique_tokens(v: Any) -> float:
    """--unique-tokens: a finite count of at least one token (epochs = tokens / unique tokens; 1e-300 made
    them infinite and the loss NaN)."""
    u = check_positive("unique-tokens", v)
    if u < 1:
        raise InputError("unique-tokens", v, "at least one token")
    return u


def predict_loss(
    law: Law | str | None,
    params_total: float,
    params_non_embedding: float,
    tokens: float,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> LossPrediction:
    """Loss for one plan: point, band from the law's parameter uncertainty, notes and warnings."""
    law = get_law(law)
    n_tot = check_positive("params", params_total)
    n_ne = check_positive("params (non-embedding)", params_non_embedding)
    d = check_positive("tokens", tokens)
    u = None if unique_tokens is None else check_unique_tokens(unique_tokens)
    kfac = precision_factor(law, precision)
    n = float(params_for(law, n_tot, n_ne))
    pen = precision_loss_penalty(law, precision)
    mean = float(loss_at(law, law.constants, np.asarray(n), np.asarray(d), u, kfac)) * (1 + pen)
    lo, hi = band(law, mean, loss_samples(law, n_tot, n_ne, d, u, precision))
    n_eff, d_eff = effective_sizes(law, law.constants, np.asarray(n), np.asarray(d), u, kfac)

    notes = [law.specificity_note, f"N = {_fmt(n)} counts {law.n_counts_text}, as {law.name} does"]
    warnings: list[str] = []
    if law.uncertainty is None:
        warnings.append(
            f"law {law.name} carries no parameter uncertainty: the band is a single point"
        )
    range_notes(law, n, d, float(n_eff), float(d_eff), notes, warnings)
    precision_notes(law, precision, pen, kfac, notes)
    epochs = repetition_notes(law, (n, d, u), kfac, mean, float(d_eff), notes, warnings)
    return LossPrediction(
        mean=mean,
        low=lo,
        high=hi,
        interval=law.uncertainty.interval
        if law.uncertainty
        else "none (the law has no uncertainty)",
        level=None if law.uncertainty is None else law.uncertainty.level,
        law=law.name if law.path is None else law.path,
        law_source=law.source,
        form=str(law.form),
        n_counts=law.n_counts,
        params_used=n,
        loss_unit=law.loss_unit,
        data=law.data,
        tokenizer=law.tokenizer,
        tokens=d,
        unique_tokens=u,
        epochs=epochs,
        effective_tokens=float(d_eff),
        effective_params=float(n_eff),
        precision=str(precision),
        precision_factor=kfac,
        notes=tuple(notes),
        warnings=tuple(warnings),
    )


def predict_loss_block(
    model: Any,
    tokens: float,
    law: Law | str | None = None,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> LossPrediction:
    """The loss of a model (a ModelSpec) trained on ``tokens`` tokens: ``trilemma estimate``'s loss block.

    Parameter counts come from ``trilemma.estimate.params``; a mixture of experts is the law at its
    active size carried by the MoE law (``trilemma.quality.moe``). ``.to_dict()`` is the ``loss`` block of ``trilemma estimate --json``.
    """
    from trilemma.quality.moe import moe_prediction, moe_shape

    shape = moe_shape(model)
    if shape is None:
        from trilemma.estimate.params import param_counts

        p = param_counts(model)
        pred = predict_loss(law, p.total, p.non_embedding, tokens, unique_tokens, precision)
    else:  # the host law at the active size, carried by the MoE law (trilemma.quality.moe)
        n_act, n_act_ne = shape.active_total, shape.active_non_embedding
        dense = predict_loss(law, n_act, n_act_ne, tokens, unique_tokens, precision)
        pred = moe_prediction(
            law, shape, dense, precision_loss_penalty(get_law(law), dense.precision)
        )
    uniform = math.log(model.vocab_size)  # nats/token of a uniform guess over the vocabulary
    if pred.loss_unit is LossUnit.NATS_PER_TOKEN and pred.mean > uniform:
        pred = replace(
            pred,
            warnings=(
                *pred.warnings,
                (
                    f"the law gives {pred.mean:.4g} nats/token, above ln(vocabulary {model.vocab_size:,}) = {uniform:.3f}, "
                    "the loss of a uniform guess: a trained model does not do worse, so this is the law far outside its "
                    "data, not a prediction"
                ),
            ),
        )
    return pred


def loss_block(
    model_spec: Any,
    tokens: float,
    law: Law | str | None = None,
    unique_tokens: float | None = None,
    precision: Any = "bf16",
) -> dict[str, Any]:
    """``predict_loss_block(...).to_dict()``: the ``loss`` block of ``trilemma estimate --json``."""
    return predict_loss_block(model_spec, tokens, law, unique_tokens, precision).to_dict()


def caveats(pred: LossPrediction) -> tuple[str, ...]:
    """The prediction's notes beyond the two its one-line summary carries (the law's data and tokenizer,
    which parameters N counts): extrapolation in N and D, precision, repetition, mixture of experts."""
    return tuple(pred.notes[2:])


def format_loss_line(block: Mapping[str, Any]) -> str:
    """One line for the human table of ``trilemma estimate``: value, band, law, and the caveat."""
    lvl = block.get("level")
    band_txt = (
        f"{lvl:.0%} band" if lvl else "range"
    ) + f" {block['low']:.3f} – {block['high']:.3f}"
    return (
        f"{block['mean']:.3f} {block['loss_unit']} ({band_txt}) — {block['law']}, N = {block['n_counts'].replace('_', '-')} "
        f"params; absolute loss is specific to {block['data']} / {block['tokenizer']}"
    )
