"""80% bands built to cover, and their coverage, from leave-one-source-out (LOSO) residuals.

A residual is r = log(predicted / reported) with the sign of a duration for time (a rate's sign
flipped: ``Prediction.time_log_ratio``) and of a size for memory. A band on a prediction p is
[p·exp(−q_hi), p·exp(−q_lo)]: the reported value lies inside exactly when q_lo ≤ r ≤ q_hi.

Each kind (runs, throughput, memory) gets its own (q_lo, q_hi), each side on its own (the residuals
are skewed), by split conformal prediction (Vovk, Gammerman & Shafer 2005, *Algorithmic Learning in a
Random World*; Lei, G'Sell, Rinaldo, Tibshirani & Wasserman 2018, "Distribution-free predictive
inference for regression", JASA 113:1094, §2.2): with m calibration residuals, the lower end is the
⌊(m+1)·α/2⌋-th smallest and the upper the ⌈(m+1)·(1−α/2)⌉-th (clipped to the smallest / largest when
m is too small for the guarantee). The calibration residuals are LOSO ones: the constants that made
them never saw the row's source.

Rows of one source share its errors (one paper's cluster, its framework), so rows are not exchangeable
across sources; sources are. A kind measured by fewer than ``MIN_SOURCES`` sources cannot show its
source-to-source spread, so its band is built on two levels (Dunn, Wasserman & Ramdas 2023,
"Distribution-free prediction sets for two-layer hierarchical models", JASA 118:2491, arXiv:2009.07212,
pooling within-group deviations): r = centre of the kind + shift of the source + deviation within the
source, the shifts (source median less its kind's centre) borrowed from every kind's sources, the
deviations from this kind's rows; the quantiles of all their sums, the conformal index taken over the
number of sources (the exchangeable unit). The kind's centre is itself the median of its own k sources,
so the borrowed shifts are widened by √(1 + 1/k): a new source's offset from a centre estimated on k
sources (Higgins, Thompson & Spiegelhalter 2009, JRSS A 172:137, the random-effects prediction interval).

Coverage (``coverage``): for each row, the band built without any row of its source (so its source
neither made the prediction nor the band), and whether the row's r lies inside.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

LEVEL = 0.8  # an 80% band
MIN_SOURCES = 3  # fewer sources of a kind: its source-to-source spread is borrowed from all kinds
KINDS = ("runs", "throughput", "memory")
#: the estimate's band on a whole run's time (and GPU-hours, $, energy, CO2): outward of these kinds'
TIME_BAND_KINDS = ("runs", "throughput")


@dataclass(frozen=True)
class Residual:
    kind: str  # runs, throughput, memory
    group: str  # the row's source (the leave-one-source-out unit)
    r: float  # log(predicted / reported), signed as a duration (time) or a size (memory)


@dataclass(frozen=True)
class Band:
    """(q_lo, q_hi) of log residuals: prediction p has the band [p·exp(−q_hi), p·exp(−q_lo)]."""

    q_lo: float
    q_hi: float
    n: int  # rows it was built from
    sources: int
    method: str  # "conformal" (rows) or "two-level" (sources borrowed)

    def contains(self, r: float) -> bool:
        return self.q_lo <= r <= self.q_hi


def _conformal_ends(values: np.ndarray, n_units: int, level: float = LEVEL) -> tuple[float, float]:
    """The split-conformal ends of sorted-able ``values`` (Lei et al. 2018 §2.2, each side at (1−level)/2),
    the index taken over ``n_units`` exchangeable units (rows, or sources): as a quantile level,
    ⌊(n+1)·a⌋/n and ⌈(n+1)·(1−a)⌉/n, a = (1 − level)/2, clipped to [0, 1]."""
    a = round(
        (1 - level) / 2, 9
    )  # 0.1, not 0.09999999999999998: (n+1)·a must not fall below a whole number
    k_lo, k_hi = (
        math.floor(round((n_units + 1) * a, 9)),
        math.ceil(round((n_units + 1) * (1 - a), 9)),
    )
    s = np.sort(values)
    if n_units == len(s):  # rows are the units: order statistics
        return float(s[max(1, k_lo) - 1]), float(s[min(n_units, k_hi) - 1])
    lo, hi = min(1.0, max(0.0, k_lo / n_units)), min(1.0, max(0.0, k_hi / n_units))
    return float(np.quantile(s, lo)), float(np.quantile(s, hi))


def kind_band(res: Iterable[Residual], kind: str, without: str | None = None) -> Band | None:
    """The 80% band of one kind from residuals (without source ``without``); None when it has no rows.
    The band always holds r = 0 (the point estimate lies inside its own band)."""
    pool = [x for x in res if x.group != without]
    mine = [x for x in pool if x.kind == kind]
    if not mine:
        return None
    own_sources = {x.group for x in mine}
    if len(own_sources) >= MIN_SOURCES:
        lo, hi = _conformal_ends(np.array([x.r for x in mine]), len(mine))
        method = "conformal"
    else:  # two levels: centre + borrowed source shift + this kind's within-source deviation
        by_src: dict[tuple[str, str], list[float]] = defaultdict(list)
        for x in pool:
            by_src[(x.kind, x.group)].append(x.r)
        med = {k: float(np.median(v)) for k, v in by_src.items()}
        centre = {k: float(np.median([m for (kk, _), m in med.items() if kk == k])) for k, _ in med}
        # the centre is the median of this kind's own k sources, each with its own shift: a new source lies
        # off it by its shift less their mean, variance τ²·(1 + 1/k), so the borrowed shifts are widened by
        # √(1 + 1/k) (the random-effects prediction interval, Higgins, Thompson & Spiegelhalter 2009,
        # "A re-evaluation of random-effects meta-analysis", JRSS A 172:137, §3.3: τ² + SE(μ̂)², SE² = τ²/k)
        shifts = np.array([m - centre[k] for (k, _), m in med.items()]) * math.sqrt(
            1.0 + 1.0 / len(own_sources)
        )
        dev = np.array([x.r - med[(x.kind, x.group)] for x in mine])
        sums = (centre[kind] + shifts[:, None] + dev[None, :]).ravel()
        lo, hi = _conformal_ends(sums, len(shifts))
        method = "two-level"
    return Band(min(lo, 0.0), max(hi, 0.0), len(mine), len(own_sources), method)


def outward(a: Band | None, b: Band | None) -> Band | None:
    """The band that holds both (each side the wider): a whole run's time errs at least as a step's."""
    if a is None or b is None:
        return a or b
    return Band(
        min(a.q_lo, b.q_lo),
        max(a.q_hi, b.q_hi),
        a.n + b.n,
        a.sources + b.sources,
        a.method if a.method == b.method else f"{a.method}+{b.method}",
    )


def named_bands(res: list[Residual], without: str | None = None) -> dict[str, Band | None]:
    """The bands an estimate prints: each kind's, and ``time`` (a whole run: outward of runs, throughput)."""
    out = {k: kind_band(res, k, without) for k in KINDS}
    out["time"] = outward(*(out[k] for k in TIME_BAND_KINDS))
    return out


#: which bands are checked on which kind's rows (the time band is checked on both time kinds)
CHECKED = {"runs": ("runs", "time"), "throughput": ("throughput",), "memory": ("memory",)}


def coverage(res: list[Residual]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per kind and band: the share of the kind's rows whose r lies inside the band built without the
    row's source (``{kind: {band: {"coverage", "n", "inside"}}}``); kinds without rows are left out."""
    per_source = {g: named_bands(res, without=g) for g in sorted({x.group for x in res})}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, names in CHECKED.items():
        mine = [x for x in res if x.kind == kind]
        if not mine:
            continue
        out[kind] = {}
        for name in names:
            inside = [b.contains(x.r) for x in mine if (b := per_source[x.group][name]) is not None]
            out[kind][name] = {
                "coverage": float(np.mean(inside)) if inside else None,
                "n": len(inside),
                "inside": int(sum(inside)),
            }
    return out


def residuals_from_rows(rows: list[dict[str, Any]]) -> list[Residual]:
    """LOSO residuals of calibrated.toml's stored rows (``trilemma.presets.calibration_rows``)."""
    from trilemma.validate import MEMORY_METRICS
    from trilemma.validate.predict import DURATION_METRICS

    out = []
    for r in rows:
        p = r.get("loso_predicted")
        if p is None or not p > 0:
            continue
        x = math.log(p / r["reported"])
        keep = r["metric"] in MEMORY_METRICS or r["metric"] in DURATION_METRICS
        out.append(Residual(r["kind"], r["group"], x if keep else -x))
    return out


def residuals_from_predictions(preds: Iterable[Any]) -> list[Residual]:
    """LOSO residuals of ``trilemma.validate.predict.Prediction`` objects (the LOSO predicted value)."""
    from trilemma.validate import MEMORY_METRICS

    out = []
    for p in preds:
        r = p.log_ratio if p.case.metric in MEMORY_METRICS else p.time_log_ratio
        if r is not None:
            out.append(Residual(p.case.kind, p.case.group, r))
    return out


__all__ = [
    "CHECKED",
    "KINDS",
    "LEVEL",
    "MIN_SOURCES",
    "Band",
    "Residual",
    "coverage",
    "kind_band",
    "named_bands",
    "outward",
    "residuals_from_predictions",
    "residuals_from_rows",
]
