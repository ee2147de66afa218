"""What ``run_probe`` runs, resolved and checked before anything is measured: the model
(``probe_model``), where and how to train, and the sequence length."""

from __future__ import annotations

import math
from typing import Any

from trilemma.errors import InputError
from trilemma.probe.machine import usable_cores
from trilemma.specs import ModelSpec, PositionType

__all__ = ["BYTE_VOCAB", "DEFAULTS", "PRECISIONS", "model_and_seq", "probe_model", "settings"]

#: the bare `trilemma probe`: a 4-layer GPT-2-style byte-level model, 8 × 256 tokens per step,
#: 30 steps (5 warm-up); ~15 s of training on 2 idle cores, under a minute with the microbenchmark
DEFAULTS = {
    "layers": 4,
    "d_model": 256,
    "heads": 4,
    "ffn": 1024,
    "vocab": 256,
    "seq": 256,
    "micro_batch": 8,
    "steps": 30,
    "lr": 1e-3,
}
BYTE_VOCAB = 256
PRECISIONS = ("fp32", "bf16", "fp16")
MAX_STEPS = 100_000  # optimizer steps of one probe (the default is 30)
MAX_LR = 1.0  # AdamW learning rates in use are 1e-5 to 1e-2; above 1 a run only diverges


# ------------------------------------------------------------------ model


def probe_model(
    model: str | ModelSpec | None = None,
    *,
    layers: int | None = None,
    d_model: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    ffn: int | None = None,
    vocab: int | None = None,
) -> tuple[ModelSpec, str]:
    """The model to train and how it was chosen. Dimensions given replace the base model's and the
    rest follow its proportions (head width, GQA ratio, ffn/d_model); a scaled-down model reads
    bytes, so its vocabulary becomes 256 unless ``vocab`` is given."""
    from trilemma.presets import get_model
    from trilemma.resolve import resolve_model

    dims = {
        "layers": layers,
        "d_model": d_model,
        "heads": heads,
        "kv_heads": kv_heads,
        "ffn": ffn,
        "vocab": vocab,
    }
    for k, v in dims.items():
        if v is not None and (not isinstance(v, int) or v < 1):
            raise InputError(k.replace("_", "-"), v, "a positive whole number")
    if model is None:
        base = get_model("gpt2-124m")
        dims = {k: DEFAULTS[k] if k in DEFAULTS and v is None else v for k, v in dims.items()}
        base = base.replace(dropout=False)
        how = "default: a small GPT-2-style model (learned positions, LayerNorm, GELU, tied head), byte-level"
    else:
        base, how = resolve_model(model)
        if base.is_mla:  # the probe's torch model (trilemma.probe.model) has no latent attention
            raise InputError(
                "model",
                base.name,
                "a model without multi-head latent attention: the probe has none",
            )
    if all(v is None for v in dims.values()):
        return base, how
    d = dims["d_model"] or base.d_model
    h, kv = _heads(base, d, dims["heads"], dims["kv_heads"], d_model_given=bool(dims["d_model"]))
    scale = d / base.d_model
    f = dims["ffn"] or max(8, round(base.ffn_dim * scale / 8) * 8)
    fields: dict[str, Any] = {
        "n_layers": dims["layers"] or base.n_layers,
        "d_model": d,
        "n_heads": h,
        "n_kv_heads": kv,
        "head_dim": None,
        "ffn_dim": f,
        "vocab_size": dims["vocab"] or (BYTE_VOCAB if base.causal else BYTE_VOCAB + 1),
        "seq_len": None,
        "global_batch_tokens": None,
        "tokens": None,
        "aliases": (),
    }
    if base.is_moe:
        fields["expert_ffn_dim"] = (
            None if base.expert_ffn_dim is None else max(8, round(base.expert_ffn * scale / 8) * 8)
        )
        fields["first_dense_layers"] = min(base.first_dense_layers, fields["n_layers"] - 1)
    spec = base.replace(**fields)
    tag = f"L{spec.n_layers} d{spec.d_model} h{spec.n_heads}/{spec.kv_heads} f{spec.ffn_dim} V{spec.vocab_size}"
    name = f"{base.name}-scaled" if model is not None else "probe-gpt2-small"
    spec = spec.replace(name=f"{name} ({tag})")
    return spec, (how if model is None else f"{how}, scaled down to {tag}")


def _heads(
    base: ModelSpec, d: int, heads: int | None, kv_heads: int | None, *, d_model_given: bool
) -> tuple[int, int]:
    """(attention heads, key/value heads) of the probe model of width ``d``: those given, else the
    base model's head width (a new ``d``) or head count kept, and its GQA ratio kept. InputError
    when they do not divide ``d`` and each other."""
    from trilemma.shape import nearest_divisor

    if heads:
        h = heads
    elif d_model_given:
        h = nearest_divisor(d, max(1, round(d / base.d_head)), log_scale=False)
    else:
        h = base.n_heads
    if d % h:
        raise InputError("heads", h, f"a divisor of d-model ({d})")
    group = base.n_heads // base.kv_heads
    kv = kv_heads or (
        1 if base.kv_heads == 1 else nearest_divisor(h, max(1, h // group), log_scale=False)
    )
    if h % kv:
        raise InputError("kv-heads", kv, f"a divisor of heads ({h})")
    return h, kv


# ------------------------------------------------------------------ the run's settings


def settings(
    torch: Any,
    device: str,
    precision: str | None,
    micro_batch: int,
    grad_accum: int,
    steps: int,
    warmup: int | None,
    recompute: str,
    compile: bool,
    nproc: int,
    fsdp: bool,
    threads: int | None,
    warnings: list[str],
    lr: float = DEFAULTS["lr"],
) -> tuple[str, str, int, int]:
    """Check where and how to train: (device, precision, warm-up steps, usable CPU cores); InputError for
    what cannot run."""
    device = str(device).strip().lower()
    precision = None if precision is None else str(precision).strip().lower()
    recompute = str(recompute).strip().lower()
    if device not in ("auto", "cpu", "cuda"):
        raise InputError("device", device, "auto, cpu or cuda")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device", "cuda", "cpu: this torch sees no CUDA device")
    for k, v in (
        ("micro-batch", micro_batch),
        ("grad-accum", grad_accum),
        ("steps", steps),
        ("nproc", nproc),
        ("threads", 1 if threads is None else threads),
    ):
        if not isinstance(v, int) or v < 1:
            raise InputError(k, v, "a positive whole number")
    if not (math.isfinite(lr) and 0 < lr <= MAX_LR):
        raise InputError("lr", lr, f"a learning rate above 0 and at most {MAX_LR:g}, e.g. 1e-3")
    if steps > MAX_STEPS:
        raise InputError(
            "steps",
            steps,
            f"at most {MAX_STEPS:,}: the probe measures a steady state, which tens of steps reach",
        )
    cores = usable_cores()
    if threads is not None and threads > cores:
        raise InputError("threads", threads, f"at most {cores}: this machine has {cores} cores")
    if device == "cpu" and nproc > cores:
        raise InputError(
            "nproc",
            nproc,
            f"at most {cores}: this machine has {cores} cores and each process needs one",
        )
    if device == "cuda" and nproc > torch.cuda.device_count():
        raise InputError(
            "nproc", nproc, f"at most {torch.cuda.device_count()}: one process per visible GPU"
        )
    if fsdp and nproc == 1:
        warnings.append(
            "--fsdp with one process shards nothing (ZeRO-3 over a data-parallel group of 1)"
        )
    if recompute not in ("none", "full"):
        raise InputError("recompute", recompute, "none or full")
    if precision is None:
        precision = (
            ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if device == "cuda" else "fp32"
        )
    if precision not in PRECISIONS:
        raise InputError("precision", precision, "fp32, bf16 or fp16")
    warmup = warmup if warmup is not None else min(5, max(1, steps // 6)) + (2 if compile else 0)
    if warmup < 0 or warmup >= steps:
        raise InputError(
            "warmup", warmup, f"fewer than --steps ({steps}): warm-up steps count inside --steps"
        )
    return device, precision, warmup, cores


def model_and_seq(
    model: str | ModelSpec | None, dims: dict[str, int | None], seq: int | None, warnings: list[str]
) -> tuple[ModelSpec, str, int]:
    """The model (see ``probe_model``; ``dims`` are its keywords), how it was chosen, and the sequence
    length in tokens (default: 256, or the model's positions if fewer)."""
    spec, how = probe_model(model, **dims)
    seq = seq if seq is not None else min(DEFAULTS["seq"], spec.max_positions)
    if not isinstance(seq, int) or seq < 2:
        raise InputError("seq", seq, "a whole number of tokens, at least 2")
    if spec.position == PositionType.LEARNED and seq > spec.max_positions:
        raise InputError(
            "seq",
            seq,
            f"at most {spec.max_positions}: {spec.name} has {spec.max_positions} learned positions",
        )
    if seq > spec.max_positions:
        warnings.append(f"seq {seq} is longer than {spec.name}'s context ({spec.max_positions})")
    need = BYTE_VOCAB if spec.causal else BYTE_VOCAB + 1
    if spec.vocab_size < need:
        raise InputError(
            "vocab",
            spec.vocab_size,
            f"at least {need}: tokens are bytes" + ("" if spec.causal else " plus [MASK]"),
        )
    return spec, how, seq
