"""Human output of `trilemma fit` and `trilemma optimal` (rich tables; JSON is the documents themselves)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from trilemma.console import console, shown
from trilemma.units import fmt_count


def _g(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def fmt_flop(x: float) -> str:
    return f"{x:.3g} FLOP"


def _notes(c: Console, notes: list[str], warnings: list[str]) -> None:
    for n in dict.fromkeys(notes):
        c.print(f"[dim]note:[/dim] {shown(n)}")
    for w in dict.fromkeys(warnings):
        c.print(f"[yellow]warning:[/yellow] {shown(w)}")


def print_fit(doc: dict[str, Any]) -> None:
    c = console()
    law, ci = doc["law"], doc["ci"]
    t = Table(
        title=f"trilemma fit — {doc['formula']}  ({doc['goodness_of_fit']['runs']} runs, "
        f"{doc['goodness_of_fit']['sizes']} sizes)"
    )
    t.add_column("constant")
    t.add_column("value", justify="right")
    t.add_column(f"{ci['level']:.0%} interval (bootstrap)", justify="right")
    for k in ("E", "A", "B", "alpha", "beta"):
        lo_hi = ci.get(k)
        t.add_row(k, _g(law[k]), f"{_g(lo_hi[0])} – {_g(lo_hi[1])}" if lo_hi else "—")
    a = doc["compute_optimal"]["a"]
    t.add_row(
        "a = beta/(alpha+beta)",
        _g(a, 3),
        f"{_g(ci['a'][0], 3)} – {_g(ci['a'][1], 3)}" if "a" in ci else "—",
    )
    c.print(t)
    gof, conv = doc["goodness_of_fit"], doc["convergence"]
    s = Table(show_header=False, box=None)
    s.add_column(style="bold")
    s.add_column()
    s.add_row(
        "fit",
        f"mean |error| {gof['mean_abs_rel_error']:.2%}, max {gof['max_abs_rel_error']:.2%}, "
        f"RMSE(ln L) {gof['rmse_log_loss']:.4f}, R² {gof['r2_loss']:.4f}",
    )
    s.add_row(
        "optimiser",
        f"{'converged' if conv['converged'] else '[red]NOT converged[/red]'} (largest gradient "
        f"{conv['grad_max']:.1e}); {conv['starts_at_best']} of {conv['starts']} L-BFGS starts reached "
        f"the best objective {conv['objective']:.4g}",
    )
    lo = doc.get("leave_out")
    if lo:
        s.add_row(
            "leave-out",
            f"fit on {lo['fit_runs']} runs up to N = {fmt_count(lo['fit_max_N'])}, predict the "
            f"{lo['held_out_runs']} runs of the {lo['held_out_sizes']} largest size(s): mean |error| "
            f"{lo['mean_abs_rel_error']:.2%}, max {lo['max_abs_rel_error']:.2%}",
        )
    if av := doc.get("averaged"):
        s.add_row("averaged", _averaged_text(av))
    if ex := doc.get("extrapolation_sd"):
        own, floor = ex["runs"], ex["floor"]
        whose = (
            "these runs' own"
            if own is not None and own >= floor
            else "the floor: what fits of published suites erred by at ten times their compute; these "
            f"runs' own {'too few sizes to measure' if own is None else f'{own:.3g}'}"
        )
        s.add_row(
            "beyond the runs",
            f"the band grows by {max(own or 0.0, floor):.3g} in log loss per e-fold of N, D or compute "
            f"({whose}; trilemma.quality.extrapolation_band)",
        )
    s.add_row(
        "units",
        f"N counts {doc['n_counts'].replace('_', '-')} parameters; loss in {doc['loss_unit']} on "
        f"{doc['data']} / {doc['tokenizer']}",
    )
    if doc.get("law_path"):
        s.add_row("law file", f"{doc['law_path']}  (use with --law {doc['law_path']})")
    if doc.get("plot_path"):
        s.add_row("plot", doc["plot_path"])
    c.print(s)
    _notes(c, [], doc.get("warnings", []))


def _averaged_text(av: dict[str, Any]) -> str:
    """The averaged fit's forms in one cell: weight, held-out error and exponents of each."""
    parts = []
    for f in av["forms"]:
        err = "not scored" if f["held_out_error"] is None else f"held-out {f['held_out_error']:.2%}"
        parts.append(
            f"{f['form']} {f['weight']:.2f} ({err}; E {_g(f['E'])}, alpha {_g(f['alpha'], 3)}, "
            f"beta {_g(f['beta'], 3)})"
        )
    return (
        "; ".join(parts)
        + " — for extrapolating beyond the runs; the law file holds the staged fit above"
    )


def print_optimal(doc: dict[str, Any]) -> None:
    c = console()
    notes: list[str] = []
    warnings: list[str] = list(doc.get("warnings", []))
    rows = [r for r in doc["results"] if r.get("compute_optimal")]
    if rows:
        t = Table(
            title=f"trilemma optimal — {fmt_flop(doc['flops'])} training compute ({doc['flop_convention']})"
        )
        for col, just in (
            ("law", "left"),
            ("N*", "right"),
            ("N band", "right"),
            ("D*", "right"),
            ("tokens/param", "right"),
            ("loss", "right"),
            ("loss band", "right"),
            ("N counts", "left"),
        ):
            t.add_column(col, justify=just)
        for r in rows:
            a = r["compute_optimal"]
            lvl = a["loss"]["level"]
            t.add_row(
                r["law"],
                fmt_count(a["n_params"]),
                f"{fmt_count(a['n_params_low'])} – {fmt_count(a['n_params_high'])}",
                fmt_count(a["tokens"]),
                f"{a['tokens_per_param']:.1f}",
                f"{a['loss']['mean']:.4f}",
                f"{a['loss']['low']:.4f} – {a['loss']['high']:.4f}"
                + (f" ({lvl:.0%})" if lvl else " (range)"),
                a["n_counts"].replace("_", "-"),
            )
            notes += a["notes"][1:]
        c.print(t)
    inf = [r for r in doc["results"] if r.get("inference_optimal")]
    if inf:
        t = Table(
            title=f"inference-aware (Sardana et al. 2023) — target loss, {fmt_count(doc['inference_tokens'] or 0)} "
            "lifetime inference tokens"
        )
        for col in (
            "law",
            "target loss",
            "N",
            "D (training)",
            "tokens/param",
            "total FLOPs",
            "vs compute-optimal",
        ):
            t.add_column(col, justify="left" if col == "law" else "right")
        for r in inf:
            b = r["inference_optimal"]
            t.add_row(
                r["law"],
                f"{b['target_loss']:.4f}",
                fmt_count(b["n_params"]),
                fmt_count(b["tokens"]),
                f"{b['tokens_per_param']:.0f}",
                fmt_flop(b["total_flops"]),
                f"{fmt_count(b['chinchilla_n_params'])} params, {fmt_flop(b['chinchilla_total_flops'])} "
                f"({b['saving']:.0%} saved)",
            )
            notes += b["notes"][1:]
        c.print(t)
    _notes(c, notes, warnings)
