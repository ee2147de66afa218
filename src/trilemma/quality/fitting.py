"""``run_fit``: `trilemma fit` as a library call: a runs file → a fitted law written beside it.

It takes a :class:`trilemma.request.FitRequest` (already parsed and bounded) and returns the
document ``trilemma fit --json`` prints; the plot is drawn by ``draw`` (the CLI passes
``trilemma.report.fit_plot.plot_fit``: presentation stays in report/).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trilemma.errors import InputError
from trilemma.fileio import check_output

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.quality.fit import FitReport
    from trilemma.request.fit import FitRequest


def run_fit(req: FitRequest, draw: Callable[[FitReport, str], Any] | None = None) -> dict[str, Any]:
    """Fit the law to ``req.runs``, write it to ``req.out`` (default: the runs file with suffix
    ``.law.toml``) and draw it to ``req.plot`` with ``draw``; the fit's document with ``law_path``
    and ``plot_path``. Output paths are checked before the fit and its bootstrap, not after."""
    from trilemma.quality.fit import fit_runs
    from trilemma.quality.laws import write_law
    from trilemma.quality.runs import read_runs

    if req.plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise InputError("plot", req.plot, "matplotlib installed (pip install 'trilemma[plot]')")
    table = read_runs(req.runs, req.n_col, req.d_col, req.loss_col)
    out_path = Path(req.out) if req.out else Path(req.runs).with_suffix(".law.toml")
    check_output("out", out_path, [req.runs])
    if req.plot is not None:
        check_output("plot", req.plot, [req.runs])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        report = fit_runs(
            table,
            name=req.name or Path(req.runs).stem,
            n_counts=req.n_counts,
            loss_unit=req.loss_unit,
            data=req.data or "unknown data (say with --data)",
            tokenizer=req.tokenizer or "unknown tokenizer (say with --tokenizer)",
            n_boot=req.bootstrap,
            level=req.ci,
            seed=req.seed,
            starts=req.starts,
            holdout=req.holdout,
            method=req.method,
        )
        write_law(report.law, out_path)
        plot_path = str(draw(report, req.plot)) if req.plot and draw is not None else None
    doc = report.to_dict()
    doc["law_path"], doc["plot_path"] = str(out_path), plot_path
    return doc
