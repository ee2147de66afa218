"""Output of `trilemma solve`: tables, the frontier CSV; the plot is ``trilemma.report.frontier_plot``."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.table import Table

from trilemma.console import console, shown
from trilemma.estimate.bands import family_calibrated
from trilemma.estimate.stability import stability_flag
from trilemma.fileio import write_csv_atomic
from trilemma.presets.prices import price_notes
from trilemma.quality.predict import caveats
from trilemma.report.axis_labels import fmt_usd_axis
from trilemma.report.frontier_plot import plot_frontier
from trilemma.units import (
    KILO,
    fmt_bytes,
    fmt_co2_kg,
    fmt_count,
    fmt_duration,
    fmt_energy_kwh,
    fmt_gpu_hours,
    fmt_power,
    fmt_usd,
)

#: the mark on a GPU type whose chip family the calibration has no step times or runs of, and its footnote
UNCALIBRATED_MARK = "*"
UNCALIBRATED_NOTE = "* chip family not calibrated: band widened by the cross-family error"


def _gpu(e: Any) -> str:
    hw = e.cluster.hardware
    return f"{e.cluster.n_gpus}× {shown(hw.name)}" + (
        "" if family_calibrated(hw.family) else UNCALIBRATED_MARK
    )


#: the benchmark shown in the tables' score column when no --target-score names one
SHOWN_BENCHMARK = "mmlu"


def _bench(r: Any) -> str:
    """The benchmark of the tables' score column: the pinned one, else SHOWN_BENCHMARK."""
    return SHOWN_BENCHMARK if r.pins.target_score is None else r.pins.target_score[0]


def _bench_title(r: Any) -> str:
    """'MMLU (80%)': the score column's title."""
    from trilemma.quality.benchmarks import BENCHMARKS

    return f"{BENCHMARKS[_bench(r)].label} (80%)"


def _row(e: Any, loss: Any, bench: str = SHOWN_BENCHMARK) -> list[str]:
    """One table row: an Estimate, its LossPrediction, and the expected score of benchmark ``bench``."""
    from trilemma.quality.benchmarks import shown_score

    lay = e.layout
    return [
        shown(e.model.name),
        fmt_count(e.params.total),
        _gpu(e),
        str(e.plan.precision),
        stability_flag(str(e.plan.precision), e.params.total) or "—",
        fmt_count(e.plan.total_tokens),
        fmt_duration(e.time.total_s),
        fmt_usd(e.cost.usd),
        "none (fine-tune)" if loss is None else f"{loss.mean:.3f} ({loss.low:.3f}–{loss.high:.3f})",
        shown_score(e.benchmarks, bench),
        f"{e.time.mfu:.0%}",
        lay.label(compact=True),
        fmt_bytes(e.memory.per_gpu_bytes),
        f"{e.memory.free_bytes / e.memory.capacity_bytes:.0%}",
    ]


def _solve_table(r: Any) -> Table:
    """The solve's table: the optimum, the best calibrated plan when it differs, and the
    runners-up, each with its model, GPUs, time, cost, loss, benchmark score, MFU, layout and memory."""
    t = Table(title=f"trilemma solve — {_pins_title(r.pins)}; minimise {r.pins.minimize}")
    for col in (
        "",
        "model",
        "params",
        "GPUs",
        "precision",
        "stability",
        "tokens",
        "time",
        "cost",
        "loss (80%)",
        _bench_title(r),
        "MFU",
        "layout",
        "memory/GPU",
        "free",
    ):
        t.add_column(col)
    b = _bench(r)
    t.add_row("[bold]optimum[/bold]", *_row(r.optimum, r.optimum_loss, b))
    if getattr(r, "calibrated", None) is not None:
        t.add_row("best calibrated", *_row(*r.calibrated, b))
    for why, e, loss in r.runners_up:
        t.add_row(why, *_row(e, loss, b))
    return t


def print_solve(r: Any) -> None:
    """One solve in the terminal: the optimum and runners-up, their changes, notes and the frontier."""
    c = console()
    c.print(_solve_table(r))
    c.print(rank_line(r))
    for note in price_notes(r.optimum.cluster.hardware):
        c.print(f"provider: {shown(note)}")
    if r.runners_up:
        c.print(runners_up_table(r))
    if any(
        not family_calibrated(e.cluster.hardware.family)
        for e in (r.optimum, *(e for _, e, _ in r.runners_up))
    ):
        c.print(UNCALIBRATED_NOTE)
    o = r.optimum
    c.print(
        f"optimum: {fmt_gpu_hours(o.time.gpu_hours)} GPU-hours, {fmt_energy_kwh(o.cost.energy_kwh)}, "
        f"{fmt_power(o.cost.power_w)} while it runs{_power_pin(r.pins)} ≈ {o.cost.homes_powered:,.0f} "
        "average US homes, "
        f"{fmt_co2_kg(o.cost.co2_kg)} CO2e; time band {fmt_duration(o.time.total_s_low)} – "
        f"{fmt_duration(o.time.total_s_high)}, cost band {fmt_usd(o.cost.usd_low)} – {fmt_usd(o.cost.usd_high)}"
    )
    if line := _score_line(r):
        c.print(line)
    from trilemma.report.estimate_tables import stack_line

    c.print(f"stack: {stack_line(o.plan)}")
    if o.plan.distill is not None:
        from trilemma.estimate.distill import teacher_line

        c.print(teacher_line(o, "the note 'distillation' has the comparison"))
    if r.lifetime:
        c.print(_lifetime_line(r.lifetime))
    if o.deploy is not None:
        from trilemma.report.deploy_table import deploy_table

        c.print(deploy_table(o.deploy))
    if o.memory.headroom > 0:
        c.print(
            f"memory: every plan leaves at least {o.memory.headroom:.0%} of device memory free (the memory model's "
            "80% band; --memory-headroom to change)"
        )
    if r.optimum_loss is not None:
        c.print(f"loss: {r.optimum_loss.law}: " + " ".join(r.optimum_loss.notes[:1]))
        for note in caveats(r.optimum_loss):  # the optimum's extrapolation, precision, MoE caveats
            c.print(f"  · {shown(note)}")
    if o.finetune is not None:
        from trilemma.report.estimate_tables import finetune_line

        c.print(f"fine-tune: {finetune_line(o)}")
    if r.frontier is not None:
        f = r.frontier
        corners = (
            "" if r.optimum_loss is not None else " (time, cost: a fine-tune has no loss corner)"
        )
        c.print(
            f"frontier: {f.summary()}{corners}; {int(f.feasible.sum()):,} within the pins (--frontier out.csv, "
            f"--plot out.png)"
        )
    c.print(
        f"searched {r.candidates:,} candidate plans ({len(r.table):,} configurations that fit) in {r.seconds:.2f} s"
    )
    for w in (*r.warnings, *o.warnings):
        c.print(f"[yellow]note:[/yellow] {shown(w)}")


def rank_line(r: Any) -> str:
    """How the plans were ranked, and beside an optimum on an uncalibrated chip family the best plan
    on a calibrated one (its GPUs, time, cost and loss)."""
    how = (
        "ranked at the pessimistic end of each plan's 80% band of time and cost (--rank point: "
        "on the point estimate)"
        if getattr(r, "rank", "pessimistic") == "pessimistic"
        else "ranked on the point estimate (--rank pessimistic: at the high end of each band)"
    )
    alt = getattr(r, "calibrated", None)
    if alt is None:
        mine = family_calibrated(r.optimum.cluster.hardware.family)
        return how if mine else f"{how}; no plan on a calibrated chip family meets the pins"
    e, loss = alt
    lost = "" if loss is None else f", loss {loss.mean:.3f}"
    return (
        f"{how}; the optimum's chip family has no measured step time — best on a calibrated family: "
        f"{_gpu(e)}, {fmt_count(e.params.total)} parameters, {fmt_duration(e.time.total_s)}, "
        f"{fmt_usd(e.cost.usd)}{lost}"
    )


def _pins_title(p: Any) -> str:
    """The pins of a solve for its table's title: deadline, budget (dollars, GPU-hours or energy),
    the site's power and target loss, or 'no pins'."""
    pinned = []
    if p.deadline_s is not None:
        pinned.append(f"deadline {fmt_duration(p.deadline_s)}")
    if p.budget_usd is not None:
        pinned.append(f"budget {fmt_usd(p.budget_usd)}")
    if p.budget_gpu_hours is not None:
        pinned.append(f"budget {p.budget_gpu_hours:,.0f} GPU-hours")
    if p.budget_kwh is not None:
        pinned.append(f"budget {fmt_energy_kwh(p.budget_kwh)}")
    if p.max_power_w is not None:
        pinned.append(f"power ≤ {fmt_power(p.max_power_w)}")
    if p.target_loss is not None:
        pinned.append(f"target loss {p.target_loss}")
    if p.target_score is not None:
        from trilemma.solve.score import goal

        pinned.append(f"target {goal(p.target_score)}")
    return ", ".join(pinned) or "no pins"


def _score_line(r: Any) -> str | None:
    """The pinned benchmark's band for the optimum (N total parameters, as the search counts them)."""
    if r.pins.target_score is None:
        return None
    from trilemma.quality.benchmarks import BENCHMARKS, band, constants

    name, score = r.pins.target_score
    o = r.optimum
    v, lo, hi, _ = (
        float(x) for x in band(name, constants()[name], o.params.total, o.plan.total_tokens)
    )
    return (
        f"score: the optimum's {BENCHMARKS[name].label} {100 * v:.0f}% (80% band {100 * lo:.1f}–"
        f"{100 * hi:.0f}%) against the pinned {100 * score:g}% at the band's lower end "
        f"({BENCHMARKS[name].setting}; trilemma.quality.benchmarks)"
    )


def _power_pin(p: Any) -> str:
    """The --max-power pin beside the optimum's power ('' without one)."""
    return "" if p.max_power_w is None else f" (pin: at most {fmt_power(p.max_power_w)})"


def _lifetime_line(lt: dict[str, Any]) -> str:
    """Training plus serving dollars (and the device's serving energy, MWh) of the optimum."""
    return (
        f"lifetime: training {fmt_usd(lt['training_usd'])} + serving {fmt_count(lt['inference_tokens'])} tokens "
        f"{fmt_usd(lt['serving_usd'])} = [bold]{fmt_usd(lt['lifetime_usd'])}[/bold] ({lt['convention']})"
        + (
            f"; on the device the serving draws {lt['serving_energy_kwh_on_device'] / KILO:,.0f} MWh"
            if "serving_energy_kwh_on_device" in lt
            else ""
        )
    )


def _signed(x: float, fmt: Any) -> str:
    """A change: '+1.2 days', '−$30k', '±0' for none."""
    if x == 0:
        return "±0"
    return ("+" if x > 0 else "−") + fmt(abs(x))


def runners_up_table(r: Any) -> Table:
    """What each lever buys or costs: one row per runner-up (one lever changed from the optimum), with the
    change in time, cost and loss and the pins it breaks."""
    t = Table(title="runners-up: one lever changed from the optimum (Δ against it)")
    for col in (
        "lever",
        "model",
        "GPUs",
        "precision",
        "tokens",
        "Δ time",
        "Δ cost",
        "Δ loss",
        _bench_title(r),
        "meets the pins",
    ):
        t.add_column(col)
    from trilemma.quality.benchmarks import shown_score

    for why, e, loss in r.runners_up:
        ch = r.change(e, loss)
        d = ch["delta"]
        t.add_row(
            why,
            shown(e.model.name),
            _gpu(e),
            str(e.plan.precision),
            fmt_count(e.plan.total_tokens),
            _signed(d["time_s"], fmt_duration),
            _signed(round(d["usd"], 2), fmt_usd_axis),  # to the cent
            "—" if d["loss"] is None else _signed(round(d["loss"], 3), "{:.3f}".format),
            shown_score(e.benchmarks, _bench(r)),
            "yes" if not ch["breaks"] else "no: " + ", ".join(ch["breaks"]),
        )
    return t


def _frontier_scores(r: Any) -> np.ndarray | None:
    """The score column's benchmark (fraction) at each frontier point: the curve at the point's active
    parameters and tokens, as estimate and the plans' JSON have it (None for a fine-tune)."""
    if r.optimum_loss is None:
        return None
    from trilemma.estimate.params import param_counts
    from trilemma.quality.benchmarks import band, constants

    f, tab = r.frontier, r.table
    active = np.array([float(param_counts(m).active) for m in tab.models])
    n = active[tab.model_idx[f.config]]
    return np.asarray(band(_bench(r), constants()[_bench(r)], n, f.tokens)[0])


def _frontier_rows(r: Any) -> list[dict[str, Any]]:
    f, tab = r.frontier, r.table
    names = f.filters.NAMES
    scores = _frontier_scores(r)
    rows = []
    for k in range(f.time_s.size):
        i = int(f.config[k])
        rows.append(
            {
                "model": tab.models[tab.model_idx[i]].name,
                "gpu": tab.gpus[tab.gpu_idx[i]].name,
                "n_gpus": int(tab.n_gpus[i]),
                "precision": str(tab.precisions[tab.prec_idx[i]]),
                "tokens": float(f.tokens[k]),
                "time_s": float(f.time_s[k]),
                "usd": float(f.usd[k]),
                "loss": float(f.loss[k]) if r.optimum_loss is not None else "",  # a fine-tune: none
                "score": "" if scores is None else float(scores[k]),
                "feasible": bool(f.feasible[k]),
                "steps": float(f.steps[k]),
                "removed_by": names[f.removed_by[k] - 1] if f.removed_by[k] else "",
            }
        )
    return rows


def write_frontier(r: Any, path: str) -> None:
    """The frontier's points, one a row (row k is ``--point k`` of `trilemma export`): ``removed_by`` names the
    filter (FrontierFilters.NAMES: steps, short, long) that drops the point by default, set only under
    --frontier-all, which keeps them; the counts each filter removed are in ``--json``'s frontier.removed.
    ``score`` is the expected score (fraction) of the tables' benchmark (the pinned one, else MMLU)."""
    cols = (
        "model gpu n_gpus precision tokens time_s usd loss score feasible steps removed_by".split()
    )
    write_csv_atomic(path, cols, _frontier_rows(r), "frontier")


__all__ = ["plot_frontier", "print_solve", "rank_line", "runners_up_table", "write_frontier"]
