"""Runs that parse but cannot be what their columns say, caught before a fit: a perplexity in the loss
column, N in two units, every row repeated. ``trilemma.quality.fit.fit_runs`` applies them to any table
of runs (the CLI's ``fit``, the ladder's, the Python API's)."""

from __future__ import annotations

import numpy as np

from trilemma.errors import InputError
from trilemma.quality.law import UNIFORM_LOSS_MAX
from trilemma.quality.runs import Runs

#: The smallest N a run may state: a Transformer with an embedding table has thousands of parameters
#: (the ladder's smallest model has 14k); a column below 1,000 is in millions or billions.
N_MIN = 1e3
#: The widest step between consecutive model sizes: ladders step by x1.5-4 (Hoffmann's 44M-16B, Kaplan's
#: 768-1.5B); three decades with no size between are two units in one column (125 meaning 125M beside
#: 1.3e9), not one ladder.
SIZE_GAP_MAX = 1e3


def plausible_runs(runs: Runs, loss_unit: str) -> tuple[Runs, list[str]]:
    """``runs`` checked for values that parse but cannot be what the column says, and without repeats.

    Refused (one line naming the row): a loss above a uniform guess's (perplexity given as loss), N below
    N_MIN (in millions), model sizes more than SIZE_GAP_MAX apart (two units in one column). Exact
    repeats of a row (N, D and loss alike) are dropped with a warning: the bootstrap would count one run
    many times and narrow the band.
    """

    top = UNIFORM_LOSS_MAX[str(loss_unit)]
    _refuse_first(
        runs,
        runs.loss > top,
        f"losses at most {top:.3g} {loss_unit} (a uniform guess over a million-token vocabulary; "
        "a perplexity is exp(loss): give its natural log)",
        runs.loss,
    )
    _refuse_first(
        runs,
        runs.n < N_MIN,
        f"N as a count of parameters, at least {N_MIN:,.0f} (125M, not 125)",
        runs.n,
    )
    sizes = np.unique(runs.n)
    steps = sizes[1:] / sizes[:-1]
    if steps.size and steps.max() > SIZE_GAP_MAX:
        i = int(steps.argmax())
        raise InputError(
            "runs",
            runs.source,
            f"N in one unit: model sizes jump from {sizes[i]:.4g} to {sizes[i + 1]:.4g} "
            f"(x{steps[i]:.3g}, more than x{SIZE_GAP_MAX:g}) with no size between; a ladder steps "
            "by x1.5-4 (are some rows in millions?)",
        )
    table = np.stack([runs.n, runs.d, runs.loss], axis=1)
    _, first = np.unique(table, axis=0, return_index=True)
    if len(first) == len(runs):
        return runs, []
    keep = np.sort(first)
    note = (
        f"{len(runs) - len(keep):,} repeated rows dropped (the same N, D and loss; {len(keep):,} "
        "runs kept): the bootstrap would count one run many times and narrow the band"
    )
    return runs.subset(keep), [note]


def _refuse_first(runs: Runs, bad: np.ndarray, allowed: str, values: np.ndarray) -> None:
    """InputError naming the first row where ``bad`` holds (1-based data row) and its value."""
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError("runs", runs.source, f"{allowed}; row {i + 1} has {values[i]:.6g}")
