"""Human output of `trilemma probe`: the run, predicted beside measured, then the machine and the losses.

The ``--json`` document is ``ProbeResult.to_dict()`` itself (``trilemma.report.jsonout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from trilemma.console import console, shown
from trilemma.units import fmt_bytes, fmt_count, fmt_flop_rate, fmt_rate

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.result import ProbeResult

__all__ = ["print_probe"]


def _ratio(r: float) -> str:
    return f"{r:.2f}"


def print_probe(result: ProbeResult) -> None:
    """Print one probe for a person: settings, the predicted/measured table, step time, memory, losses, machine."""
    c = console()
    _print_settings(c, result)
    c.print(_comparison_table(result))
    _print_measured(c, result)
    _print_scaling_and_machine(c, result)
    for w in result.warnings:
        c.print(f"[yellow]note:[/yellow] {shown(w)}")


def _print_settings(c: Any, result: ProbeResult) -> None:
    """The model, the machine and the run's settings, and a fine-tune's adapters."""
    m, r, meas = result.model, result.run, result.measured
    env = result.environment
    ok = (
        "matches the planner"
        if meas.params == result.params_planner
        else f"planner counts {result.params_planner:,}"
    )
    c.print(
        f"[bold]trilemma probe[/bold] — {shown(m.name)}: {fmt_count(meas.params)} parameters ({ok})"
    )
    c.print(
        f"  {env.device} ({env.device_name}, {env.cores} cores, {env.threads_per_process} "
        f"thread(s) per process), {r.precision}, {r.parallelism}, recompute {r.recompute}"
        + (", compiled" if r.compile else "")
    )
    c.print(
        f"  {r.seq} tokens × micro-batch {r.micro_batch} × accumulation {r.grad_accum} × "
        f"{r.nproc} process(es) = {r.tokens_per_step:,} tokens per step; {r.steps_done} of {r.steps} "
        f"steps, {r.warmup} warm-up; data: {result.data.get('source', '')}"
    )
    if r.finetune is not None:
        f = r.finetune
        adapters = (
            f" rank {f['lora_rank']}, alpha {f['lora_alpha']:g} on {', '.join(f['lora_targets'])};"
            if f["lora_rank"] is not None
            else ""
        )
        n_m, n_p = f["trainable_params_measured"], f["trainable_params_planner"]
        same = "the planner's count" if n_m == n_p else f"the planner counts {n_p:,}"
        who = "PEFT's count" if f["lora_rank"] is not None else "requires_grad"
        c.print(
            f"  fine-tune {f['method']}:{adapters} {n_m:,} trainable parameters ({who}; {same}); {f['base']}"
        )


def _comparison_table(result: ProbeResult) -> Table:
    """Predicted against measured: step time, tokens/s, memory and MFU."""
    meas, pred = result.measured, result.predicted
    t = Table(title="predicted (trilemma estimate on the `local` profile) vs measured")
    for col in ("", "predicted", "measured", "predicted / measured"):
        t.add_column(col, justify="left" if not col else "right")
    cmp = result.comparison
    rows = [
        ("step time", "step_time", lambda v: f"{v:.3f} s"),
        ("tokens/s", "tokens_per_s", lambda v: f"{v:,.0f}"),
        ("memory per process", "memory", fmt_bytes),
        ("  training state", "memory_training", fmt_bytes),
    ]
    for label, key, fmt in rows:
        if key in cmp:
            x = cmp[key]
            t.add_row(label, fmt(x.predicted), fmt(x.measured), _ratio(x.ratio))
    if pred is not None and meas.mfu is not None:
        t.add_row("MFU", f"{pred.mfu:.1%}", f"{meas.mfu:.1%}", _ratio(pred.mfu / meas.mfu))
    return t


def _print_measured(c: Any, result: ProbeResult) -> None:
    """A busy machine's warning, the measured step time, the memory and the losses."""
    meas, pred, env = result.measured, result.predicted, result.environment
    if env.busy:
        c.print(
            "[bold red]warning:[/bold red] measured on a busy machine: other processes' work is inside these "
            "figures (the note below says what; environment.busy in --json)"
        )
    if meas.step_time is not None:
        s = meas.step_time
        c.print(
            f"  step time median {s.median_s:.4f} s (p10 {s.p10_s:.4f}, p90 {s.p90_s:.4f}, spread {s.spread:.1%}, "
            f"n={s.n}); {fmt_flop_rate(meas.model_flop_per_s)} model FLOP/s per process "
            f"({fmt_count(meas.model_flop_per_token)} FLOP/token, PaLM convention); "
            f"MFU {meas.mfu:.1%} of the measured {fmt_flop_rate(meas.peak_flop_per_s)}"
            + (
                f", {meas.mfu_datasheet:.1%} of the {meas.datasheet} datasheet peak"
                if meas.mfu_datasheet
                else ""
            )
        )
    c.print(
        f"  memory: {meas.memory_kind}; training state = "
        + (
            "above the runtime baseline of "
            + fmt_bytes(meas.memory_baseline_bytes)
            + " (interpreter, torch, data: measured before training; the predicted memory per process adds it "
            "to the planner's total)"
            if env.device == "cpu"
            else "CUDA allocator peak"
        )
        + (
            f"; the planner's total includes its framework overhead of {fmt_bytes(pred.framework_overhead_bytes)}"
            if pred and env.device != "cpu"
            else ""
        )
    )
    if meas.loss_first is not None:
        c.print(
            f"  loss: first {meas.loss_first:.3f}, last {meas.loss_last:.3f}, train (last 5) {meas.train_loss:.3f}"
            + (f", held-out {meas.eval_loss:.3f}" if meas.eval_loss is not None else "")
            + " nats/byte"
        )


def _print_scaling_and_machine(c: Any, result: ProbeResult) -> None:
    """Scaling over processes (when measured) and the machine's measured peaks."""
    sc = result.scaling
    if sc is not None:
        c.print(
            f"  scaling, {sc.nproc} processes × {sc.threads_per_process} thread(s): {sc.tokens_per_s:,.0f} tokens/s "
            f"vs {sc.one_process_tokens_per_s:,.0f} for one process → efficiency {sc.efficiency:.1%} "
            f"(planner: {sc.predicted_efficiency:.1%})"
        )
        if sc.whole_machine_tokens_per_s:
            c.print(
                f"  against one process using every core ({sc.whole_machine_tokens_per_s:,.0f} tokens/s): "
                f"speed-up {sc.speedup_vs_whole_machine:.2f}× (planner: {sc.predicted_speedup_vs_whole_machine:.2f}×)"
            )
    mm = result.machine.measurement
    pp = result.machine.per_process  # a process's share (None: one process has every core)
    peaks = ", ".join(f"{p} {fmt_flop_rate(curve.peak)}" for p, curve in mm.matmul.items())
    when = "cached" if mm.from_cache else f"measured in {mm.seconds:.1f} s"
    c.print(
        f"  machine ({when}): matmul peak {peaks}; "
        f"memory {fmt_rate(mm.memory_bw_bytes_per_s)}; link {fmt_rate(mm.link_bw_bytes_per_s)}; "
        + (f"host dispatch {mm.host_dispatch.describe()}; " if mm.host_dispatch else "")
        + (f"{pp.collective.describe()}; " if pp is not None and pp.collective else "")
        + f"profile `local` in {result.machine.profile} (trilemma estimate --gpu local)"
    )
