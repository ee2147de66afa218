"""`trilemma probe`: a thin layer over ``trilemma.probe.run_probe`` (registered in cli.py with
``app.command("probe")(probe)``). torch is imported only when the command runs."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from trilemma.errors import TrilemmaError

__all__ = ["Interrupted", "print_probe", "probe"]


def probe(
    model: str | None = typer.Option(None, "--model", "-m", help="preset (scaled down by --layers/--d-model/...), "
                                        "a Hugging Face config.json; default: a small GPT-2-style model"),
    layers: int | None = typer.Option(None, "--layers", help="layers (scales the model down)"),
    d_model: int | None = typer.Option(None, "--d-model", help="model width"),
    heads: int | None = typer.Option(None, "--heads", help="attention heads"),
    kv_heads: int | None = typer.Option(None, "--kv-heads", help="key/value heads (GQA)"),
    ffn: int | None = typer.Option(None, "--ffn", help="MLP hidden width"),
    vocab: int | None = typer.Option(None, "--vocab", help="vocabulary (tokens are bytes: at least 256)"),
    seq: int | None = typer.Option(None, "--seq", help="tokens per sequence (default 256)"),
    micro_batch: int = typer.Option(8, "--micro-batch", help="sequences per micro-batch, per process"),
    grad_accum: int = typer.Option(1, "--grad-accum", help="micro-batches per optimizer step"),
    steps: int = typer.Option(30, "--steps", help="optimizer steps, warm-up included"),
    warmup: int | None = typer.Option(None, "--warmup", help="steps left out of the statistics (default 5)"),
    precision: str | None = typer.Option(None, "--precision", help="fp32, bf16 or fp16 (autocast); default fp32 on "
                                            "a CPU, bf16 on a GPU that has it"),
    recompute: str = typer.Option("none", "--recompute", help="none or full (activation checkpointing per layer)"),
    compile_model: bool = typer.Option(False, "--compile", help="torch.compile the model"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
    nproc: int = typer.Option(1, "--nproc", help="processes through torchrun (DDP; gloo on CPU, NCCL on GPU)"),
    fsdp: bool = typer.Option(False, "--fsdp", help="fully sharded data parallel instead of DDP"),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads per process (default: the cores "
                                          "shared out over --nproc)"),
    data: list[str] | None = typer.Option(None, "--data", help="text files, a folder, or JSONL with a `text` "
                                             "field (repeatable); default: the Python standard library's source"),
    lr: float = typer.Option(1e-3, "--lr", help="AdamW learning rate"),
    seed: int = typer.Option(0, "--seed"),
    remeasure: bool = typer.Option(False, "--remeasure", help="measure the machine again (else the cached figures)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
    out: str | None = typer.Option(None, "--out", help="append a versioned record to this JSONL file"),
) -> None:
    """Train a real model on this machine; print what was measured beside what `estimate` predicts."""
    from trilemma.probe import run_probe

    result = run_probe(model, layers=layers, d_model=d_model, heads=heads, kv_heads=kv_heads, ffn=ffn, vocab=vocab,
                       seq=seq, micro_batch=micro_batch, grad_accum=grad_accum, steps=steps, warmup=warmup,
                       precision=precision, recompute=recompute, compile=compile_model, device=device, nproc=nproc,
                       fsdp=fsdp, threads=threads, data=data, seed=seed, lr=lr, remeasure=remeasure,
                       progress=not as_json and sys.stderr.isatty(), out=out)
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    else:
        print_probe(result)
    if result.run.get("interrupted"):
        raise Interrupted(f"interrupted after {result.run['steps_done']} of {result.run['steps']} steps; the figures "
                          "above cover the steps done" + (f" and were appended to {out}" if out else ""))


class Interrupted(TrilemmaError):
    """Ctrl-C during training: what was measured is printed (and recorded); exit status 130."""

    exit_code = 130


def _ratio(r: float) -> str:
    return f"{r:.2f}"


def print_probe(result: Any) -> None:
    """Human output: the run, predicted beside measured, then the machine and the losses."""
    from rich.console import Console
    from rich.table import Table

    from trilemma.units import fmt_bytes, fmt_count, fmt_flop_rate, fmt_rate

    c = Console(highlight=False, width=None if Console().is_terminal else 200)
    m, r, meas, pred = result.model, result.run, result.measured, result.predicted
    env = result.environment
    ok = "matches the planner" if meas.params == result.params_planner else f"planner counts {result.params_planner:,}"
    c.print(f"[bold]trilemma probe[/bold] — {m.name}: {fmt_count(meas.params)} parameters ({ok})")
    c.print(f"  {env['device']} ({env['device_name']}, {env['cores']} cores, {env['threads_per_process']} "
            f"thread(s) per process), {r['precision']}, {r['parallelism']}, recompute {r['recompute']}"
            + (", compiled" if r["compile"] else ""))
    c.print(f"  {r['seq']} tokens × micro-batch {r['micro_batch']} × accumulation {r['grad_accum']} × "
            f"{r['nproc']} process(es) = {r['tokens_per_step']:,} tokens per step; {r['steps_done']} of {r['steps']} "
            f"steps, {r['warmup']} warm-up; data: {result.data.get('source', '')}")

    t = Table(title="predicted (trilemma estimate on the `local` profile) vs measured")
    for col in ("", "predicted", "measured", "predicted / measured"):
        t.add_column(col, justify="left" if not col else "right")
    cmp = result.comparison
    rows = [("step time", "step_time", lambda v: f"{v:.3f} s"), ("tokens/s", "tokens_per_s", lambda v: f"{v:,.0f}"),
            ("memory per process", "memory", fmt_bytes),
            ("  training state", "memory_training", fmt_bytes)]
    for label, key, fmt in rows:
        if key in cmp:
            x = cmp[key]
            t.add_row(label, fmt(x.predicted), fmt(x.measured), _ratio(x.ratio))
    if pred is not None and meas.mfu is not None:
        t.add_row("MFU", f"{pred.mfu:.1%}", f"{meas.mfu:.1%}", _ratio(pred.mfu / meas.mfu))
    c.print(t)
    if meas.step_time is not None:
        s = meas.step_time
        c.print(f"  step time median {s.median_s:.4f} s (p10 {s.p10_s:.4f}, p90 {s.p90_s:.4f}, spread {s.spread:.1%}, "
                f"n={s.n}); {fmt_flop_rate(meas.model_flop_per_s)} model FLOP/s per process "
                f"({fmt_count(meas.model_flop_per_token)} FLOP/token, PaLM convention); "
                f"MFU {meas.mfu:.1%} of the measured {fmt_flop_rate(meas.peak_flop_per_s)}"
                + (f", {meas.mfu_datasheet:.1%} of the {meas.datasheet} datasheet peak" if meas.mfu_datasheet else ""))
    c.print(f"  memory: {meas.memory_kind}; training state = "
            + ("above the runtime baseline of " + fmt_bytes(meas.memory_baseline_bytes)
               if env["device"] == "cpu" else "CUDA allocator peak")
            + (f"; the planner's total includes its framework overhead of {fmt_bytes(pred.framework_overhead_bytes)}"
               if pred else ""))
    if meas.loss_first is not None:
        c.print(f"  loss: first {meas.loss_first:.3f}, last {meas.loss_last:.3f}, train (last 5) {meas.train_loss:.3f}"
                + (f", held-out {meas.eval_loss:.3f}" if meas.eval_loss is not None else "") + " nats/byte")
    sc = result.scaling
    if sc is not None:
        c.print(f"  scaling, {sc.nproc} processes × {sc.threads_per_process} thread(s): {sc.tokens_per_s:,.0f} tokens/s "
                f"vs {sc.one_process_tokens_per_s:,.0f} for one process → efficiency {sc.efficiency:.1%} "
                f"(planner: {sc.predicted_efficiency:.1%})")
        if sc.whole_machine_tokens_per_s:
            c.print(f"  against one process using every core ({sc.whole_machine_tokens_per_s:,.0f} tokens/s): "
                    f"speed-up {sc.speedup_vs_whole_machine:.2f}× (planner: {sc.predicted_speedup_vs_whole_machine:.2f}×)")
    mm = result.machine["measurement"]
    peaks = ", ".join(f"{p} {fmt_flop_rate(v['peak'])}" for p, v in mm["matmul"].items())
    when = "cached" if mm["from_cache"] else "measured in {:.1f} s".format(mm["seconds"])
    c.print(f"  machine ({when}): matmul peak {peaks}; "
            f"memory {fmt_rate(mm['memory_bw_bytes_per_s'])}; link {fmt_rate(mm['link_bw_bytes_per_s'])}; "
            f"profile `local` in {result.machine['profile']} (trilemma estimate --gpu local)")
    for w in result.warnings:
        c.print(f"[yellow]note:[/yellow] {w}")
