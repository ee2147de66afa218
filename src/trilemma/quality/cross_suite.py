"""Form weights learnt across suites (measured, not used): the ``cross`` candidate of validate --kind quality.

A suite's own backtest (``trilemma.quality.extrapolate``) scores each form on runs at most 10× beyond
its fitted part, and cannot see a form that fails further out (the Gemstones, Li et al. 2025's runs).
Which form extrapolates well may instead be shared across datasets. Here each form — Hoffmann's
additive law free, with β = α, with α = β = 0.35, and Kaplan et al. 2020's non-separable form
(``trilemma.quality.fit_kaplan``) — is fitted on a suite's fitted runs and weighted 1/ē², ē its median
held-out error over the suites of *other* sources (floored at ``ERROR_FLOOR`` as the backtest's e is):
forecasts combined with weights inverse to their squared error, Bates & Granger 1969. Evaluated
leave-one-source-out, so neither a suite's held-out runs nor its siblings' (one source's suites share
a recipe) set its weights (docs/derivations.md, the seventh candidate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trilemma.quality.extrapolate import ERROR_FLOOR, _fits, _forms
from trilemma.quality.fit_kaplan import FREE as KAPLAN_FREE
from trilemma.quality.fit_kaplan import fit_kaplan
from trilemma.quality.forms import chinchilla_loss, kaplan_loss

KAPLAN = "kaplan"


def form_predictions(
    n: Any,
    d: Any,
    loss: Any,
    n_at: Any,
    d_at: Any,
    kaplan: Mapping[str, float] | None = None,
    fitted: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, list[float]]:
    """Each form fitted on runs of N total parameters, D tokens and their losses, predicting the loss
    (same unit) at (``n_at``, ``d_at``): the additive forms the runs can take (one D: free and literature)
    with fewer constants than runs, and Kaplan's where D varies and the runs outnumber its 5 constants
    (``kaplan``, ``fitted``: constants already fitted on these runs, by form name, used as they are)."""
    n, d, loss, n_at, d_at = (np.asarray(v, float) for v in (n, d, loss, n_at, d_at))
    out: dict[str, list[float]] = {}
    for fix, name, free in _forms(d):
        if n.size > free:
            c = (fitted or {}).get(name) or _fits(n, d, loss, fix)
            out[name] = chinchilla_loss(c, n_at, d_at).tolist()
    if np.ptp(np.log(d)) > 1e-9 and n.size > KAPLAN_FREE:
        c = kaplan if kaplan is not None else fit_kaplan(n, d, loss)
        out[KAPLAN] = kaplan_loss(c, n_at, d_at).tolist()
    return out


def leave_one_suite_out(
    predictions: Mapping[str, Mapping[str, list[float]]],
    losses: Mapping[str, list[float]],
    groups: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """For each suite (keys of both maps: its forms' held-out predictions and the held-out losses), the
    forms' predictions weighted 1/ē², ē each form's median |relative error| over the suites of other
    sources (``groups``: each suite's source; without it every suite is its own; at least ERROR_FLOOR);
    a form no such suite scored is left out (all alike where none was). Returns each suite's
    ``weights`` and ``predicted`` losses."""
    group = dict(groups) if groups is not None else {s: s for s in predictions}
    errors = {
        s: {
            f: float(np.median(np.abs(np.asarray(p) / np.asarray(losses[s]) - 1.0)))
            for f, p in forms.items()
        }
        for s, forms in predictions.items()
    }
    out: dict[str, dict[str, Any]] = {}
    for s, forms in predictions.items():
        ebar = {}
        for f in forms:
            others = [errors[o][f] for o in errors if group[o] != group[s] and f in errors[o]]
            if others:
                ebar[f] = max(float(np.median(others)), ERROR_FLOOR)
        raw = {f: 1.0 / e**2 for f, e in ebar.items()} or dict.fromkeys(forms, 1.0)
        total = sum(raw.values())
        weights = {f: w / total for f, w in raw.items()}
        predicted = sum(
            (w * np.asarray(forms[f]) for f, w in weights.items()),
            start=np.zeros(len(losses[s])),
        )
        out[s] = {"weights": weights, "predicted": predicted.tolist()}
    return out
