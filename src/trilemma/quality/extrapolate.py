"""Extrapolating a loss law to larger runs: forms averaged by their held-out error.

A free five-constant fit of L = E + A/N^α + B/D^β (Hoffmann et al. 2022, arXiv 2203.15556, App. D.2)
describes the runs it saw well and can extrapolate badly: on small runs the exponents drift (β 0.5-0.7 on
Hoffmann's smaller runs, against 0.28-0.37 in the published fits on all of them), and a run 10× larger in
compute lands several percent off. trilemma fits three forms, each with Hoffmann's procedure
(``trilemma.quality.fit_procedure.fit_point``):

- free: all five constants;
- tied: β = α (Muennighoff et al. 2023, arXiv 2305.16264, fit that form);
- literature: α = β = 0.35, the exponent of Muennighoff et al. 2023 on C4 (0.353), data other than the
  suites trilemma is checked on (``trilemma.quality.fit_pinning.LITERATURE_EXPONENT``).

and averages their predictions with weights 1/e² (e: each form's median absolute relative error on the
runs' own larger part, fitted on the part ``SCALE``× smaller in compute: forecasts combined with
weights inverse to their squared error, Bates & Granger 1969, "The combination of forecasts", Oper. Res.
Q. 20(4)). When the runs are too few to hold any out, the literature form alone is used (as the
staged fit does when the runs cannot pin the exponents). Runs that share one D fit α alone (B = β = 0).

Given each run's non-embedding count too, ``averaged_fit(..., n_nonembedding=...)`` pools each form ×
each count (total N, Hoffmann 2022 App. F; non-embedding N, Kaplan 2020 §2.1; the choice biases fits on
small models, Pearce & Song 2024, arXiv 2406.12907), every member scored by the same backtest on the
same runs (split by 6·N_total·D) and weighted 1/e² over all members (docs/derivations.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.quality.fit_pinning import LITERATURE_EXPONENT
from trilemma.quality.fit_procedure import TIE, fit_point
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.objective import DELTA
from trilemma.quality.runs import MIN_SIZES, n_sizes

#: the parameter counts a member of the pool may take: all parameters (Hoffmann 2022 App. F), or without
#: the input embedding and the LM head (Kaplan 2020 §2.1)
TOTAL = "total"
NON_EMBEDDING = "non-embedding"
#: held-out runs are at least this many times the largest fitted run's compute (6·N·D)
SCALE = 10.0
#: the forms averaged: (``fix`` of fit_point, name, free constants)
FORMS: tuple[tuple[str | float | None, str, int], ...] = (
    (None, "free", 5),
    (TIE, "tied", 4),
    (LITERATURE_EXPONENT, "literature", 3),
)
#: the averaged fit in words (validate's method line and fit's document)
METHOD = (
    "free, tied (beta = alpha) and literature-exponent (alpha = beta = 0.35) forms, each weighted by "
    "1/e^2, e its median error on the runs' larger part fitted on the part 10x smaller in compute "
    "(Bates & Granger 1969; trilemma.quality.extrapolate)"
)
#: a Huber δ (on log loss) above every residual of the shipped suites (|log ratio| < 0.3): the Huber loss
#: is then ½r² throughout, a least-squares fit (the ``squares`` candidate of validate --kind quality)
SQUARES = 1.0
#: L-BFGS starts from the best this many points of Hoffmann's grid (fit_point's ``starts``): on the shipped
#: suites the same minima as from 32, in a quarter of the time
STARTS = 8
#: a held-out error never counts as smaller than this (relative): the digitised losses' precision,
#: ±0.01 nats on ~2.5 (Epoch AI's reading of Hoffmann's Fig. 4, trilemma/data/losses.csv notes)
ERROR_FLOOR = 0.004


@dataclass(frozen=True)
class Averaged:
    """Each form's constants (fitted on every run given) and its weight (the weights sum to 1)."""

    constants: tuple[dict[str, float], ...]
    weights: tuple[float, ...]
    names: tuple[str, ...]
    held_out_error: dict[
        str, float
    ]  # each scored form's median |relative error| on the larger runs
    #: each member's parameter count: TOTAL or NON_EMBEDDING (all TOTAL without non-embedding counts)
    counts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The averaged fit as `trilemma fit --method averaged` reports it: each form's weight, held-out
        error (fraction; None where the form was not scored) and constants."""
        return {
            "method": METHOD,
            "forms": [
                {
                    "form": name,
                    "count": count,
                    "weight": w,
                    "held_out_error": self.held_out_error.get(name),
                    **{k: float(c[k]) for k in ("E", "A", "B", "alpha", "beta")},
                }
                for name, w, c, count in zip(
                    self.names,
                    self.weights,
                    self.constants,
                    self.counts or (TOTAL,) * len(self.names),
                )
            ],
        }

    def predict(self, n: Any, d: Any, n_nonembedding: Any = None) -> np.ndarray:
        """The weighted mean of the members' losses (the law's unit) at N total parameters, D tokens;
        ``n_nonembedding``: the runs' non-embedding parameters, needed when a member counts them."""
        counts = self.counts or (TOTAL,) * len(self.weights)
        if NON_EMBEDDING in counts and n_nonembedding is None:
            raise ValueError("this average has non-embedding members: give n_nonembedding")
        at = {TOTAL: n, NON_EMBEDDING: n_nonembedding}
        return sum(
            (
                w * chinchilla_loss(c, at[k], d)
                for c, w, k in zip(self.constants, self.weights, counts)
            ),
            start=np.zeros(np.broadcast(np.asarray(n), np.asarray(d)).shape),
        )


def split(n: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fitted, held out) masks: the runs at most 1/SCALE of the largest compute, and the runs at least
    SCALE× the largest of those."""
    c = 6.0 * np.asarray(n, float) * np.asarray(d, float)  # C = 6·N·D, FLOP (Kaplan 2020 §2.1)
    small = c <= c.max() / SCALE
    large = c >= SCALE * c[small].max() if small.any() else np.zeros_like(small)
    return small, large


def _forms(d: np.ndarray) -> tuple[tuple[str | float | None, str, int], ...]:
    """The forms a set of runs can take: at one D no β to tie (α alone is fixed; 2 constants)."""
    if np.ptp(np.log(d)) > 1e-9:
        return FORMS
    return ((None, "free", 3), (LITERATURE_EXPONENT, "literature", 2))


def _fits(
    n: np.ndarray, d: np.ndarray, loss: np.ndarray, fix: str | float | None, delta: float = DELTA
) -> dict:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return fit_point(n, d, loss, fix=fix, starts=STARTS, delta=delta).constants


def _members(d: np.ndarray, nonembedding: bool) -> list[tuple[str | float | None, str, int, str]]:
    """(fix, name, free constants, count) of each member of the pool: the forms on total N, and, given
    non-embedding counts, the same forms on non-embedding N."""
    out = [(fix, name, free, TOTAL) for fix, name, free in _forms(d)]
    if nonembedding:
        out += [
            (fix, f"{name} ({NON_EMBEDDING})", free, NON_EMBEDDING) for fix, name, free in _forms(d)
        ]
    return out


def _scores(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    n_nonembedding: np.ndarray | None,
    delta: float = DELTA,
) -> tuple[dict[str, float], dict[str, float]]:
    """Each member's backtest error, fitted on the runs at most 1/SCALE of the largest compute (6·N·D,
    N total): (its median |relative error| on every run above, on those ≥ SCALE× the backtest's largest
    fitted run); a member whose fit would have as many constants as runs is not scored; the second is
    empty where no run is that far."""
    small, far = split(n, d)
    rest = ~small
    every: dict[str, float] = {}
    matched: dict[str, float] = {}
    if not rest.any() or n_sizes(n[small]) < MIN_SIZES:
        return every, matched
    at = {TOTAL: n, NON_EMBEDDING: n_nonembedding}
    for fix, name, free, count in _members(d, n_nonembedding is not None):
        if small.sum() <= free:
            continue
        m = at[count]
        c = _fits(m[small], d[small], loss[small], fix, delta)
        rel = np.abs(chinchilla_loss(c, m[rest], d[rest]) / loss[rest] - 1.0)
        if np.isfinite(rel).all():
            every[name] = max(float(np.median(rel)), ERROR_FLOOR)
            if far.any():
                matched[name] = max(float(np.median(rel[far[rest]])), ERROR_FLOOR)
    return every, matched


def held_out_errors(
    n: np.ndarray, d: np.ndarray, loss: np.ndarray, n_nonembedding: np.ndarray | None = None
) -> dict[str, float]:
    """Each member's median |relative error| on the runs above 1/SCALE of the largest compute (6·N·D,
    N total), fitted on the runs below; a member whose fit would have as many constants as runs is not
    scored."""
    return _scores(n, d, loss, n_nonembedding)[0]


@dataclass(frozen=True)
class Pool:
    """Every member fitted on every run, with both backtest errors: the averages are drawn from it."""

    members: tuple[tuple[str | float | None, str, int, str], ...]
    constants: dict[str, dict[str, float]]
    every: dict[str, float]  # median |relative error| on every run above 1/SCALE (the average's e)
    matched: dict[str, float]  # on the runs ≥ SCALE× the backtest's fitted part (the horizon's e)

    def average(
        self,
        counts: tuple[str, ...] = (TOTAL,),
        horizon: bool = False,
        worst_of: dict[str, float] | None = None,
    ) -> Averaged:
        """The members of ``counts`` weighted 1/e² (e: ``matched`` when ``horizon`` and any run was that
        far, else ``every``; given ``worst_of``, a member's e is the larger of the two); the literature
        form on total N alone when none was scored."""
        errors = self.matched if horizon and self.matched else self.every
        if worst_of:
            errors = {k: max(v, worst_of.get(k, v)) for k, v in errors.items()}
        chosen = [m for m in self.members if m[3] in counts and m[1] in errors] or [
            m for m in self.members if m[3] == TOTAL and m[1] == "literature"
        ]
        raw = [1.0 / errors[name] ** 2 if name in errors else 1.0 for _, name, _, _ in chosen]
        total = sum(raw)
        return Averaged(
            constants=tuple(self.constants[name] for _, name, _, _ in chosen),
            weights=tuple(w / total for w in raw),
            names=tuple(name for _, name, _, _ in chosen),
            held_out_error={k: v for k, v in errors.items() if k in {m[1] for m in chosen}},
            counts=tuple(k for _, _, _, k in chosen),
        )


def direction_errors(n: Any, d: Any, loss: Any) -> dict[str, float]:
    """Each form's (on total N) backtest error along tokens per parameter: fitted on the runs whose D/N
    is at most 1/SCALE of the largest, its median |relative error| on the runs at least SCALE× the
    largest D/N of those (floored like the compute backtest); empty where the runs cannot give it (one
    D, fewer than MIN_SIZES model sizes in the fitted part, no run that far). The ``direction``
    candidate of validate --kind quality: each form's e the larger of this and the compute backtest's."""
    n, d, loss = (np.asarray(v, float) for v in (n, d, loss))
    ratio = d / n
    small = ratio <= ratio.max() / SCALE
    if not small.any() or n_sizes(n[small]) < MIN_SIZES:
        return {}
    far = ratio >= SCALE * ratio[small].max()
    out: dict[str, float] = {}
    for fix, name, free in _forms(d) if far.any() else ():
        if small.sum() <= free:
            continue
        c = _fits(n[small], d[small], loss[small], fix)
        rel = np.abs(chinchilla_loss(c, n[far], d[far]) / loss[far] - 1.0)
        if np.isfinite(rel).all():
            out[name] = max(float(np.median(rel)), ERROR_FLOOR)
    return out


def pool(n: Any, d: Any, loss: Any, n_nonembedding: Any = None, delta: float = DELTA) -> Pool:
    """Every member (each form on total N; given ``n_nonembedding``, one per run, on that count too)
    fitted on every run, and scored by the backtest; a member never scored is fitted only if it is
    the literature form on total N (the fallback). ``delta``: the Huber δ of every fit, on log loss
    (Hoffmann's 10⁻³; ``SQUARES``: least squares at every residual the suites hold)."""
    n, d, loss = (np.asarray(v, float) for v in (n, d, loss))
    ne = None if n_nonembedding is None else np.asarray(n_nonembedding, float)
    every, matched = _scores(n, d, loss, ne, delta)
    members = tuple(_members(d, ne is not None))
    at = {TOTAL: n, NON_EMBEDDING: ne}
    return Pool(
        members=members,
        constants={
            name: _fits(at[k], d, loss, fix, delta)
            for fix, name, _, k in members
            if name in every or (k == TOTAL and name == "literature")
        },
        every=every,
        matched=matched,
    )


def averaged_fit(n: Any, d: Any, loss: Any, n_nonembedding: Any = None) -> Averaged:
    """The forms' fits on every run, weighted by 1/(held-out error)²; the literature form alone when no
    form can be scored. ``n_nonembedding`` (one per run, or None): the forms on that count join the pool."""
    counts = (TOTAL,) if n_nonembedding is None else (TOTAL, NON_EMBEDDING)
    return pool(n, d, loss, n_nonembedding).average(counts)
