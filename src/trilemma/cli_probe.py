"""`trilemma probe`: a thin layer over ``trilemma.probe.run_probe`` (registered in cli.py with
``app.command("probe")(probe)``). torch is imported only when the command runs."""

from __future__ import annotations

import sys

import typer

from trilemma.errors import TrilemmaError

__all__ = ["Interrupted", "probe"]


def probe(
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="preset (scaled down by --layers/--d-model/...), "
        "a Hugging Face config.json; default: a small GPT-2-style model",
    ),
    layers: int | None = typer.Option(None, "--layers", help="layers (scales the model down)"),
    d_model: int | None = typer.Option(None, "--d-model", help="model width"),
    heads: int | None = typer.Option(None, "--heads", help="attention heads"),
    kv_heads: int | None = typer.Option(None, "--kv-heads", help="key/value heads (GQA)"),
    ffn: int | None = typer.Option(None, "--ffn", help="MLP hidden width"),
    vocab: int | None = typer.Option(
        None, "--vocab", help="vocabulary (tokens are bytes: at least 256)"
    ),
    seq: int | None = typer.Option(None, "--seq", help="tokens per sequence (default 256)"),
    micro_batch: int = typer.Option(
        8, "--micro-batch", help="sequences per micro-batch, per process"
    ),
    grad_accum: int = typer.Option(1, "--grad-accum", help="micro-batches per optimizer step"),
    steps: int = typer.Option(30, "--steps", help="optimizer steps, warm-up included"),
    warmup: int | None = typer.Option(
        None, "--warmup", help="steps left out of the statistics (default 5)"
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="fp32, bf16 or fp16 (autocast); default fp32 on a CPU, bf16 on a GPU that has it",
    ),
    recompute: str = typer.Option(
        "none", "--recompute", help="none or full (activation checkpointing per layer)"
    ),
    compile_model: bool = typer.Option(False, "--compile", help="torch.compile the model"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
    nproc: int = typer.Option(
        1, "--nproc", help="processes through torchrun (DDP; gloo on CPU, NCCL on GPU)"
    ),
    fsdp: bool = typer.Option(False, "--fsdp", help="fully sharded data parallel instead of DDP"),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="CPU threads per process (default: the cores shared out over --nproc)",
    ),
    data: list[str] | None = typer.Option(
        None,
        "--data",
        help="text files, a folder, or JSONL with a `text` "
        "field (repeatable); default: the Python standard library's source",
    ),
    lr: float = typer.Option(1e-3, "--lr", help="AdamW learning rate"),
    seed: int = typer.Option(0, "--seed"),
    remeasure: bool = typer.Option(
        False, "--remeasure", help="measure the machine again (else the cached figures)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
    out: str | None = typer.Option(
        None, "--out", help="append a versioned record to this JSONL file"
    ),
    finetune: str | None = typer.Option(
        None,
        "--finetune",
        help="lora, full or freeze: fine-tune a Hugging Face Llama "
        "built from the spec with PEFT (pip install 'trilemma[finetune]'); qlora "
        "needs a GPU's nf4 kernels",
    ),
    lora_rank: int | None = typer.Option(None, "--lora-rank", help="LoRA rank (default 16)"),
    lora_alpha: float | None = typer.Option(None, "--lora-alpha", help="LoRA alpha (default 32)"),
    lora_targets: str | None = typer.Option(
        None, "--lora-targets", help="attn, mlp, all-linear (default) or module names"
    ),
    trainable_layers: int | None = typer.Option(
        None, "--trainable-layers", help="with --finetune freeze: the last N layers train"
    ),
) -> None:
    """Train a real model on this machine; print what was measured beside what `estimate` predicts."""
    from trilemma.probe import run_probe

    result = run_probe(
        model,
        layers=layers,
        d_model=d_model,
        heads=heads,
        kv_heads=kv_heads,
        ffn=ffn,
        vocab=vocab,
        seq=seq,
        micro_batch=micro_batch,
        grad_accum=grad_accum,
        steps=steps,
        warmup=warmup,
        precision=precision,
        recompute=recompute,
        compile=compile_model,
        device=device,
        nproc=nproc,
        fsdp=fsdp,
        threads=threads,
        data=data,
        seed=seed,
        lr=lr,
        remeasure=remeasure,
        progress=not as_json and sys.stderr.isatty(),
        out=out,
        finetune=finetune,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        lora_targets=lora_targets,
        trainable_layers=trainable_layers,
    )
    if as_json:
        from trilemma.report.jsonout import print_json

        print_json(result.to_dict())
    else:
        from trilemma.report.probe import print_probe

        print_probe(result)
    if result.run.interrupted:
        raise Interrupted(
            f"interrupted after {result.run.steps_done} of {result.run.steps} steps; the figures "
            "above cover the steps done" + (f" and were appended to {out}" if out else "")
        )


class Interrupted(TrilemmaError):
    """Ctrl-C during training: what was measured is printed (and recorded); exit status 130."""

    exit_code = 130
