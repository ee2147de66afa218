"""Human output of `trilemma ladder`: the plan before training, then the measured runs, the law and the check.

The ``--json`` document is ``LadderResult.to_dict()`` itself (``trilemma.report.jsonout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from trilemma.console import console, shown
from trilemma.units import MINUTE, WH, fmt_count, fmt_usd

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.ladder.plan import LadderPlan
    from trilemma.ladder.result import LadderResult

__all__ = ["print_ladder", "print_plan"]


def _s(x: float | None) -> str:
    """Seconds: whole above ten, one decimal below; a dash for none."""
    if x is None:
        return "—"
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def _usd(x: float) -> str:
    return f"${x:.2g}" if 0 < x < 0.01 else fmt_usd(x)  # a small run costs a fraction of a cent


def _wh(energy_j: float) -> str:
    return f"{energy_j / WH:.3g} Wh"


def print_plan(plan: LadderPlan, info: dict[str, Any]) -> None:
    """The plan table (``run_ladder``'s ``on_plan`` callback): every run, its budget, predicted time and status."""
    c = console(width=160)
    g = plan.grid
    t = Table(
        title=f"trilemma ladder plan — {g.name}: {len(plan.fit_runs)} fit runs + 1 held out; "
        f"{info['workers']} worker(s) × {info['threads']} thread(s)"
    )
    for col in ("role", "model", "N", "D", "D/N", "steps", "peak lr", "predicted", "status"):
        t.add_column(col, justify="left" if col in ("role", "model", "status") else "right")
    done = info.get("done_keys", set())
    for p in plan.runs:
        r = p.run
        t.add_row(
            r.role.replace("_", "-"),
            r.shape.name,
            fmt_count(r.n),
            fmt_count(r.tokens),
            f"{r.tokens_per_param:g}",
            str(r.steps),
            f"{r.lr:.4g}",
            _s(p.predicted_s),
            "in runs.jsonl" if r.key in done else "",
        )
    c.print(t)
    where = plan.hardware or "unavailable"
    wall = (
        "unavailable"
        if plan.predicted_wall_s is None
        else f"{plan.predicted_wall_s / MINUTE:.1f} min"
    )
    c.print(
        f"predicted wall time {wall} (planner, profile {where}); {info['resumed']} run(s) already in "
        f"{info['runs_path']}, {info['to_train']} to train"
    )
    if info.get("cluster"):
        _print_cluster(c, info["cluster"])
    for n in info.get("notes", []):
        c.print(f"[dim]note:[/dim] {shown(n)}")
    for w in info.get("warnings", []):
        c.print(f"[yellow]warning:[/yellow] {shown(w)}")


def _print_cluster(c: Any, cluster: dict[str, Any]) -> None:
    """Each run's cluster request (Ray resources, or the sbatch parameters submitit validated) and
    the planner's device-hours."""
    for row in cluster["runs"]:
        if "sbatch" in row:
            c.print(f"sbatch {row['label']}: " + " ".join(row["sbatch"]), soft_wrap=True)
        else:
            res = ", ".join(f"{k}={v}" for k, v in row["resources"].items())
            c.print(f"{cluster['backend']} task {row['label']}: {res}", soft_wrap=True)
    gpu_h, core_h = cluster["predicted_gpu_hours"], cluster["predicted_core_hours"]
    cost = (
        f"{gpu_h:.3g} GPU-hours ({cluster['gpu']})"
        if gpu_h is not None
        else f"{core_h:.3g} core-hours"
        if core_h is not None
        else "unavailable (no prediction)"
    )
    c.print(f"backend {cluster['backend']}, {cluster['device_per_run']} per run; planner: {cost}")


def print_ladder(result: LadderResult) -> None:
    """The measured runs (loss, law, time, energy, dollars), the totals, the fitted law and the held-out check."""
    c = console(width=160)
    t = Table(title="trilemma ladder — measured on this machine")
    for col in (
        "role",
        "model",
        "N",
        "D",
        "D/N",
        "loss",
        "law",
        "time",
        "predicted",
        "energy",
        "cost",
        "status",
    ):
        t.add_column(col, justify="left" if col in ("role", "model", "status") else "right")
    for r in result.runs:
        t.add_row(
            r.role.replace("_", "-"),
            r.shape,
            fmt_count(r.n),
            fmt_count(r.tokens),
            f"{r.tokens_per_param:g}",
            "—" if r.loss is None else f"{r.loss:.4f}",
            "—" if r.law_loss is None else f"{r.law_loss:.4f}",
            _s(r.wall_s),
            _s(r.predicted_s),
            "—" if r.energy_j is None else _wh(r.energy_j),
            "—" if r.cost_usd is None else _usd(r.cost_usd),
            r.status,
        )
    c.print(t)
    tot = result.totals
    c.print(
        f"{tot.finished} of {tot.runs} runs finished ({tot.trained_now} now, {tot.resumed} resumed); "
        f"runs {tot.wall_s_runs / MINUTE:.1f} min, {_wh(tot.energy_j)}, {_usd(tot.cost_usd)} at "
        f"${result.price_usd_per_hour:g}/machine-hour; this call {tot.wall_s / MINUTE:.1f} min"
    )
    if result.fit is not None:
        law, ci = result.fit["law"], result.fit["ci"]
        parts = []
        for k in ("E", "A", "B", "alpha", "beta"):
            lo_hi = ci.get(k)
            parts.append(
                f"{k} = {law[k]:.4g}" + (f" [{lo_hi[0]:.3g}, {lo_hi[1]:.3g}]" if lo_hi else "")
            )
        c.print(
            f"fitted law L = E + A/N^alpha + B/D^beta (N non-embedding; {ci['level']:.0%} bootstrap intervals): "
            + ", ".join(parts)
        )
    ho = result.held_out
    if ho is not None:
        meas = (
            "not measured yet"
            if ho.measured is None
            else (
                f"measured {ho.measured:.4f}: error {ho.error:+.2%} of the measured loss, "
                + ("inside" if ho.within_band else "outside")
                + " the band"
            )
        )
        c.print(
            f"held-out {ho.shape} (N {fmt_count(ho.n)}, {ho.n_over_largest_fitted:.1f}× the largest fitted; "
            f"D {fmt_count(ho.tokens)}, {ho.tokens_per_param:g} tokens/param): predicted {ho.predicted:.4f} "
            f"[{ho.low:.4f}, {ho.high:.4f}], {meas}"
        )
    files = ", ".join(f"{k} {v}" for k, v in result.files.items() if v)
    c.print(f"files: {files}")
    for n in result.notes:
        c.print(f"[dim]note:[/dim] {shown(n)}")
    for w in result.warnings:
        c.print(f"[yellow]warning:[/yellow] {shown(w)}")
