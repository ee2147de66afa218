"""Fit the benchmark curves on published scores (``trilemma/data/benchmarks.csv``) and measure them
leave-one-family-out. Run ``python -m trilemma.quality.bench_fit`` to regenerate
``trilemma/presets/benchmarks.toml``; ``trilemma.quality.benchmarks`` reads only that file, so scipy is
never imported at run time.

The form (one place: :func:`trilemma.quality.benchmarks.expected_accuracy`) is the two-step method of
Llama 3 (arXiv:2407.21783 §3.2.1), Owen 2024 (arXiv:2401.04757) and Ruan et al. 2024 (arXiv:2405.10938):
training compute C = 6ND and tokens per parameter D/N give a capability index
x = log10(C) + γ·log10(D/N); accuracy is a sigmoid in x between the benchmark's chance level and a fitted
ceiling. The family is left out of the fit; its spread is what the leave-one-family-out residuals measure,
and the 80% band is ±1.2816 standard deviations of them (as index shifts).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from trilemma.quality.benchmarks import (
    BENCHMARKS,
    capability_index,
    expected_accuracy,
    index_shift,
)

# starting point and bounds of (k, x0, gamma, ceiling): k per decade of the index, x0 in log10 FLOP.
# The ceiling is fitted no lower than 0.85, under the best published scores (84 on MMLU): with few
# points near the top a free ceiling settles below them.
CEILING_FLOOR = 0.85
_P0 = (1.0, 23.0, 0.0, 0.95)
_LOW = (0.05, 18.0, -2.0, CEILING_FLOOR)
_HIGH = (20.0, 28.0, 2.0, 1.0)


@dataclass(frozen=True)
class Row:
    """One published score: the model's parameters, training tokens and accuracy (a fraction 0-1)."""

    model: str
    family: str
    params: float
    tokens: float
    benchmark: str
    setting: str
    score: float
    source: str


def load_rows(text: str | None = None) -> list[Row]:
    """The rows of ``trilemma/data/benchmarks.csv`` (or of ``text``, the same columns)."""
    if text is None:
        text = resources.files("trilemma.data").joinpath("benchmarks.csv").read_text("utf-8")
    return [
        Row(
            r["model"],
            r["family"],
            float(r["params"]),
            float(r["tokens"]),
            r["benchmark"],
            r["setting"],
            float(r["score"]) / 100.0,
            r["source"],
        )
        for r in csv.DictReader(text.splitlines())
    ]


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch not in "-_ ")


def published_scores(model: str) -> list[Any]:
    """The published scores of ``model`` (a preset name) in trilemma/data/benchmarks.csv, one per benchmark
    of BENCHMARKS in its order (the first row listed), matched on the name with case, '-', '_' and spaces
    ignored ("llama3.1-8b" is "Llama-3.1-8B"); [] where none is shipped."""
    rows = [r for r in _shipped_rows() if _key(r.model) == _key(model)]
    return [r for b in BENCHMARKS if (r := next((x for x in rows if x.benchmark == b), None))]


@cache
def _shipped_rows() -> tuple[Any, ...]:
    return tuple(load_rows())


def published_line(model: str, role: str) -> str | None:
    """'the base model llama3-8b's published scores: MMLU 66.6 (5-shot), ARC-C 78.6 (25-shot MC) — Meta
    Llama 3 model card …': ``role`` names the model; None where none is shipped."""
    rows = published_scores(model)
    if not rows:
        return None
    scores = ", ".join(
        f"{BENCHMARKS[r.benchmark].label} {100 * r.score:.1f} ({r.setting})" for r in rows
    )
    sources = "; ".join(dict.fromkeys(r.source for r in rows))
    return f"{role} {model}'s published scores: {scores} ({sources})"


def fit_one(rows: list[Row], chance: float) -> tuple[float, float, float, float]:
    """Least-squares (k, x0, γ, ceiling) of the sigmoid on ``rows`` of one benchmark."""
    from scipy.optimize import curve_fit

    n = np.array([r.params for r in rows])
    d = np.array([r.tokens for r in rows])
    y = np.array([r.score for r in rows])

    def f(nd: np.ndarray, k: float, x0: float, gamma: float, ceiling: float) -> np.ndarray:
        x = capability_index(nd[0], nd[1], gamma)
        return expected_accuracy(x, k, x0, chance, ceiling)

    p, _ = curve_fit(f, np.vstack([n, d]), y, p0=_P0, bounds=(_LOW, _HIGH), maxfev=20000)
    return float(p[0]), float(p[1]), float(p[2]), float(p[3])


def lofo(rows: list[Row], chance: float) -> list[dict[str, Any]]:
    """Each family left out in turn: the fit on the others predicts its rows. One dict per held-out row:
    model, family, observed, predicted (fractions) and the index shift that would make them equal."""
    out = []
    for fam in sorted({r.family for r in rows}):
        train = [r for r in rows if r.family != fam]
        k, x0, gamma, ceiling = fit_one(train, chance)
        for r in (r for r in rows if r.family == fam):
            x = capability_index(r.params, r.tokens, gamma)
            pred = float(expected_accuracy(x, k, x0, chance, ceiling))
            out.append(
                {
                    "model": r.model,
                    "family": fam,
                    "observed": r.score,
                    "predicted": pred,
                    "shift": index_shift(r.score, x, k, x0, chance, ceiling),
                }
            )
    return out


def fit_benchmark(rows: list[Row], name: str) -> dict[str, Any]:
    """The shipped constants of one benchmark: the fit on all its rows, the 10th/90th percentiles of
    leave-one-family-out index shifts, whose spread ±Z80·sd is the 80% band (the between-family spread,
    outliers included), and the held-out errors in points."""
    spec = BENCHMARKS[name]
    mine = [r for r in rows if r.benchmark == name and r.setting in spec.settings]
    k, x0, gamma, ceiling = fit_one(mine, spec.chance)
    held = lofo(mine, spec.chance)
    shifts = np.array([h["shift"] for h in held])
    err = np.array([abs(h["predicted"] - h["observed"]) * 100 for h in held])
    return {
        "k": k,
        "x0": x0,
        "gamma": gamma,
        "ceiling": ceiling,
        "shift_sd": float(np.std(shifts)),
        "lofo_median_abs_error_points": float(np.median(err)),
        "lofo_mean_abs_error_points": float(np.mean(err)),
        # the half-width that holds 80% of held-out errors: the band's floor near chance or ceiling
        "lofo_p80_abs_error_points": float(np.quantile(err, 0.8)),
        "rows": len(mine),
        "families": len({r.family for r in mine}),
        # the range of tokens per parameter the rows cover: outside it the curve is extrapolated
        "tokens_per_param_min": float(min(r.tokens / r.params for r in mine)),
        "tokens_per_param_max": float(max(r.tokens / r.params for r in mine)),
    }


def fit_all(rows: list[Row] | None = None, exclude_families: Iterable[str] = ()) -> dict[str, Any]:
    """Every benchmark's constants, fitted on ``rows`` (default: the shipped CSV) without the families
    in ``exclude_families`` (for held-out checks)."""
    drop = set(exclude_families)
    rows = [r for r in (load_rows() if rows is None else rows) if r.family not in drop]
    return {name: fit_benchmark(rows, name) for name in BENCHMARKS}


HEADER = (
    "# Benchmark curves fitted on src/trilemma/data/benchmarks.csv (published scores, each row sourced).\n"
    "# Regenerate with: python scripts/fit_benchmarks.py\n"
    "# Form: trilemma.quality.benchmarks.expected_accuracy; band: ±1.2816 standard deviations of the\n"
    "# leave-one-family-out shifts of the capability index (shift_sd, log10 FLOP units).\n"
)


def backtest(exclude_families: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Leave-one-family-out errors per benchmark, refitted now (needs scipy): the median and mean
    absolute error in accuracy points, the rows and the families."""
    keys = ("lofo_median_abs_error_points", "lofo_mean_abs_error_points", "rows", "families")
    return {n: {k: c[k] for k in keys} for n, c in fit_all(None, exclude_families).items()}
