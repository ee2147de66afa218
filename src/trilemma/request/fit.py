"""``FitRequest``: every input of `trilemma fit` (a runs file → a fitted law), each field written
once.

The bounds of the fit's own settings (bootstrap refits, interval level, starts, held-out share,
seed) are stated here: no spec holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from trilemma.errors import InputError
from trilemma.request.field import Request, option
from trilemma.specs.enums import LossUnit, NCounts

#: the most bootstrap refits (each is a full fit)
MAX_BOOTSTRAP = 100_000
#: the largest held-out share of the model sizes (the fit keeps at least half)
MAX_HOLDOUT = 0.5


def _given(field: str, allowed: str) -> Callable[[Any], Any]:
    """A text field that, when given, is not blank."""

    def parse(v: str) -> str:
        if not v.strip():
            raise InputError(field, v, allowed)
        return v

    return parse


def _column(field: str) -> Callable[[Any], Any]:
    return _given(field, "a column name of the runs file")


def _bootstrap(v: int) -> int:
    if not 0 <= v <= MAX_BOOTSTRAP:
        raise InputError("bootstrap", v, f"a whole number from 0 to {MAX_BOOTSTRAP}")
    return v


def _ci(v: float) -> float:
    if not 0 < v < 1:
        raise InputError("ci", v, "a level between 0 and 1, e.g. 0.8")
    return v


def _holdout(v: float) -> float:
    if not 0 <= v <= MAX_HOLDOUT:
        raise InputError("holdout", v, f"a share between 0 and {MAX_HOLDOUT}")
    return v


def _seed(v: int) -> int:
    if not 0 <= v < 2**32:
        raise InputError("seed", v, f"a whole number from 0 to {2**32 - 1}")
    return v


def _starts(v: int) -> int:
    from trilemma.quality.objective import GRID_A, GRID_ALPHA, GRID_B, GRID_BETA, GRID_E

    grid = len(GRID_A) * len(GRID_B) * len(GRID_E) * len(GRID_ALPHA) * len(GRID_BETA)  # 4500
    if not 0 <= v <= grid:
        raise InputError(
            "starts",
            v,
            f"0 (every grid point) or a number of starts up to {grid} (the grid's size)",
        )
    return v


def _method(v: str) -> str:
    from trilemma.quality.fit import check_method

    return check_method(v)


class FitRequest(Request):
    """Fit L = E + A/N^alpha + B/D^beta to your runs (Hoffmann 2022 procedure) with bootstrap
    intervals."""

    VERB: ClassVar[str] = "fit"

    runs: str = option(
        ...,
        "--runs",
        help="CSV or JSONL file, one run per row: parameters N, tokens D, final loss",
        argument=True,
    )
    n_col: str | None = option(
        None, "--n-col", help="column holding N (default: N, any case)", parse=_column("n-col")
    )
    d_col: str | None = option(
        None,
        "--d-col",
        help="column holding D, training tokens (default: D)",
        parse=_column("d-col"),
    )
    loss_col: str | None = option(
        None,
        "--loss-col",
        help="column holding the final loss (default: loss)",
        parse=_column("loss-col"),
    )
    out: str | None = option(
        None,
        "--out",
        "-o",
        help="law file to write (default: RUNS with suffix .law.toml)",
        parse=_given("out", "a file path to write"),
    )
    name: str | None = option(
        None,
        "--name",
        help="name of the fitted law (default: the RUNS file stem)",
        parse=_given("name", "a name for the law"),
    )
    n_counts: NCounts = option(
        NCounts.TOTAL,
        "--n-counts",
        help="what N counts: total (with embeddings) or non-embedding",
        parse=lambda v: NCounts.parse(v, "n-counts"),
    )
    loss_unit: LossUnit = option(
        LossUnit.NATS_PER_TOKEN,
        "--loss-unit",
        help="nats/token or bits/byte",
        parse=lambda v: LossUnit.parse(v, "loss-unit"),
    )
    data: str | None = option(
        None, "--data", help="dataset the runs were trained/evaluated on (recorded)"
    )
    tokenizer: str | None = option(None, "--tokenizer", help="tokenizer of the runs (recorded)")
    bootstrap: int = option(
        200,
        "--bootstrap",
        help="bootstrap refits for the intervals (0: none)",
        kind="int",
        parse=_bootstrap,
    )
    ci: float = option(
        0.8,
        "--ci",
        help="interval level, e.g. 0.8 (10th-90th percentiles) or 0.95",
        kind="number",
        parse=_ci,
    )
    seed: int = option(0, "--seed", help="bootstrap seed", kind="int", parse=_seed)
    starts: int = option(
        64,
        "--starts",
        help="L-BFGS starts from the best points of Hoffmann's grid (0: all 4500)",
        kind="int",
        parse=_starts,
    )
    holdout: float = option(
        0.2,
        "--holdout",
        help="share of the largest model sizes held out for the leave-out check",
        kind="number",
        parse=_holdout,
    )
    method: str = option(
        "staged",
        "--method",
        help="staged: the law file's one fit; averaged: also the free, tied and literature-exponent "
        "forms averaged by held-out error, for extrapolating beyond the runs",
        parse=_method,
    )
    plot: str | None = option(
        None,
        "--plot",
        help="draw loss vs N and vs D with the fit to this image (needs matplotlib)",
    )
