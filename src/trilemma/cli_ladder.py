"""`trilemma ladder`: a thin layer over ``trilemma.ladder.run_ladder`` (registered in cli.py with
``app.command("ladder")(ladder)``). torch is imported only when the command runs."""

from __future__ import annotations

import sys

import typer

from trilemma.errors import InputError

__all__ = ["ladder"]


def _numbers(text: str | None, field: str, count: bool) -> list[float] | None:
    from trilemma.units import parse_count

    if text is None:
        return None
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        try:
            v = parse_count(part, field) if count else float(part)
        except ValueError:
            raise InputError(
                field, text, "comma-separated positive numbers, e.g. 5,10,20,40"
            ) from None
        if not v > 0:
            raise InputError(field, text, "comma-separated positive numbers")
        out.append(float(v))
    if not out:
        raise InputError(field, text, "comma-separated positive numbers")
    return out


def ladder(
    out: str = typer.Option(
        ..., "--out", "-o", help="directory for runs.jsonl (resumable), law.toml and ladder.json"
    ),
    data: list[str] | None = typer.Option(
        None,
        "--data",
        help="text files, a folder, or JSONL with a `text` "
        "field (repeatable); default: the Python standard library's source",
    ),
    sizes: str | None = typer.Option(
        None,
        "--sizes",
        help="model sizes, non-embedding parameters, e.g. "
        "14k,25k,40k,83k,200k; the largest is held out (at most 4x the next)",
    ),
    tokens_per_param: str | None = typer.Option(
        None,
        "--tokens-per-param",
        help="token budgets of the fit runs as tokens per parameter (default 5,10,20,40)",
    ),
    holdout_ratio: float | None = typer.Option(
        None,
        "--holdout-tokens-per-param",
        help="tokens per parameter of the held-out run (default 10; within the grid's range)",
    ),
    minutes: float | None = typer.Option(
        None,
        "--minutes",
        help="size the grid to fit this many minutes "
        "(the planner's prediction from the `local` profile)",
    ),
    tiny: bool = typer.Option(
        False, "--tiny", help="a 10-run ladder of tiny models in one process (CI: under 2 minutes)"
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        help="runs in parallel processes (default: one per core; --tiny: 1, in this process)",
    ),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch threads per worker (default: the cores shared out over the workers)",
    ),
    price: str | None = typer.Option(
        None,
        "--price",
        help="USD per machine-hour for the cost column (default: "
        "the `local` profile's placeholder)",
    ),
    plot: str | None = typer.Option(
        None,
        "--plot",
        help="draw loss vs compute, the fitted law, the "
        "compute-optimal frontier and the held-out point (needs matplotlib)",
    ),
    seed: int = typer.Option(0, "--seed", help="seed of every run (weights and batches)"),
    n_boot: int = typer.Option(200, "--bootstrap", help="bootstrap refits for the law's intervals"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="show the plan and what is already done; train nothing"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """Train a grid of small models on real text, fit the scaling law, predict a larger held-out run, check it."""
    from trilemma.ladder import run_ladder
    from trilemma.report.jsonout import print_json
    from trilemma.report.ladder import print_ladder, print_plan
    from trilemma.units import parse_usd

    price_h = None if price is None else parse_usd(price, "price")
    draw = None
    if plot is not None:
        from trilemma.report.ladder_plot import plot_ladder as draw
    tty = sys.stderr.isatty()
    show_plan = None if as_json else print_plan
    result = run_ladder(
        out,
        data=data,
        sizes=_numbers(sizes, "sizes", True),
        tokens_per_param=_numbers(tokens_per_param, "tokens-per-param", False),
        holdout_tokens_per_param=holdout_ratio,
        minutes=minutes,
        tiny=tiny,
        workers=workers,
        threads=threads,
        price=price_h,
        plot=plot,
        draw=draw,
        seed=seed,
        n_boot=n_boot,
        dry_run=dry_run,
        progress=tty and not as_json,
        on_plan=show_plan,
    )
    if as_json:
        print_json(result.to_dict())
    else:
        print_ladder(result)
