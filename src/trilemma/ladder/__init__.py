"""`trilemma ladder`: scaling laws measured on real data, checked on a held-out run.

``run_ladder(out, ...) -> LadderResult`` plans a grid of small byte-level Llama-style models ×
token budgets (``plan``), trains each run with its own learning-rate schedule and a fixed
evaluation (``train``; the model, corpus and batches are the probe's), appends every finished run
to ``out/runs.jsonl`` as one line (``records``: O_APPEND, one write, an fcntl lock; resumable),
runs independent runs on parallel processes (``pool``), fits the law on all runs but the largest
model with ``trilemma fit``'s machinery, predicts the held-out run with its band and checks it
(``fit``), and draws loss against compute (``plot``).

Importing this package imports neither torch nor matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.ladder.result import LadderResult

__all__ = ["LadderResult", "run_ladder"]


def run_ladder(*args: Any, **kwargs: Any) -> LadderResult:
    """See :func:`trilemma.ladder.run.run_ladder`."""
    from trilemma.ladder.run import run_ladder as _run

    return _run(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "LadderResult":
        from trilemma.ladder.result import LadderResult

        return LadderResult
    raise AttributeError(name)
