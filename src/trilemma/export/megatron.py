"""Megatron-LM: a launch script (torchrun over pretrain_gpt.py) with the plan as command-line arguments.

Argument names, arities and choices: NVIDIA/Megatron-LM commit d98e8a64ddf34856e74b24714e3bedb2f5a39553
(2026-08-22), megatron/training/arguments.py (add_megatron_arguments; many options generated from
megatron-core's TransformerConfig / ModelParallelConfig fields, megatron/training/argument_utils.py);
the option table is tests/data/megatron_lm_args.tsv (scripts/megatron_flags.py). Uneven pipeline
stages use --decoder-first/last-pipeline-num-layers; ZeRO-2/3 use Megatron-FSDP's sharding strategies
(--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads / optim_grads_params), ZeRO-1 the
distributed optimizer.
"""

from __future__ import annotations

import shlex
from typing import Any

from trilemma.export.checkpoint import megatron_args
from trilemma.export.document import ExportDocument
from trilemma.export.escape import comment_text
from trilemma.export.megatron_layers import mla_args, moe_args
from trilemma.export.plan import ExportError, FineTune, PlanNumbers, recipe, warmup_steps
from trilemma.export.torchtitan import stage_modules
from trilemma.specs import ModelSpec, Optimizer, Precision, Recompute, TrainingPlan, ZeroStage
from trilemma.specs.enums import FfnType, NormType, PositionType
from trilemma.specs.plan import EAGER_SOFTMAX_PASSES

ENGINE = "megatron"
VERSION = "Megatron-LM commit d98e8a64ddf3 (megatron/training/arguments.py)"

Arg = tuple[str, Any]  # (flag, value); value None for a switch


def _model_args(m: ModelSpec, n: PlanNumbers) -> list[Arg]:
    """The model's shape and architecture flags; ExportError for what pretrain_gpt.py cannot build."""
    if not m.causal:
        raise ExportError(
            ENGINE,
            "model",
            f"{m.name} (an encoder)",
            "the exporter writes GPT pretraining (pretrain_gpt.py)",
        )
    a: list[Arg] = [
        ("--num-layers", m.n_layers),
        ("--hidden-size", m.d_model),
        ("--ffn-hidden-size", m.ffn_dim),
        ("--num-attention-heads", m.n_heads),
    ]
    if m.kv_heads != m.n_heads:
        a += [("--group-query-attention", None), ("--num-query-groups", m.kv_heads)]
    if m.d_head * m.n_heads != m.d_model:
        a.append(("--kv-channels", m.d_head))
    a += _position_args(m, n)
    a.append(("--normalization", "RMSNorm" if m.norm == NormType.RMSNORM else "LayerNorm"))
    if m.ffn_type == FfnType.SWIGLU:
        a.append(("--swiglu", None))
    elif m.ffn_type != FfnType.GELU:
        raise ExportError(
            ENGINE, "ffn", m.ffn_type, "Megatron-LM's MLP is GeLU or SwiGLU (--swiglu)"
        )
    if m.parallel_block or m.embedding_norm or not m.final_norm:
        raise ExportError(
            ENGINE,
            "model",
            f"{m.name} (block layout)",
            "Megatron-LM's GPT is a pre-norm sequential block with a final norm",
        )
    a += _bias_args(m)
    if not m.tied_embeddings:
        a.append(("--untie-embeddings-and-output-weights", None))
    if not m.dropout:  # Megatron-LM's defaults are 0.1
        a += [("--attention-dropout", 0.0), ("--hidden-dropout", 0.0)]
    a += mla_args(m) + moe_args(m)
    return a


def _position_args(m: ModelSpec, n: PlanNumbers) -> list[Arg]:
    """--position-embedding-type and --max-position-embeddings (learned: the model's; else the
    sequence)."""
    pos = {
        PositionType.ROTARY: "rope",
        PositionType.LEARNED: "learned_absolute",
        PositionType.NONE: "none",
    }
    if m.position not in pos:
        raise ExportError(
            ENGINE,
            "position",
            m.position,
            "Megatron-LM's --position-embedding-type has rope, "
            "learned_absolute, yarn, mrope, relative (T5 buckets) and none",
        )
    return [
        ("--position-embedding-type", pos[m.position]),
        (
            "--max-position-embeddings",
            m.max_positions if m.position == PositionType.LEARNED else n.seq_len,
        ),
    ]


def _bias_args(m: ModelSpec) -> list[Arg]:
    """The linear-bias flags: all biased (none), none, or only the QKV projection."""
    bias = (m.qkv_bias, m.out_bias, m.mlp_bias)
    if bias == (False, False, False):
        return [("--disable-bias-linear", None)]
    if bias == (True, False, False):
        return [("--disable-bias-linear", None), ("--add-qkv-bias", None)]
    if bias != (True, True, True):
        raise ExportError(
            ENGINE,
            "biases",
            f"qkv={m.qkv_bias} out={m.out_bias} mlp={m.mlp_bias}",
            "Megatron-LM biases all linears, none, or only the QKV projection (--add-qkv-bias)",
        )
    return []


def pipeline_layout(n_layers: int, chunks: int) -> str:
    """Megatron-LM's --pipeline-model-parallel-layout for uneven virtual stages: one '|'-separated entry per
    virtual stage in layer order (Megatron's 1-D layout: entry vpp_rank·pp + pp_rank, megatron/core/transformer/
    pipeline_parallel_layer_layout.py), 't' a transformer layer ('t*7' seven), the embedding 'E' before the
    first and the loss 'L' after the last; the layers per stage as trilemma times them (trilemma.estimate.
    pipeline.stage_layers, the placement of trilemma.export.torchtitan.stage_modules). 126 layers in 64 stages:
    "Et|(t*2|)*62,tL" (Megatron drops the commas)."""
    counts = [sum(x.startswith("layers.") for x in s) for s in stage_modules(n_layers, chunks)]
    stages = [("t" * min(c, 1) if c <= 1 else f"t*{c}") for c in counts]
    stages[0], stages[-1] = "E" + stages[0], stages[-1] + "L"
    out, i = "", 0
    while i < len(stages):  # a run of k ≥ 3 equal stages as "(s|)*k", Megatron's own repetition
        k = 1
        while i + k < len(stages) and stages[i + k] == stages[i]:
            k += 1
        out += f"({stages[i]}|)*{k}," if k >= 3 else (stages[i] + "|") * k  # the comma is cosmetic
        i += k
    return out[:-1]  # the last stage ends in L, alone in its run: drop its separator


def _stage_args(m: ModelSpec, n: PlanNumbers) -> list[Arg]:
    """Pipeline degree, virtual stages, and uneven first/last stages (the heaviest stage holds
    ⌈layers / pp⌉ layers, trilemma.estimate.pipeline.stage_layers; the first and last take the rest)."""
    a: list[Arg] = [("--pipeline-model-parallel-size", n.pp)]
    if n.pp == 1:
        return a
    if n.vp > 1:
        if m.n_layers % (n.pp * n.vp):
            return a + [
                ("--pipeline-model-parallel-layout", pipeline_layout(m.n_layers, n.pp * n.vp))
            ]
        return a + [("--num-virtual-stages-per-pipeline-rank", n.vp)]
    if m.n_layers % n.pp:
        per = -(-m.n_layers // n.pp)
        rest = m.n_layers - per * (n.pp - 2)
        first = rest // 2
        if first < 1 and n.pp > 2:  # an end stage with the embedding or the head alone
            return a + [("--pipeline-model-parallel-layout", pipeline_layout(m.n_layers, n.pp))]
        if n.pp == 2 or first < 1:
            raise ExportError(
                ENGINE, "pp", n.pp, f"{m.n_layers} layers cannot be split with full middle stages"
            )
        a += [
            ("--decoder-first-pipeline-num-layers", first),
            ("--decoder-last-pipeline-num-layers", rest - first),
        ]
    return a


def arguments(
    m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None
) -> tuple[list[Arg], list[str]]:
    """pretrain_gpt.py's arguments for the plan and the notes that go with them."""
    if ft is not None:
        raise ExportError(
            ENGINE,
            "fine-tune",
            ft.method,
            "Megatron-LM's training arguments have no adapters or "
            "quantised frozen base (use --to hf)",
        )
    if pl.compile:
        raise ExportError(ENGINE, "compile", "on", "Megatron-LM has no torch.compile switch")
    notes: list[str] = []
    a = _model_args(m, n)
    a += _parallel_args(m, pl, n, notes)
    a += _recompute_args(n)
    a += [
        ("--micro-batch-size", n.micro_batch),
        ("--global-batch-size", n.global_batch),
        ("--seq-length", n.seq_len),
        ("--train-iters", n.steps),
    ]
    a += _precision_args(pl, notes)
    a += _kernel_args(pl, notes)
    rec = recipe(ft)
    a += _optimizer_args(pl, n, rec)
    a += megatron_args(n.checkpoint, fsdp=n.zero in (ZeroStage.TWO, ZeroStage.THREE))
    notes.append(f"recipe: {rec['source']} (Megatron-LM's adam is AdamW: decoupled weight decay)")
    if n.checkpoint is not None:
        notes.append(n.checkpoint.note("--save-interval with --async-save, --load resumes"))
    return a, notes


def _parallel_args(m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, notes: list[str]) -> list[Arg]:
    """The parallel degrees, sequence parallelism (with async TP's overlap) and the ZeRO stage."""
    a: list[Arg] = [("--tensor-model-parallel-size", n.tp)] + _stage_args(m, n)
    if n.cp > 1:
        a.append(("--context-parallel-size", n.cp))
    if n.ep > 1:
        a.append(("--expert-model-parallel-size", n.ep))
    if n.sp:
        a.append(("--sequence-parallel", None))
        if (
            pl.async_tp
        ):  # Transformer Engine's userbuffers overlap of TP's collectives with the GEMMs
            a.append(("--tp-comm-overlap", None))
            notes.append(
                "--tp-comm-overlap: Transformer Engine's userbuffers overlap TP's all-gathers and "
                "reduce-scatters with the GEMMs; it needs Transformer Engine (--transformer-impl "
                "transformer_engine)"
            )
    zero = {
        ZeroStage.ONE: [("--use-distributed-optimizer", None)],
        ZeroStage.TWO: [
            ("--use-megatron-fsdp", None),
            ("--data-parallel-sharding-strategy", "optim_grads"),
        ],
        ZeroStage.THREE: [
            ("--use-megatron-fsdp", None),
            ("--data-parallel-sharding-strategy", "optim_grads_params"),
        ],
    }
    a += zero.get(n.zero, [])
    return a


def _recompute_args(n: PlanNumbers) -> list[Arg]:
    """Selective (the attention core) or full (every layer) recomputation; ExportError for op-level."""
    a: list[Arg] = []
    if n.recompute == Recompute.SELECTIVE:
        a.append(
            ("--recompute-granularity", "selective")
        )  # the attention core (core_attn), Korthikanti 2022
    elif n.recompute == Recompute.FULL:
        a += [
            ("--recompute-granularity", "full"),
            ("--recompute-method", "uniform"),
            ("--recompute-num-layers", 1),
        ]
    elif n.recompute == Recompute.OP:
        raise ExportError(
            ENGINE,
            "recompute",
            n.recompute,
            "torchtitan's op-level recomputation has no "
            "Megatron-LM equivalent (--recompute-modules names whole modules)",
        )
    return a


def _precision_args(pl: TrainingPlan, notes: list[str]) -> list[Arg]:
    """The precision flags (fp8: Transformer Engine's hybrid format)."""
    a: list[Arg] = []
    prec = pl.precision
    if prec == Precision.BF16:
        a.append(("--bf16", None))
    elif prec == Precision.FP16:
        a.append(("--fp16", None))
        notes.append(
            "fp16: Megatron-LM scales the loss dynamically (no --loss-scale), from --initial-loss-scale 2^32"
        )
    elif prec == Precision.FP8:
        a += [("--bf16", None), ("--fp8-format", "hybrid")]
        notes.append(
            "fp8: Transformer Engine's hybrid format (e4m3 forward, e5m2 gradients); needs transformer-engine"
        )
    else:
        notes.append(
            f"{prec}: no precision flag (fp32 parameters and matmuls; TF32 follows PyTorch's setting)"
        )
    return a


def _kernel_args(pl: TrainingPlan, notes: list[str]) -> list[Arg]:
    """The attention backend, the unfused softmax and the fused cross-entropy."""
    a: list[Arg] = []
    a.append(("--attention-backend", "flash" if pl.flash_attention else "unfused"))
    if not pl.flash_attention and pl.softmax_passes > 1:
        # Megatron-LM's FusedScaleMaskSoftmax without its fused kernel: scale, mask, torch.softmax (3 passes)
        a.append(("--no-masked-softmax-fusion", None))
        if pl.softmax_passes != EAGER_SOFTMAX_PASSES:
            notes.append(
                f"softmax_passes {pl.softmax_passes}: Megatron-LM's unfused softmax makes "
                f"{EAGER_SOFTMAX_PASSES} passes over the "
                "score matrix (scale, mask, torch.softmax), its fused one 1; the plan was timed with "
                f"{pl.softmax_passes}"
            )
    if pl.fused_loss:
        a.append(("--cross-entropy-loss-fusion", None))
    return a


def _optimizer_args(pl: TrainingPlan, n: PlanNumbers, rec: dict[str, Any]) -> list[Arg]:
    """The optimizer and its schedule from the recipe ``rec``."""
    a: list[Arg] = []
    a += [
        ("--optimizer", "adam" if pl.optimizer == Optimizer.ADAMW else "sgd"),
        ("--lr", rec["lr"]),
        ("--min-lr", float(format(rec["lr"] * rec["min_lr_ratio"], ".6g"))),
        ("--lr-decay-style", rec["decay"]),
        ("--lr-warmup-iters", warmup_steps(rec, n.steps)),
        ("--lr-decay-iters", n.steps),
        ("--weight-decay", rec["weight_decay"]),
        ("--clip-grad", rec["grad_clip"]),
        ("--adam-beta1", rec["adam_beta1"]),
        ("--adam-beta2", rec["adam_beta2"]),
        ("--adam-eps", rec["adam_eps"]),
    ]
    return a


def export(
    m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None, plan: dict[str, Any]
) -> ExportDocument:
    args, notes = arguments(m, pl, n, ft)
    nodes, per_node = n.nodes
    lines = [
        "#!/usr/bin/env bash",
        f"# Megatron-LM: {comment_text(plan['title'])}",
        f"# GPUs {n.n_gpus} = tp {n.tp} × pp {n.pp} × cp {n.cp} × dp {n.dp}; global batch {n.global_batch} "
        f"sequences = micro-batch {n.micro_batch} × accumulation {n.accumulation} × dp {n.dp}",
        f"# steps {n.steps} × {n.global_batch} × {n.seq_len} tokens = {n.tokens:,} tokens",
        "# Run from a Megatron-LM checkout on each node (NODE_RANK 0 .. nodes-1, MASTER_ADDR of node 0).",
        "set -euo pipefail",
        ': "${DATA_PATH:?set DATA_PATH to the preprocessed data prefix (tools/preprocess_data.py)}"',
        ': "${TOKENIZER:?set TOKENIZER to a Hugging Face tokenizer name or path}"',
        f'torchrun --nnodes {nodes} --nproc-per-node {per_node} --node-rank "${{NODE_RANK:-0}}" '
        '--master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \\',
        "  pretrain_gpt.py \\",
    ]
    for flag, value in args:
        lines.append(
            f"  {flag} \\" if value is None else f"  {flag} {shlex.quote(_text(value))} \\"
        )
    lines += [
        '  --data-path "$DATA_PATH" \\',
        "  --tokenizer-type HuggingFaceTokenizer \\",
        '  --tokenizer-model "$TOKENIZER" \\',
        '  --save "${SAVE:-checkpoints}" \\',
        '  --load "${SAVE:-checkpoints}"',
        "",
    ]
    notes = [
        f"the tokenizer sets the vocabulary: the plan has {m.vocab_size:,} tokens (Megatron-LM pads it to a "
        "multiple of 128 × tp, --make-vocab-size-divisible-by)"
    ] + notes
    cfg = {
        "launcher": {"nnodes": nodes, "nproc_per_node": per_node, "script": "pretrain_gpt.py"},
        "args": [[f, v] for f, v in args],
    }
    return ExportDocument(
        engine=ENGINE,
        engine_version=VERSION,
        files={"train_megatron.sh": "\n".join(lines)},
        config=cfg,
        numbers=n,
        plan=plan,
        notes=tuple(notes),
    )


def _text(v: Any) -> str:
    return format(v, ".6g") if isinstance(v, float) else str(v)


__all__ = ["ENGINE", "VERSION", "arguments", "export"]
