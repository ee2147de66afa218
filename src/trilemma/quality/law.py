"""A scaling law as a value: its form, constants, what they mean, and its parameter uncertainty.

``trilemma.quality.laws`` reads, validates, looks up and writes laws (shipped presets in
``presets/laws/*.toml`` and user files); this module is the type they become, with no I/O.

Forms (the formulas live in ``trilemma.quality.forms``, applied by ``trilemma.quality.predict``):

- ``chinchilla``: L = E + A/N^α + B/D^β (Hoffmann et al. 2022, arXiv 2203.15556, Eq. 2).
- ``kaplan``: L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D, N non-embedding (Kaplan et al. 2020, arXiv 2001.08361,
  Eq. 1.5 / 4.1). No irreducible term.
- ``muennighoff``: the chinchilla form on effective parameters N' and effective data D' given the unique
  tokens U (Muennighoff et al. 2023, arXiv 2305.16264; huggingface/datablations README "Parametric Fit").

Units: loss in the law's ``loss_unit`` (nats/token or bits/byte), N in parameters as ``n_counts`` says,
D in tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from trilemma.specs.enums import LossUnit, NCounts, StrEnum

#: Band level used when a law's uncertainty does not state one (Hoffmann 2022 Table 2 uses 10th/90th percentiles).
DEFAULT_LEVEL = 0.8
#: Draws from a covariance for a band; fixed seed so that a prediction is reproducible.
N_DRAWS = 400
DRAW_SEED = 20240416

LOSS_UNITS = tuple(u.value for u in LossUnit)  # ("nats/token", "bits/byte")
N_COUNTS = tuple(c.value for c in NCounts)  # ("total", "non_embedding")


class Form(StrEnum):
    """A law's functional form (the formulas: ``trilemma.quality.forms``)."""

    CHINCHILLA = "chinchilla"
    KAPLAN = "kaplan"
    MUENNIGHOFF = "muennighoff"


#: Constants each form needs (names as in the TOML files).
FORM_CONSTANTS: dict[Form, tuple[str, ...]] = {
    Form.CHINCHILLA: ("E", "A", "B", "alpha", "beta"),
    Form.KAPLAN: ("alpha_N", "alpha_D", "N_c", "D_c"),
    Form.MUENNIGHOFF: ("E", "A", "B", "alpha", "beta"),
}
FORM_TEXT: dict[Form, str] = {
    Form.CHINCHILLA: "L = E + A/N^alpha + B/D^beta",
    Form.KAPLAN: "L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D",
    Form.MUENNIGHOFF: "L = E + A/N'^alpha + B/D'^beta (N', D': effective parameters and data given unique tokens)",
}
#: Parameters a covariance may be given in: log-space for the scale constants (Hoffmann's own parameterisation).
LOG_PARAMS = {"ln_A": "A", "ln_B": "B", "ln_E": "E", "ln_N_c": "N_c", "ln_D_c": "D_c"}

# ------------------------------------------------------------------ bounds on the constants (stated once)

#: Exponents (alpha, beta, alpha_N, alpha_D). Published ones sit in 0.05-0.8 (Kaplan's alpha_C 0.050 is
#: the flattest); below 0.01 a thousandfold larger model moves its term by under 7%, and the allocation's
#: powers 1/(alpha + beta) pass 50 and leave a double's range. Above 3 the powers overflow for real N, D.
EXPONENT_MIN, EXPONENT_MAX = 0.01, 3.0
#: Coefficients A, B in the law's loss unit: A/N^alpha <= A at N >= 1, so below 1e-6 the term is under a
#: micro-unit of loss at every size (write B = beta = 0 for a law with no data term); above 1e15 the
#: powers overflow. Kaplan's scales N_c, D_c count parameters and tokens: at least 1, at most 1e15.
COEFFICIENT_MIN, COEFFICIENT_MAX = 1e-6, 1e15
SCALE_MIN = 1.0
#: The largest loss a law or a run may state: a uniform guess over a million-token vocabulary scores
#: ln(1e6) = 13.8 nats/token (the largest vocabularies in use are ~256k, ln = 12.5), over bytes 8 bits.
UNIFORM_LOSS_MAX: dict[str, float] = {"nats/token": math.log(1e6), "bits/byte": 8.0}
#: A covariance's draws at this many standard deviations must stay inside the bounds above, and a
#: log-space standard deviation (ln_A, ...) is at most LOG_SD_MAX: one sigma at most a factor e on the
#: constant (the widest published, Besiroglu 2024's ln B, is 0.42); wider, the band is the prior, not
#: the law, and its lower end runs to 0.
COVARIANCE_SIGMAS, LOG_SD_MAX = 3.0, 1.0


def constant_bounds(name: str, loss_unit: str) -> tuple[float, float]:
    """(lowest, highest) value constant ``name`` may take (inclusive), in its own unit."""
    if name.startswith(("alpha", "beta")):
        return EXPONENT_MIN, EXPONENT_MAX
    if name == "E":
        return 0.0, UNIFORM_LOSS_MAX[loss_unit]
    if name in ("N_c", "D_c"):
        return SCALE_MIN, COEFFICIENT_MAX
    return COEFFICIENT_MIN, COEFFICIENT_MAX


def constants_problem(form: Form, constants: Mapping[str, float], loss_unit: str) -> str | None:
    """What is wrong with a law's constants, as the 'expected ...' of a refusal; None when nothing.

    Exactly the form's constants, each inside ``constant_bounds``; B = beta = 0 together is a law
    without a data term (``trilemma fit`` on runs that all share one D writes one).
    """
    need = FORM_CONSTANTS[form]
    missing = [k for k in need if k not in constants]
    unknown = [k for k in constants if k not in need]
    if missing or unknown:
        what = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"
        return f"constants {', '.join(need)} for form {form}, no others ({what})"
    no_d_term = form is not Form.KAPLAN and constants["B"] == constants["beta"] == 0
    for k in need:
        lo, hi = constant_bounds(k, loss_unit)
        if no_d_term and k in ("B", "beta"):
            continue
        if not lo <= constants[k] <= hi:
            hint = "; B = beta = 0 for no data term" if k in ("B", "beta") else ""
            return (
                f"`constants.{k}` in [{lo:g}, {hi:g}] (a physical scaling law{hint}), "
                f"not {constants[k]:g}"
            )
    return None


def covariance_problem(
    params: tuple[str, ...], cov: np.ndarray, constants: Mapping[str, float], loss_unit: str
) -> str | None:
    """What is wrong with a covariance over ``params`` (log-space names allowed), else None: each
    parameter's draws at COVARIANCE_SIGMAS standard deviations stay inside its constant's bounds, and a
    log-space standard deviation is at most LOG_SD_MAX."""
    for j, p in enumerate(params):
        sd = math.sqrt(max(float(cov[j, j]), 0.0))
        name = LOG_PARAMS.get(p, p)
        lo, hi = constant_bounds(name, loss_unit)
        v = constants[name]
        if p in LOG_PARAMS:
            if v <= 0 or sd > LOG_SD_MAX:
                why = (
                    f"{name} > 0 for {p}"
                    if v <= 0
                    else f"sd({p}) = {sd:.3g} at most {LOG_SD_MAX:g}"
                )
                return f"`uncertainty.covariance` with {why} (one sigma at most a factor e)"
            lo_v, hi_v = v * math.exp(-COVARIANCE_SIGMAS * sd), v * math.exp(COVARIANCE_SIGMAS * sd)
        else:
            lo_v, hi_v = v - COVARIANCE_SIGMAS * sd, v + COVARIANCE_SIGMAS * sd
        if not lo <= lo_v <= hi_v <= hi:
            return (
                f"`uncertainty.covariance` whose {COVARIANCE_SIGMAS:g}-sigma draws of {p} stay in "
                f"{name}'s bounds [{lo:g}, {hi:g}] (sd {sd:.3g} around {v:g} reaches "
                f"[{lo_v:.3g}, {hi_v:.3g}])"
            )
    return None


@dataclass(frozen=True, eq=False)
class Uncertainty:
    """Parameter uncertainty of a law, turned into constant samples by ``Law.samples``.

    kind ``covariance``: a multivariate normal over ``params`` (log-space names allowed, e.g. ``ln_A``),
    centred on the law's constants; ``samples``: rows of constants (e.g. bootstrap refits);
    ``range``: alternative published constant sets; the band is the min-max over them and the point.
    """

    kind: str
    params: tuple[str, ...]
    level: float | None
    source: str
    covariance: np.ndarray | None = None
    samples: np.ndarray | None = None
    borrowed_from: str | None = (
        None  # a law whose covariance stands in (stated in the interval text)
    )
    #: out-of-sample error of a fitted law (``trilemma.quality.fit``): log_sd (in-sample log residual),
    #: log_sd_per_e_fold (added per e-fold of N, D or compute beyond the fitted runs), df (of the Student t draws)
    residual: Mapping[str, float] | None = None

    @property
    def interval(self) -> str:
        """How the band is made, in words (shown next to every loss)."""
        if self.kind == "range":
            return f"range over published constant sets ({self.source})"
        lvl = f"{(self.level or DEFAULT_LEVEL):.0%}"
        if self.kind == "covariance":
            what = (
                f"the covariance of {self.borrowed_from} used as a stand-in (this law published none)"
                if self.borrowed_from
                else "the law's parameter covariance"
            )
            return f"{lvl}: percentiles of the loss over {N_DRAWS} parameter draws from {what}"
        n = 0 if self.samples is None else len(self.samples)
        if self.residual:
            r = self.residual
            return (
                f"{lvl}: percentiles of the loss over {n} bootstrap refits, each times an out-of-sample "
                f"error (log-sd {r['log_sd']:.3g}, plus {r['log_sd_per_e_fold']:.3g} per e-fold of N, D or "
                f"compute beyond the fitted runs; Student t, {r['df']:g} df)"
            )
        return f"{lvl}: percentiles of the loss over {n} bootstrap refits"


@dataclass(frozen=True, eq=False)
class Law:
    """A scaling law and what its numbers mean. Build with ``get_law`` or ``law_from_dict``."""

    name: str
    form: Form
    constants: Mapping[str, float]
    n_counts: NCounts  # total (Hoffmann: all parameters incl. embeddings) or non_embedding (Kaplan)
    loss_unit: LossUnit  # nats/token or bits/byte
    data: str
    tokenizer: str
    source: str
    title: str = ""
    notes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    uncertainty: Uncertainty | None = None
    repetition: Mapping[str, float] | None = (
        None  # R_D_star, R_N_star, useful_epochs (Muennighoff 2023)
    )
    precision: Mapping[str, float] | None = None  # overrides of the Kumar 2024 constants
    fit_range: Mapping[str, float] | None = (
        None  # N_min, N_max, D_min, D_max of the runs it was fitted on
    )
    fit_report: Mapping[str, Any] | None = (
        None  # what `trilemma fit` measured (kept for provenance)
    )
    path: str | None = None  # file it was read from, when not a shipped preset
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def form_text(self) -> str:
        """The form's formula in ASCII (FORM_TEXT)."""
        return FORM_TEXT[self.form]

    @property
    def n_counts_text(self) -> str:
        """Which parameters N counts, in words."""
        return (
            "all parameters, embeddings included"
            if self.n_counts is NCounts.TOTAL
            else "non-embedding parameters"
        )

    @property
    def specificity_note(self) -> str:
        """The note that absolute loss belongs to the law's data, tokenizer and loss unit."""
        return (
            f"absolute loss is specific to the law's data and tokenizer ({self.data}; {self.tokenizer}; "
            f"{self.loss_unit}): compare trends, not values, across datasets or tokenizers"
        )

    @cached_property
    def samples(self) -> dict[str, np.ndarray]:
        """Constant sets expressing the law's uncertainty: name → array (S,). Empty dict if none."""
        u = self.uncertainty
        if u is None:
            return {}
        if u.kind == "covariance":
            assert u.covariance is not None
            mean = np.array([_param_value(self.constants, p) for p in u.params])
            rng = np.random.default_rng(DRAW_SEED)
            draws = rng.multivariate_normal(mean, u.covariance, size=N_DRAWS, method="cholesky")
            out = {k: np.full(N_DRAWS, float(v)) for k, v in self.constants.items()}
            for j, p in enumerate(u.params):
                if p in LOG_PARAMS:
                    out[LOG_PARAMS[p]] = np.exp(draws[:, j])
                else:
                    out[p] = draws[:, j]
            return out
        assert u.samples is not None
        out = {k: np.full(len(u.samples), float(v)) for k, v in self.constants.items()}
        for j, p in enumerate(u.params):
            out[p] = np.asarray(u.samples[:, j], dtype=float)
        return out

    def describe(self) -> dict[str, Any]:
        """The law for JSON output: name, form, constants and what they mean."""
        return {
            "name": self.name,
            "title": self.title,
            "form": str(self.form),
            "formula": self.form_text,
            "constants": dict(self.constants),
            "n_counts": self.n_counts,
            "loss_unit": self.loss_unit,
            "data": self.data,
            "tokenizer": self.tokenizer,
            "source": self.source,
            "interval": self.uncertainty.interval if self.uncertainty else None,
            "path": self.path,
        }


def _param_value(constants: Mapping[str, float], p: str) -> float:
    """Constant ``p`` of a law; a log-space name (``ln_A``) gives the natural log of its constant."""
    if p in LOG_PARAMS:
        return math.log(constants[LOG_PARAMS[p]])
    return float(constants[p])
