"""`trilemma ladder`: a thin layer over ``trilemma.ladder.run_ladder`` (registered in cli.py with
``app.command("ladder")(ladder)``). torch is imported only when the command runs."""

from __future__ import annotations

import json
import sys
from typing import Any, List, Optional

import typer

from trilemma.errors import InputError

__all__ = ["ladder", "print_ladder", "print_plan"]


def _numbers(text: Optional[str], field: str, count: bool) -> Optional[list[float]]:
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
            raise InputError(field, text, "comma-separated positive numbers, e.g. 5,10,20,40") from None
        if not v > 0:
            raise InputError(field, text, "comma-separated positive numbers")
        out.append(float(v))
    if not out:
        raise InputError(field, text, "comma-separated positive numbers")
    return out


def ladder(
    out: str = typer.Option(..., "--out", "-o", help="directory for runs.jsonl (resumable), law.toml and ladder.json"),
    data: Optional[List[str]] = typer.Option(None, "--data", help="text files, a folder, or JSONL with a `text` "
                                             "field (repeatable); default: the Python standard library's source"),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="model sizes, non-embedding parameters, e.g. "
                                        "14k,25k,40k,83k,200k; the largest is held out (at most 4x the next)"),
    tokens_per_param: Optional[str] = typer.Option(None, "--tokens-per-param", help="token budgets of the fit runs "
                                                   "as tokens per parameter (default 5,10,20,40)"),
    holdout_ratio: Optional[float] = typer.Option(None, "--holdout-tokens-per-param", help="tokens per parameter of "
                                                  "the held-out run (default 10; within the grid's range)"),
    minutes: Optional[float] = typer.Option(None, "--minutes", help="size the grid to fit this many minutes "
                                            "(the planner's prediction from the `local` profile)"),
    tiny: bool = typer.Option(False, "--tiny", help="a 10-run ladder of tiny models in one process (CI: under 2 minutes)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="runs in parallel processes (default: one per "
                                          "core; --tiny: 1, in this process)"),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch threads per worker (default: the cores "
                                          "shared out over the workers)"),
    price: Optional[str] = typer.Option(None, "--price", help="USD per machine-hour for the cost column (default: "
                                        "the `local` profile's placeholder)"),
    plot: Optional[str] = typer.Option(None, "--plot", help="draw loss vs compute, the fitted law, the "
                                       "compute-optimal frontier and the held-out point (needs matplotlib)"),
    seed: int = typer.Option(0, "--seed", help="seed of every run (weights and batches)"),
    n_boot: int = typer.Option(200, "--bootstrap", help="bootstrap refits for the law's intervals"),
    dry_run: bool = typer.Option(False, "--dry-run", help="show the plan and what is already done; train nothing"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """Train a grid of small models on real text, fit the scaling law, predict a larger held-out run, check it."""
    from trilemma.ladder import run_ladder
    from trilemma.units import parse_usd

    price_h = None if price is None else parse_usd(price, "price")
    tty = sys.stderr.isatty()
    show_plan = None if as_json else print_plan
    result = run_ladder(out, data=data, sizes=_numbers(sizes, "sizes", True),
                        tokens_per_param=_numbers(tokens_per_param, "tokens-per-param", False),
                        holdout_tokens_per_param=holdout_ratio, minutes=minutes, tiny=tiny, workers=workers,
                        threads=threads, price=price_h, plot=plot, seed=seed, n_boot=n_boot, dry_run=dry_run,
                        progress=tty and not as_json, on_plan=show_plan)
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    else:
        print_ladder(result)


# ------------------------------------------------------------------ human output


def _console() -> Any:
    from rich.console import Console

    probe = Console()
    return Console(highlight=False, width=None if probe.is_terminal else 160)


def _s(x: Optional[float]) -> str:
    if x is None:
        return "—"
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def _usd(x: float) -> str:
    from trilemma.units import fmt_usd

    return f"${x:.2g}" if 0 < x < 0.01 else fmt_usd(x)  # a small run costs a fraction of a cent


def _k(n: float) -> str:
    from trilemma.units import fmt_count

    return fmt_count(n)


def print_plan(plan: Any, info: dict[str, Any]) -> None:
    from rich.table import Table

    c = _console()
    g = plan.grid
    t = Table(title=f"trilemma ladder plan — {g.name}: {len(plan.fit_runs)} fit runs + 1 held out; "
                    f"{info['workers']} worker(s) × {info['threads']} thread(s)")
    for col in ("role", "model", "N", "D", "D/N", "steps", "peak lr", "predicted", "status"):
        t.add_column(col, justify="left" if col in ("role", "model", "status") else "right")
    done = info.get("done_keys", set())
    for p in plan.runs:
        r = p.run
        t.add_row(r.role.replace("_", "-"), r.shape.name, _k(r.n), _k(r.tokens), f"{r.tokens_per_param:g}", str(r.steps),
                  f"{r.lr:.4g}", _s(p.predicted_s), "in runs.jsonl" if r.key in done else "")
    c.print(t)
    where = plan.hardware or "unavailable"
    wall = "unavailable" if plan.predicted_wall_s is None else f"{plan.predicted_wall_s / 60:.1f} min"
    c.print(f"predicted wall time {wall} (planner, profile {where}); {info['resumed']} run(s) already in "
            f"{info['runs_path']}, {info['to_train']} to train")
    for n in info.get("notes", []):
        c.print(f"[dim]note:[/dim] {n}")
    for w in info.get("warnings", []):
        c.print(f"[yellow]warning:[/yellow] {w}")


def print_ladder(result: Any) -> None:
    from rich.table import Table

    c = _console()
    t = Table(title="trilemma ladder — measured on this machine")
    for col in ("role", "model", "N", "D", "D/N", "loss", "law", "time", "predicted", "energy", "cost", "status"):
        t.add_column(col, justify="left" if col in ("role", "model", "status") else "right")
    for r in result.runs:
        t.add_row(r.role.replace("_", "-"), r.shape, _k(r.n), _k(r.tokens), f"{r.tokens_per_param:g}",
                  "—" if r.loss is None else f"{r.loss:.4f}", "—" if r.law_loss is None else f"{r.law_loss:.4f}",
                  _s(r.wall_s), _s(r.predicted_s), "—" if r.energy_j is None else f"{r.energy_j / 3600:.3g} Wh",
                  "—" if r.cost_usd is None else _usd(r.cost_usd), r.status)
    c.print(t)
    tot = result.totals
    c.print(f"{tot['finished']} of {tot['runs']} runs finished ({tot['trained_now']} now, {tot['resumed']} resumed); "
            f"runs {tot['wall_s_runs'] / 60:.1f} min, {tot['energy_j'] / 3600:.3g} Wh, {_usd(tot['cost_usd'])} at "
            f"${result.price_usd_per_hour:g}/machine-hour; this call {tot['wall_s'] / 60:.1f} min")
    if result.fit is not None:
        law, ci = result.fit["law"], result.fit["ci"]
        parts = []
        for k in ("E", "A", "B", "alpha", "beta"):
            lo_hi = ci.get(k)
            parts.append(f"{k} = {law[k]:.4g}" + (f" [{lo_hi[0]:.3g}, {lo_hi[1]:.3g}]" if lo_hi else ""))
        c.print(f"fitted law L = E + A/N^alpha + B/D^beta (N non-embedding; {ci['level']:.0%} bootstrap intervals): "
                + ", ".join(parts))
    ho = result.held_out
    if ho is not None:
        meas = "not measured yet" if ho.measured is None else (
            f"measured {ho.measured:.4f}: error {ho.error:+.2%} of the measured loss, "
            + ("inside" if ho.within_band else "outside") + " the band")
        c.print(f"held-out {ho.shape} (N {_k(ho.n)}, {ho.n_over_largest_fitted:.1f}× the largest fitted; D {_k(ho.tokens)}, "
                f"{ho.tokens_per_param:g} tokens/param): predicted {ho.predicted:.4f} [{ho.low:.4f}, {ho.high:.4f}], {meas}")
    files = ", ".join(f"{k} {v}" for k, v in result.files.items() if v)
    c.print(f"files: {files}")
    for n in result.notes:
        c.print(f"[dim]note:[/dim] {n}")
    for w in result.warnings:
        c.print(f"[yellow]warning:[/yellow] {w}")
