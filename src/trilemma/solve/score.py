"""The quality pin of a solve in a benchmark (``--target-score BENCHMARK=SCORE``) as a window of training
tokens per configuration: at least the tokens at which the lower end of the benchmark's 80% band reaches
the score, at most the tokens per parameter of the published rows the curve was fitted on (beyond them it
is not asked: trilemma.quality.benchmarks). N is the configuration's total parameters (the searched
shapes are dense)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.quality.benchmarks import (
    BENCHMARKS,
    constants,
    low_end,
    most_tokens,
    tokens_for_score,
)
from trilemma.units import fmt_count

#: (benchmark, score as a fraction), or None: no target score
Target = tuple[str, float] | None


def fewest_tokens(target: Target, n: Any, d_min: float, d_max: float) -> np.ndarray:
    """Per model of ``n`` parameters, the fewest tokens that meet ``target`` (inf: none within d_max or
    the published rows' range); zeros without a target."""
    n = np.asarray(n, dtype=float)
    if target is None:
        return np.zeros(n.shape)
    return tokens_for_score(target[0], target[1], n, d_min=d_min, d_max=d_max)


def most(target: Target, n: Any) -> np.ndarray | float:
    """The most tokens that still meet ``target`` for models of ``n`` parameters (inf without one)."""
    return np.inf if target is None else most_tokens(target[0], n)


def meets(target: Target, n: Any, tokens: Any, d_min: float, d_max: float) -> np.ndarray:
    """Whether ``tokens`` meet ``target`` for models of ``n`` parameters (all True without one)."""
    d = np.asarray(tokens, dtype=float)
    if target is None:
        return np.ones(d.shape, dtype=bool)
    need = fewest_tokens(target, n, d_min, d_max)
    return (d >= need * (1 - 1e-9)) & (d <= most_tokens(target[0], n) * (1 + 1e-9))


def best_reached(target: Target, n: Any, tokens: Any) -> float:
    """The highest lower band end (fraction) that models of ``n`` parameters reach on at most ``tokens``
    tokens within the published rows' tokens per parameter (0 where none is within them)."""
    if target is None:
        return 0.0
    name = target[0]
    c = constants()[name]
    n = np.asarray(n, dtype=float)
    d = np.minimum(np.asarray(tokens, dtype=float), most_tokens(name, n))
    ok = d >= c["tokens_per_param_min"] * n
    return float(np.max(np.where(ok, low_end(name, n, d), 0.0), initial=0.0))


def goal(target: Target) -> str:
    """'MMLU ≥ 65% (80% band's lower end)': the target in words."""
    if target is None:
        return ""
    return f"{BENCHMARKS[target[0]].label} ≥ {100 * target[1]:g}% (80% band's lower end)"


def explain(
    target: Target,
    n: np.ndarray,
    need: np.ndarray,
    cap: np.ndarray,
    d_max: float,
    fixed: float | None,
    moves: list[str],
) -> str:
    """Why no plan meets ``target`` (the fewest tokens ``need`` per configuration, inf where none), in
    one line: out of reach of every model, the tokens --tokens ``fixed`` falls short by, or what the
    pinned money or time must give (``moves``) and the best the pins reach on ``cap`` tokens."""
    what = goal(target)
    if not np.isfinite(need).any():
        top = 100 * best_reached(target, n, np.full(n.shape, d_max))
        return (
            f"{what} is out of reach of the models searched (at most {top:.1f}% within the "
            "published rows' tokens per parameter): allow larger models (--params) or lower it"
        )
    top = 100 * best_reached(target, n, cap)
    if fixed:
        return (
            f"{what} needs {fmt_count(float(need.min()))} tokens or more with the models searched "
            f"(and no more than the published rows' tokens per parameter); {fmt_count(fixed)} "
            f"tokens reach {top:.1f}% at best"
        )
    return "; ".join([*moves, f"the pinned time and money reach {top:.1f}% at best"])
