"""Allocating a FLOP budget between parameters N and tokens D under a law (the derivations:
trilemma.quality.optimal's docstring): the closed forms, the numeric search where there is none,
the band of N* over the law's samples, and the tokens that reach a target loss."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trilemma.errors import InfeasibleError, InputError
from trilemma.quality.effective import loss_at
from trilemma.quality.forms import tokens_for_loss as invert
from trilemma.quality.laws import DEFAULT_LEVEL, Form, Law
from trilemma.units import SI

RATIO_MIN, RATIO_MAX, GRID = 1e-2, 1e5, 1601  # tokens/parameter searched by the numeric optimum
N_MIN, N_MAX = 1e4, 1e15  # parameters searched by the inference-aware optimum
#: the largest budget: C = 6·N·D at the most parameters searched and the most tokens a plan may train
#: (trilemma.specs.plan.Stage.tokens ≤ 10^18); beyond it the laws' terms overflow to NaN
FLOPS_MAX = 6.0 * N_MAX * SI["E"]


def closed_form(law: Law, c: Any, flops: float, kfac: float) -> tuple[Any, Any]:
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


def check_allocation(law: Law, n: float, d: float) -> None:
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


def golden(f: Any, lo: float, hi: float, iters: int = 80) -> float:
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


def numeric_optimum(
    law: Law, c: Any, flops: float, u: float | None, kfac: float
) -> tuple[Any, Any]:
    """(N*, D*) on a log grid of tokens/parameter, vectorised over samples (arrays (S,)) or not."""
    ratio = np.logspace(math.log10(RATIO_MIN), math.log10(RATIO_MAX), GRID)
    n = np.sqrt(flops / (6.0 * ratio))
    samples = np.ndim(next(iter(c.values()))) > 0
    cc = {k: (np.asarray(v)[:, None] if samples else v) for k, v in c.items()}
    loss = loss_at(law, cc, n, flops / (6.0 * n), u, kfac)
    i = np.argmin(loss, axis=-1)
    if samples:
        n_star = n[i]
        return n_star, flops / (6.0 * n_star)
    lo, hi = math.log(n[min(i + 1, GRID - 1)]), math.log(n[max(i - 1, 0)])
    x = golden(
        lambda t: float(loss_at(law, c, np.exp(t), flops / (6.0 * np.exp(t)), u, kfac)), lo, hi
    )
    return math.exp(x), flops / (6.0 * math.exp(x))


def n_band(law: Law, n: float, ns: np.ndarray) -> tuple[float, float]:
    """(low, high) of N* over the law's constant samples ``ns`` around the point ``n``; a draw whose
    allocation leaves a double's range (inf, 0, NaN) says nothing of the band and is left out."""
    ns = ns[np.isfinite(ns) & (ns > 0)]
    if not ns.size:
        return n, n
    if law.uncertainty is not None and law.uncertainty.kind == "range":
        return min(n, float(ns.min())), max(n, float(ns.max()))
    level = (law.uncertainty.level if law.uncertainty else None) or DEFAULT_LEVEL
    lo, hi = quantiles(ns, level)
    return min(lo, n), max(hi, n)


def quantiles(x: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


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


def min_total_flops(
    law: Law, target: float, d_inf: float, u: float | None, kfac: float
) -> tuple[float, float, float]:
    """(N, D_tr, total FLOPs) minimising 6·N·D_tr + 2·N·D_inf on L(N, D_tr) = target."""
    c = law.constants
    n = np.logspace(math.log10(N_MIN), math.log10(N_MAX), 1201)
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
        floor = float(loss_at(law, c, np.asarray(N_MAX), np.asarray(D_MAX), u, kfac))
        raise InfeasibleError(
            f"target loss {target:g} {law.loss_unit} is out of reach under {law.name}: even "
            f"{N_MAX:.0e} parameters on 1e18 tokens give {floor:.4f}"
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
    x = golden(f, lo, hi, iters=60)
    n_best = math.exp(x)
    d_best = float(tokens_for_loss(law, c, np.asarray([n_best]), target, u, kfac)[0])
    if not (math.isfinite(d_best) and f(x) <= total[i]):  # the grid point is as good
        n_best, d_best = float(n[i]), float(d[i])
    return n_best, d_best, 6.0 * n_best * d_best + 2.0 * n_best * d_inf
