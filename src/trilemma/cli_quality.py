"""`trilemma fit`: a typer command function, registered by ``trilemma.cli``.

    app.command("fit")(fit)

A few lines over ``trilemma.quality``; bad input raises InputError (exit 2). ``--json`` prints exactly
one document with a ``schema`` and a ``warnings`` list. (`trilemma optimal` is generated from
trilemma.request.OptimalRequest in trilemma.cli.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import typer
from trilemma.errors import InputError
from trilemma.fileio import check_output
from trilemma.specs.enums import LossUnit, NCounts


def fit(
    runs: str = typer.Argument(
        ..., help="CSV or JSONL file, one run per row: parameters N, tokens D, final loss"
    ),
    n_col: str | None = typer.Option(
        None, "--n-col", help="column holding N (default: N, any case)"
    ),
    d_col: str | None = typer.Option(
        None, "--d-col", help="column holding D, training tokens (default: D)"
    ),
    loss_col: str | None = typer.Option(
        None, "--loss-col", help="column holding the final loss (default: loss)"
    ),
    out: str | None = typer.Option(
        None, "--out", "-o", help="law file to write (default: RUNS with suffix .law.toml)"
    ),
    name: str | None = typer.Option(
        None, "--name", help="name of the fitted law (default: the RUNS file stem)"
    ),
    n_counts: str = typer.Option(
        "total", "--n-counts", help="what N counts: total (with embeddings) or non-embedding"
    ),
    loss_unit: str = typer.Option("nats/token", "--loss-unit", help="nats/token or bits/byte"),
    data: str | None = typer.Option(
        None, "--data", help="dataset the runs were trained/evaluated on (recorded)"
    ),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="tokenizer of the runs (recorded)"
    ),
    n_boot: int = typer.Option(
        200, "--bootstrap", help="bootstrap refits for the intervals (0: none)"
    ),
    level: float = typer.Option(
        0.8, "--ci", help="interval level, e.g. 0.8 (10th-90th percentiles) or 0.95"
    ),
    seed: int = typer.Option(0, "--seed", help="bootstrap seed"),
    starts: int = typer.Option(
        64, "--starts", help="L-BFGS starts from the best points of Hoffmann's grid (0: all 4500)"
    ),
    holdout: float = typer.Option(
        0.2, "--holdout", help="share of the largest model sizes held out for the leave-out check"
    ),
    plot: str | None = typer.Option(
        None, "--plot", help="draw loss vs N and vs D with the fit to this image (needs matplotlib)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """Fit L = E + A/N^alpha + B/D^beta to your runs (Hoffmann 2022 procedure) with bootstrap intervals."""
    from trilemma.quality.fit import fit_runs
    from trilemma.quality.laws import write_law
    from trilemma.quality.runs import read_runs
    from trilemma.report.fit_plot import plot_fit

    counts, unit = NCounts.parse(n_counts, "n-counts"), LossUnit.parse(loss_unit, "loss-unit")
    if not 0 <= n_boot <= 100_000:
        raise InputError("bootstrap", n_boot, "a whole number from 0 to 100000")
    if not 0 < level < 1:
        raise InputError("ci", level, "a level between 0 and 1, e.g. 0.8")
    if not 0 <= holdout <= 0.5:
        raise InputError("holdout", holdout, "a share between 0 and 0.5")
    from trilemma.quality.objective import GRID_A, GRID_ALPHA, GRID_B, GRID_BETA, GRID_E

    grid_points = (
        len(GRID_A) * len(GRID_B) * len(GRID_E) * len(GRID_ALPHA) * len(GRID_BETA)
    )  # Hoffmann's 4500
    if not 0 <= starts <= grid_points:
        raise InputError(
            "starts",
            starts,
            f"0 (every grid point) or a number of starts up to {grid_points} (the grid's size)",
        )
    if not 0 <= seed < 2**32:
        raise InputError("seed", seed, "a whole number from 0 to 4294967295")
    if plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise InputError("plot", plot, "matplotlib installed (pip install 'trilemma[plot]')")
    for flag, v in (
        ("out", out),
        ("n-col", n_col),
        ("d-col", d_col),
        ("loss-col", loss_col),
        ("name", name),
    ):
        if v is not None and not str(v).strip():
            raise InputError(
                flag,
                v,
                {"out": "a file path to write", "name": "a name for the law"}.get(
                    flag, "a column name of the runs file"
                ),
            )
    table = read_runs(runs, n_col, d_col, loss_col)
    out_path = Path(out) if out else Path(runs).with_suffix(".law.toml")
    check_output("out", out_path, [runs])  # before the fit and its bootstrap, not after
    if plot is not None:
        check_output("plot", plot, [runs])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        report = fit_runs(
            table,
            name=name or Path(runs).stem,
            n_counts=counts,
            loss_unit=unit,
            data=data or "unknown data (say with --data)",
            tokenizer=tokenizer or "unknown tokenizer (say with --tokenizer)",
            n_boot=n_boot,
            level=level,
            seed=seed,
            starts=starts,
            holdout=holdout,
        )
        write_law(report.law, out_path)
        plot_path = str(plot_fit(report, plot)) if plot else None
    doc = report.to_dict()
    doc["law_path"], doc["plot_path"] = str(out_path), plot_path
    if as_json:
        from trilemma.report.jsonout import print_json

        print_json(doc)
    else:
        from trilemma.report.quality import print_fit

        print_fit(doc)
