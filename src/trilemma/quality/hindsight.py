"""The best fit chosen with the answer in hand: what a perfect choice among the fits would reach.

Not a method (it reads the held-out losses it is scored on); validate --kind quality prints it beside
the candidates so that a floor on the extrapolation error can be told apart into what the fits can
express and what a choice made from the small runs can find. Every member — Hoffmann's additive law
free, with β = α and with α = β = 0.35, on total N and, where the runs give it, on non-embedding N
(Kaplan et al. 2020 §2.1), and Kaplan's non-separable form — is fitted on a suite's fitted runs
wherever the runs outnumber its constants, and the one nearest the held-out losses is reported
(docs/derivations.md, "What a perfect choice would reach").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trilemma.quality.extrapolate import NON_EMBEDDING, _fits, _forms
from trilemma.quality.forms import chinchilla_loss


def nonembedding_predictions(
    n_nonembedding: Any,
    d: Any,
    loss: Any,
    n_at: Any,
    d_at: Any,
    fitted: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, list[float]]:
    """Each additive form the runs can take, fitted on runs of ``n_nonembedding`` non-embedding
    parameters, D tokens and their losses (the runs outnumbering its constants), predicting the loss
    (same unit) at (``n_at`` non-embedding parameters, ``d_at`` tokens); named as the pool names them
    ("free (non-embedding)"); ``fitted``: constants already fitted on these runs, by that name."""
    n, d, loss, n_at, d_at = (np.asarray(v, float) for v in (n_nonembedding, d, loss, n_at, d_at))
    out: dict[str, list[float]] = {}
    for fix, form, free in _forms(d):
        name = f"{form} ({NON_EMBEDDING})"
        if n.size > free:
            c = (fitted or {}).get(name) or _fits(n, d, loss, fix)
            out[name] = chinchilla_loss(c, n_at, d_at).tolist()
    return out


def best_member(predictions: Mapping[str, Any], loss: Any) -> tuple[str, float]:
    """(name, median |relative error|) of the member whose predictions lie nearest ``loss`` (the same
    runs, same unit): the lowest median |prediction/loss − 1|, the first listed on a tie."""
    loss = np.asarray(loss, float)
    errors = {
        k: float(np.median(np.abs(np.asarray(p, float) / loss - 1.0)))
        for k, p in predictions.items()
    }
    name = min(errors, key=errors.__getitem__)
    return name, errors[name]
