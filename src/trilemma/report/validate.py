"""Human and CSV output of `trilemma validate`."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from trilemma.console import console
from trilemma.fileio import write_csv_atomic
from trilemma.units import fmt_bytes

_UNIT = {
    "gpu_hours": (1.0, "GPU-h"),
    "days": (1.0, "days"),
    "busy_gpu_hours": (1.0, "busy GPU-h"),
    "tokens_per_s_per_gpu": (1.0, "tok/s/GPU"),
    "model_tflops_per_gpu": (1.0, "model TFLOP/s"),
    "hardware_tflops_per_gpu": (1.0, "hw TFLOP/s"),
    "mfu": (100.0, "% MFU"),
    "hfu": (100.0, "% HFU"),
    "step_s": (1.0, "s/step"),
    "forward_backward_s": (1.0, "s fwd+bwd"),
    "peak_memory_bytes": (2.0**-30, "GiB in use"),
    "peak_reserved_bytes": (2.0**-30, "GiB reserved"),
    "peak_allocated_bytes": (2.0**-30, "GiB allocated"),
}


def _v(x: float | None, metric: str) -> str:
    if x is None:
        return "—"
    scale, _ = _UNIT[metric]
    v = x * scale
    if (
        abs(v) >= 1e12
    ):  # past a trillion, grouped digits stop being readable (a user's CSV may hold 1e300)
        return f"{v:.3e}"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _ratio(r: float | None) -> str:
    if r is None:
        return "—"
    style = (
        "green"
        if abs(math.log(r)) <= math.log(1.1)
        else ("yellow" if abs(math.log(r)) <= math.log(1.25) else "red")
    )
    return f"[{style}]{r:.2f}[/{style}]"


def print_validate(doc: dict[str, Any]) -> None:
    """A backtest in the terminal: its rows, the summary per kind, and the notes that go with it."""
    c = console()
    t = _rows_table(doc["rows"])
    if doc["rows"] or doc["summary"]:  # (--kind finetune: the fine-tune section alone)
        c.print(t)
    s = _summary_table(doc["summary"])
    if doc["summary"]:
        c.print(s)
    od = doc.get("ondevice")
    if od:
        _print_ondevice(c, od)
    _print_finetune(c, doc.get("finetune_memory"))
    _print_quality(c, doc.get("quality"))
    for b in doc.get("fitted_at_bounds") or []:
        c.print(
            f"fitted constant on its {b['bound']} bound: {b['constant']} = {b['value']:.4g}; {b['note']}"
        )
    if doc["skipped"]:
        c.print(f"{len(doc['skipped'])} rows skipped (see --json for reasons)")
    for w in doc.get("warnings") or []:
        c.print(w)
    cal = doc.get("calibration") or {}
    if cal.get("date"):
        c.print(
            f"constants fitted {cal['date']} by `{cal['command']}`; LOSO = calibrated without the row's source"
        )
    if doc["summary"]:
        c.print(
            "80% band coverage: share of rows inside the band an estimate prints, the band built without "
            "the row's source (time: a whole run's; runs, throughput, memory: each kind's)"
        )


def _rows_table(rows: list[dict[str, Any]]) -> Table:
    """One line per backtested row: predicted, reported, their ratio and the LOSO ratio."""
    t = Table(title="trilemma validate — predicted vs published, one line per row")
    for col in (
        "kind",
        "row",
        "model",
        "GPUs",
        "hardware",
        "metric",
        "predicted",
        "reported",
        "ratio",
        "LOSO ratio",
        "note",
    ):
        t.add_column(
            col,
            justify="right"
            if col in ("row", "GPUs", "predicted", "reported", "ratio", "LOSO ratio")
            else "left",
        )
    for r in rows:
        t.add_row(
            r["kind"],
            str(r["row"]),
            r["model"][:40],
            str(r["n_gpus"]),
            r["hardware"],
            _UNIT[r["metric"]][1],
            _v(r["predicted"], r["metric"]),
            _v(r["reported"], r["metric"]),
            _ratio(r["ratio"]),
            _ratio(r["loso_ratio"]),
            r["note"],
        )
    return t


def _summary_table(summary: dict[str, Any]) -> Table:
    """Per kind, in-sample (or shipped constants) and leave-one-source-out errors and coverage."""
    s = Table(title="summary: |log(predicted/reported)| as %")
    for col in (
        "kind",
        "fit",
        "rows",
        "median",
        "worst",
        "≤10%",
        "≤25%",
        "skipped",
        "80% band coverage",
    ):
        s.add_column(
            col, justify="left" if col in ("kind", "fit", "80% band coverage") else "right"
        )
    for kind, parts in summary.items():
        _summary_rows(s, kind, parts, str(parts["skipped"]))
        small = parts.get("small_configurations")
        if small and small["in_sample"].get("n"):
            n_src = len(small["sources"])
            _summary_rows(s, f"{kind}, small ({n_src} sources)", small, "")
    return s


def _summary_rows(s: Table, kind: str, parts: dict[str, Any], skipped: str) -> None:
    """One kind's rows of the summary: in-sample (or shipped constants), then held out by source and
    by stack."""
    first = (
        ("in-sample", parts["in_sample"])
        if "in_sample" in parts
        else ("shipped constants", parts["shipped_constants"])
    )  # a user's --data rows: out of sample
    held = [("leave-one-source-out", parts["leave_one_source_out"])]
    if parts.get("leave_one_stack_out", {}).get("n"):
        held.append(("leave-one-stack-out", parts["leave_one_stack_out"]))
    for which, st in (first, *held):
        cov = _coverage(parts) if which == "leave-one-source-out" and skipped else ""
        if not st.get("n"):
            s.add_row(kind, which, "0", "—", "—", "—", "—", skipped, cov)
            continue
        s.add_row(
            kind,
            which,
            str(st["n"]),
            f"{st['median_error']:.1%}",
            f"{st['worst_error']:.0%}",
            f"{st['within_10pct']:.0%}",
            f"{st['within_25pct']:.0%}",
            skipped,
            cov,
        )


def _print_finetune(c: Any, ft: dict[str, Any] | None) -> None:
    """The published fine-tuning memory rows (data/finetune_memory.csv), held out, and their summary."""
    if not ft or not ft["rows"]:
        return
    t = Table(
        title=f"fine-tune memory per GPU — predicted vs published ({ft['data']}; held out: "
        f"memory constants refit without {', '.join(ft['held_out'])})"
    )
    for col in ("case", "predicted", "reported", "ratio"):
        t.add_column(col, justify="left" if col == "case" else "right")
    for r in ft["rows"]:
        t.add_row(
            r["case"],
            fmt_bytes(r["predicted_bytes"]),
            fmt_bytes(r["reported_bytes"]),
            _ratio(r["ratio"]),
        )
    c.print(t)
    s = ft["summary"]
    c.print(
        f"fine-tune memory: {s['within_count']} of {s['n']} within {s['within']:.0%}; |predicted / reported - 1| "
        f"median {s['median_error']:.1%}, worst {s['worst_error']:.0%}"
    )
    by = s.get("by_trainer") or {}
    if by:
        c.print(
            "fine-tune memory by trainer (left out: no constant is fitted on these rows): "
            + ", ".join(f"{t} {v['median_error']:.1%} ({v['n']})" for t, v in by.items())
        )
    if s.get("time"):
        tm = s["time"]
        c.print(
            f"fine-tune step time (the rows that publish one): {tm['n']} rows, |predicted / reported - 1| "
            f"median {tm['median_error']:.1%}, worst {tm['worst_error']:.0%} (time constants fitted on none of them); "
            "by trainer (left out): "
            + ", ".join(
                f"{t} {v['median_error']:.1%} ({v['n']})" for t, v in tm["by_trainer"].items()
            )
        )
    refused, point, tight = s.get("refused", []), s.get("over_at_point", []), s.get("tight", [])
    c.print(
        f"no false out-of-memory: of {s['n']} published runs that trained, {s['n'] - len(refused)} are not "
        f"refused (the 80% memory band's favourable end within the card: estimate's refusal), "
        f"{s['n'] - len(point)} fit at the point and {s['n'] - len(refused) - len(tight)} with margin (the band's "
        "upper end)"
        + (f"; tight: {', '.join(tight)}" if tight else "")
        + (f"; refused: {', '.join(refused)}" if refused else "")
    )


def _print_band(c: Any, b: dict[str, Any] | None) -> None:
    """The loss band's line: held-out runs inside each suite's `trilemma fit` band, and the floor."""
    if b and b["runs"]:
        c.print(
            f"loss band: each suite's `trilemma fit` law, its error per e-fold beyond the runs at least "
            f"the floor measured on the other sources' suites, holds {b['inside']} of {b['runs']} "
            f"held-out runs in its 80% band ({b['sources_inside']} of {b['sources']} sources wholly); "
            f"the floor over all {b['sources']} sources {b['floor_over_sources']:.4f} in log loss per "
            f"e-fold (trilemma.quality.extrapolation_band)"
        )


def _print_quality(c: Any, q: dict[str, Any] | None) -> None:
    """Loss extrapolation per suite (trilemma's fit beside the plain fit) and the benchmark hold-outs."""
    if not q:
        return
    t = Table(title="loss extrapolation — fit on small runs, predict runs ≥10× the compute")
    for col in (
        "suite",
        "fit / held out",
        "held-out models",
        "plain median (max)",
        "trilemma median (max)",
        "prior median (max)",
        "counts median (max)",
        "horizon median (max)",
        "squares median (max)",
        "trilemma's forms (weight)",
    ):
        t.add_column(col, justify="right" if "median" in col or "/" in col else "left")
    for s in q["loss_suites"]:
        if "skipped" in s:
            t.add_row(s["suite"], f"{s['runs']} runs", f"skipped: {s['skipped']}", *["—"] * 7)
            continue
        p, m, pr, ct, hz, sq = (
            s[k] for k in ("plain", "trilemma", "prior", "counts", "horizon", "squares")
        )
        t.add_row(
            s["suite"],
            f"{s['fitted_runs']} / {s['held_out_runs']}",
            ", ".join(s["held_out_models"][:4]) + (" …" if len(s["held_out_models"]) > 4 else ""),
            f"{p['median']:.2%} ({p['max']:.2%})",
            f"{m['median']:.2%} ({m['max']:.2%})",
            f"{pr['median']:.2%} ({pr['max']:.2%})",
            f"{ct['median']:.2%} ({ct['max']:.2%})",
            f"{hz['median']:.2%} ({hz['max']:.2%})",
            f"{sq['median']:.2%} ({sq['max']:.2%})",
            ", ".join(f"{k} {w:.2f}" for k, w in s["forms"].items()),
        )
    c.print(t)
    f = q["floors"]
    med, worse, mm = f["median_abs_rel_error"], f["points_over_plain"], f["mmlu_lofo_median_points"]

    def verdict(ok: bool) -> str:
        return "[green]meets[/green]" if ok else "[red]misses[/red]"

    if med["value"] is not None:
        c.print(
            f"loss: trilemma's median error {med['value']:.2%} over the suites (plain fit "
            f"{q['plain_median_abs_rel_error']:.2%}), floor {med['floor']:.1%}: "
            f"{verdict(med['value'] <= med['floor'])} (over the {q['sources']} sources, each its "
            f"median suite: {q['median_abs_rel_error_over_sources']:.2%}, plain "
            f"{q['plain_median_abs_rel_error_over_sources']:.2%}); worst suite {worse['value']:+.2f} points against "
            f"the plain fit, floor +{worse['floor']:.1f}: {verdict(worse['value'] <= worse['floor'])}; "
            f"measured, not used: the prior's posterior mode {q['prior_median_abs_rel_error']:.2%}, "
            f"total and non-embedding counts {q['counts_median_abs_rel_error']:.2%}, the horizon "
            f"matched {q['horizon_median_abs_rel_error']:.2%}, least squares "
            f"{q['squares_median_abs_rel_error']:.2%}, the backtest along tokens per parameter "
            f"{q['direction_median_abs_rel_error']:.2%}, Kaplan's form in the pool "
            f"{q['kaplan_median_abs_rel_error']:.2%}, the forms weighted by other sources' suites "
            f"{q['cross_median_abs_rel_error']:.2%}; the best fit chosen in hindsight, not a method: "
            f"{q['hindsight_median_abs_rel_error']:.2%} (over the sources "
            f"{q['hindsight_median_abs_rel_error_over_sources']:.2%})"
        )
    _print_band(c, q.get("band"))
    c.print(f"method: {q['method']}")
    parts = [
        f"{name} {b['lofo_median_abs_error_points']:.1f} points ({b['families']} families)"
        for name, b in q["benchmarks_lofo"].items()
    ]
    c.print("benchmarks, leave-one-family-out median |error|: " + " · ".join(parts))
    ok = mm["value"] <= mm["floor"] and mm["families"] >= mm["families_min"]
    c.print(
        f"MMLU: {mm['value']:.1f} points over {mm['families']} families, floor {mm['floor']:.0f} points "
        f"over {mm['families_min']}+ families: {verdict(ok)}"
    )


def _coverage(parts: dict[str, Any]) -> str:
    """'runs 86% (12/14) · time 86% (12/14)': each band's leave-one-source-out coverage."""
    bc = {
        k: v
        for k, v in parts.get("band_coverage", {}).items()
        if isinstance(v, dict) and v.get("n")
    }
    return (
        " · ".join(f"{name} {v['coverage']:.0%} ({v['inside']}/{v['n']})" for name, v in bc.items())
        or "—"
    )


def write_csv(doc: dict[str, Any], path: str) -> None:
    cols = [
        "kind",
        "row",
        "model",
        "metric",
        "predicted",
        "reported",
        "ratio",
        "loso_predicted",
        "loso_ratio",
        "n_gpus",
        "hardware",
        "fits",
        "group",
        "note",
        "source",
    ]
    write_csv_atomic(path, cols, doc["rows"], "csv", extrasaction="ignore")


def _print_ondevice(c: Any, od: dict[str, Any]) -> None:
    """The on-device section: decode and prefill median error held out by row, source and runtime."""
    c.print(
        f"on-device (data/ondevice.csv): {od['measured_rows']} published decode rows from "
        f"{len(od['runtimes'])} runtimes, {od['prefill_rows']} prefill rows, {od['sources']} sources; "
        f"fits / does not fit right on {od['fits_right']} of {od['rows']}"
    )
    for key in ("in_sample", "leave_one_out", "leave_one_source_out", "leave_one_runtime_out"):
        parts = []
        for what in ("decode", "prefill"):
            st = od[key][what]
            parts.append(
                f"{what} {st['median_abs_error']:.0%} median error on {st['rows']} rows"
                if st["rows"]
                else f"{what}: no row"
            )
        c.print(f"  {key.replace('_', ' ')}: " + "; ".join(parts))
    w = od["leave_one_out_with_skipped"]
    if od["skipped_rows"]:
        c.print(
            f"  {od['skipped_rows']} rows listed with a skip reason (data/ondevice.csv): with them, leave one "
            f"out: decode {w['median_abs_error']:.0%} median error on {w['rows']} rows"
        )
