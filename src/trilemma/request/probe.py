"""``ProbeRequest``: every input of `trilemma probe` (real training on this machine beside the
planner's prediction), each field written once.

What a value must be to run here (cores, devices, a warm-up shorter than the steps, a model that
fits) depends on the machine, and is checked by ``trilemma.probe.run_probe`` before anything is
measured.
"""

from __future__ import annotations

from typing import Any, ClassVar

from trilemma.errors import InputError
from trilemma.probe.inputs import DEFAULTS
from trilemma.request.field import Request, option
from trilemma.specs import ModelSpec

#: --data's help, as the ladder takes it too
DATA_HELP = (
    "text files, a folder, or JSONL with a `text` field (repeatable); default: the Python "
    "standard library's source"
)
FINETUNE_HELP = (
    "lora, full or freeze: fine-tune a Hugging Face Llama built from the spec with PEFT (pip "
    "install 'trilemma[finetune]'); qlora needs a GPU's nf4 kernels"
)


def sources(v: Any) -> tuple[str, ...]:
    """--data as its paths: one path, or a list of them (the flag is repeatable)."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) for x in items):
        raise InputError("data", v, "a path, or a list of paths")
    return tuple(items)


def _int(flag: str, help: str, default: Any = None) -> Any:
    return option(default, flag, help=help, kind="int")


class ProbeRequest(Request):
    """Train a real model on this machine; print what was measured beside what `estimate`
    predicts."""

    VERB: ClassVar[str] = "probe"

    model: str | ModelSpec | None = option(
        None,
        "--model",
        "-m",
        help="preset (scaled down by --layers/--d-model/...), a Hugging Face config.json; default: "
        "a small GPT-2-style model",
        kind="spec",
    )
    layers: int | None = _int("--layers", "layers (scales the model down)")
    d_model: int | None = _int("--d-model", "model width")
    heads: int | None = _int("--heads", "attention heads")
    kv_heads: int | None = _int("--kv-heads", "key/value heads (GQA)")
    ffn: int | None = _int("--ffn", "MLP hidden width")
    vocab: int | None = _int("--vocab", "vocabulary (tokens are bytes: at least 256)")
    seq: int | None = _int("--seq", "tokens per sequence (default 256)")
    micro_batch: int = _int(
        "--micro-batch", "sequences per micro-batch, per process", DEFAULTS["micro_batch"]
    )
    grad_accum: int = _int("--grad-accum", "micro-batches per optimizer step", 1)
    steps: int = _int("--steps", "optimizer steps, warm-up included", DEFAULTS["steps"])
    warmup: int | None = _int("--warmup", "steps left out of the statistics (default 5)")
    precision: str | None = option(
        None,
        "--precision",
        help="fp32, bf16 or fp16 (autocast); default fp32 on a CPU, bf16 on a GPU that has it",
    )
    recompute: str = option(
        "none", "--recompute", help="none or full (activation checkpointing per layer)"
    )
    compile: bool = option(False, "--compile", help="torch.compile the model", kind="bool")
    device: str = option("auto", "--device", help="auto, cpu or cuda")
    nproc: int = _int("--nproc", "processes through torchrun (DDP; gloo on CPU, NCCL on GPU)", 1)
    fsdp: bool = option(
        False, "--fsdp", help="fully sharded data parallel instead of DDP", kind="bool"
    )
    threads: int | None = _int(
        "--threads", "CPU threads per process (default: the cores shared out over --nproc)"
    )
    data: tuple[str, ...] | None = option(
        None, "--data", help=DATA_HELP, kind="items", parse=sources
    )
    lr: float = option(DEFAULTS["lr"], "--lr", help="AdamW learning rate", kind="number")
    seed: int = _int("--seed", "", 0)
    remeasure: bool = option(
        False,
        "--remeasure",
        help="measure the machine again (else the cached figures)",
        kind="bool",
    )
    out: str | None = option(None, "--out", help="append a versioned record to this JSONL file")
    finetune: str | None = option(None, "--finetune", help=FINETUNE_HELP)
    lora_rank: int | None = _int("--lora-rank", "LoRA rank (default 16)")
    lora_alpha: float | None = option(
        None, "--lora-alpha", help="LoRA alpha (default 32)", kind="number"
    )
    lora_targets: str | None = option(
        None, "--lora-targets", help="attn, mlp, all-linear (default) or module names"
    )
    trainable_layers: int | None = _int(
        "--trainable-layers", "with --finetune freeze: the last N layers train"
    )
