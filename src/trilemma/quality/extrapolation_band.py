"""How far a plan lies beyond the runs a loss law was fitted on, and the least error its band carries there.

A law's band grows beyond its runs: σ² = σ₀² + (σ₁·x)² in log loss, x the e-folds beyond
(``trilemma.quality.predict.residual_sd``; Davison & Hinkley 1997 §6.3.3). Two things make x and σ₁:

- **the distance** is the most of ln(N/N_max), ln(D/D_max) and ln(C/C_max), C = 6·N·D (Kaplan et al.
  2020 §2.1): a run with both N and D near the top of the fitted ranges lies beyond every fitted run in
  compute although neither alone is beyond (the larger run of an IsoFLOP grid, 20x its compute: 0.7
  e-folds in N, 3.0 in compute);
- **σ₁ never below the published suites' own**: a user's runs measure σ₁ by refitting without their
  largest sizes (``fit_procedure.extrapolation_error``), a step shorter than the plans they are asked
  about and on few runs, often 0. The floor is what such fits did at ten times their compute on the
  loss suites of ``trilemma/data/losses.csv``: each suite fitted as ``trilemma fit`` fits (the staged
  fit) on its runs at most a tenth of its largest compute, σ₁² = max(0, mean r² − σ₀²) / mean x² from its
  held-out runs' log residuals r (by moments, as extrapolation_error), each source's median suite, and
  the root mean square over sources (docs/derivations.md, "How wide the band is beyond the runs").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

#: σ₁ floor, log loss per e-fold beyond the fitted runs: 7 sources of ``trilemma/data/losses.csv``
#: (``floor_from_suites`` over validate --kind quality's suites; a test recomputes it)
EXTRAPOLATION_FLOOR = 0.0197


def runs_range(n: Any, d: Any) -> dict[str, float]:
    """A law's ``[range]`` from its runs: N_min, N_max (parameters), D_min, D_max (tokens) and C_max,
    the largest run's compute 6·N·D (FLOP)."""
    n, d = np.asarray(n, float), np.asarray(d, float)
    return {
        "N_min": float(n.min()),
        "N_max": float(n.max()),
        "D_min": float(d.min()),
        "D_max": float(d.max()),
        "C_max": float(6.0 * (n * d).max()),  # C = 6·N·D (Kaplan 2020 §2.1)
    }


def e_folds_beyond(n: Any, d: Any, n_max: float, d_max: float | None, c_max: float | None) -> Any:
    """e-folds beyond the fitted runs (≥ 0): the most of ln(N/N_max), ln(D/D_max) and ln(6·N·D/C_max),
    each where its maximum is given (``d`` None: N alone). N parameters, D tokens, C FLOP."""
    n = np.asarray(n, float)
    x = np.log(n / n_max)
    if d is not None:
        d = np.asarray(d, float)
        if d_max is not None:
            x = np.maximum(x, np.log(d / d_max))
        if c_max is not None:
            x = np.maximum(x, np.log(6.0 * n * d / c_max))  # C = 6·N·D (Kaplan 2020 §2.1)
    return np.maximum(x, 0.0)


def suite_sd(r: Iterable[float], x: Iterable[float], in_sample_sd: float) -> float:
    """σ₁ from held-out runs' log residuals ``r`` at ``x`` e-folds beyond the fitted runs, σ₀ the
    in-sample log residual: max(0, mean r² − σ₀²) / mean x², square-rooted (0 where no run lies beyond);
    a suite's, and a user's runs' own (``fit_procedure.extrapolation_error``)."""
    r, x = np.asarray(list(r), float), np.asarray(list(x), float)
    mx2 = float(np.mean(x * x))
    if mx2 <= 0:
        return 0.0
    return float(np.sqrt(max(0.0, float(np.mean(r * r)) - in_sample_sd**2) / mx2))


def floor_from_suites(
    suites: Mapping[str, Mapping[str, Any]], leave_out: str | None = None
) -> float:
    """The σ₁ floor over ``suites`` ({suite: {"source", "sd"}}, ``sd`` a suite's ``suite_sd``): each
    source's median suite, then the root mean square over sources; ``leave_out``: a source not used."""
    by: dict[str, list[float]] = {}
    for s in suites.values():
        if s["source"] != leave_out:
            by.setdefault(str(s["source"]), []).append(float(s["sd"]))
    if not by:
        return 0.0
    return float(np.sqrt(np.mean([float(np.median(v)) ** 2 for v in by.values()])))
