"""The columns of a backtest row (trilemma.validate.schema): each with its type, parser, allowed
values, unit and whether it is required, and the published-record columns carried unread.
``data/SCHEMA.md`` documents the same list for people."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from trilemma.errors import InputError
from trilemma.specs import FfnType, NormType, Optimizer, PositionType, Precision, Task
from trilemma.specs.axes import AXES
from trilemma.specs.axis import MAX_DEGREE, Axis
from trilemma.validate import Metric

#: separates the phrases of the ``assumptions`` cell
ASSUMPTION_SEP = " | "
#: metrics a row may report that the mapper converts to a Case metric (trilemma.validate.cases): a source's
#: sequences (samples) per second per device is tokens per second per device over the row's seq_len
CONVERTED_METRICS: dict[str, str] = {"sequences_per_s_per_gpu": "tokens_per_s_per_gpu"}
METRICS: tuple[str, ...] = get_args(Metric) + tuple(CONVERTED_METRICS)
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


@dataclass(frozen=True)
class Column:
    """One column: name, how a cell is read, what is allowed (in words), unit, required, meaning."""

    name: str
    parse: Callable[[str], Any]  # raises ValueError on a bad cell
    allowed: str
    unit: str = ""
    required: bool = False
    doc: str = ""


def _int_ge(lo: int) -> Callable[[str], int]:
    """A whole number from ``lo`` to MAX_DEGREE (beyond it the int64 layout arithmetic overflows and the
    divisor search of a GPU count would not end)."""

    def parse(s: str) -> int:
        v = float(s)
        if not (math.isfinite(v) and v == int(v) and lo <= v <= MAX_DEGREE):
            raise ValueError(s)
        return int(v)

    return parse


def _positive(s: str) -> float:
    v = float(s)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(s)
    return v


def _bool(s: str) -> bool:
    low = s.lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise ValueError(s)


def _choice(values: tuple[str, ...]) -> Callable[[str], str]:
    def parse(s: str) -> str:
        if s not in values:
            raise ValueError(s)
        return s

    return parse


def _enum_values(e: Any) -> tuple[str, ...]:
    return tuple(x.value for x in e)


def _text(s: str) -> str:
    return s


_POS, _WHOLE, _ZERO_UP = "a positive number", "a whole number ≥ 1", "a whole number ≥ 0"
_BOOL = "true or false"


def _one_of(values: tuple[str, ...]) -> str:
    return "one of " + ", ".join(values)


def _axis_column(a: Axis) -> Column:
    """A layout column from its axis: read as the CLI flag is (``Axis.parse``), same words when bad."""

    def parse(s: str) -> Any:
        if a.kind is bool:
            return _bool(s)
        try:
            return a.parse(s)
        except InputError:
            raise ValueError(s) from None

    unit = "sequences" if a.name == "micro_batch" else ""
    return Column(a.name, parse, _BOOL if a.kind is bool else a.allowed(), unit=unit, doc=a.help)


_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
#: the software stacks a row may name (``stack``): the training code that produced the measurement
STACKS: tuple[str, ...] = (
    "megatron-lm",  # Megatron-LM of the 2019-2023 papers (Shoeybi 2019, Narayanan 2021, Korthikanti 2022)
    "megatron-core",  # Megatron-Core / NeMo, 2024 on
    "megatron-deepspeed",  # Megatron-DeepSpeed (BLOOM, MT-NLG)
    "deepspeed",  # DeepSpeed without Megatron
    "gpt-neox",  # EleutherAI GPT-NeoX (GPT-NeoX-20B, Pythia)
    "torchtitan",  # torchtitan, and torchao's benchmarks run in it
    "llm-foundry",  # MosaicML Composer / llm-foundry
    "hf-trainer",  # Hugging Face Trainer / accelerate, eager PyTorch
    "hf-fsdp",  # the Hugging Face Trainer with FSDP
    "hf-deepspeed",  # the Hugging Face Trainer with DeepSpeed
    "unsloth",  # Unsloth's Triton kernels in the Hugging Face Trainer
    "maxtext",  # MaxText (JAX)
    "pax",  # PaLM's JAX / Pathways stack
    "nanogpt",  # nanoGPT, modded-nanogpt
    "llm.c",  # karpathy/llm.c
    "metaseq",  # metaseq (OPT)
    "lit-gpt",  # Lightning lit-gpt, before TinyLlama's fork
    "tinyllama",  # TinyLlama's fork of lit-gpt (FlashAttention-2, fused kernels)
    "meta-llama",  # Meta's internal Llama training stack as Llama 3 describes it
    "meta-llama-2023",  # Meta's LLaMA / Llama 2 training code (xformers attention)
    "gigatron",  # Falcon's Gigatron
    "nanotron",  # Hugging Face nanotron
    "pytorch-eager",  # a hand-written eager PyTorch training loop
    "hai-llm",  # DeepSeek's HAI-LLM (DeepSeek-V3)
)
_C = Column
#: the heads a row's model may have (TrainingPlan.task; data/finetune_memory.csv uses the same words)
TASKS: tuple[str, ...] = _enum_values(Task)

COLUMNS: tuple[Column, ...] = (
    # what the row is
    _C(
        "model",
        _text,
        "text",
        doc="the row's name as the source gives it (throughput and memory files: `model_or_size`)",
    ),
    _C("source", _text, "text", doc="where the figures come from (paper, table, URL)"),
    _C("notes", _text, "text", doc="free text for people; never read by the mapper"),
    _C("group", _text, "text", doc="the leave-one-source-out unit (default: the source)"),
    _C(
        "skip_reason",
        _text,
        "text",
        doc="non-empty: the row is listed as skipped with this reason; nothing else in it is read",
    ),
    _C(
        "assumptions",
        _text,
        f"phrases separated by '{ASSUMPTION_SEP.strip()}'",
        doc="what was assumed to write the row's plan; shown with each backtest row",
    ),
    _C(
        "stack",
        _choice(STACKS),
        _one_of(STACKS),
        doc="the software stack whose training code ran the measurement; carried with the row's "
        "case (empty: not given)",
    ),
    # the figure to compare with
    _C("metric", _choice(METRICS), _one_of(METRICS), required=True, doc="what `reported` measures"),
    _C(
        "reported",
        _positive,
        _POS,
        unit="by metric: gpu_hours and busy_gpu_hours h, days d, tokens_per_s_per_gpu tokens/s per "
        "GPU, sequences_per_s_per_gpu sequences/s per GPU, *_tflops_per_gpu TFLOP/s per GPU, mfu/hfu percent 0-100, step_s and forward_backward_s s, peak_memory_bytes, peak_reserved_bytes and peak_allocated_bytes GiB",
        required=True,
        doc="the measured value",
    ),
    _C(
        "flop_convention",
        _choice(("model", "hardware")),
        "model or hardware",
        doc="how the source counts FLOPs: hardware FLOPs include recomputation; must agree with the metric "
        "(mfu/model_tflops_per_gpu: model, hfu/hardware_tflops_per_gpu: hardware)",
    ),
    # hardware
    _C("gpu", _text, "a hardware preset name (`trilemma presets hardware`)", required=True),
    _C("n_gpus", _int_ge(1), _WHOLE, required=True, doc="devices in the measured job"),
    _C(
        "gpu_type",
        _text,
        "text",
        doc="the device as the source names it; with an override it names the "
        "hardware in the output",
    ),
    _C(
        "gpu_hbm_gib",
        _positive,
        _POS,
        unit="GiB",
        doc="device memory when it differs from the preset's",
    ),
    _C(
        "gpu_power_w",
        _positive,
        _POS,
        unit="W",
        doc="board power when it differs from the preset's",
    ),
    _C(
        "gpu_inter_node_gb_s",
        _positive,
        _POS,
        unit="GB/s",
        doc="network bandwidth per device to other nodes "
        "(one direction, 10^9 bytes/s) when the cluster's differs from the preset's",
    ),
    # model
    _C(
        "model_preset",
        _text,
        "a model preset name (`trilemma presets models`)",
        doc="the model; dimension columns given beside it override the preset's",
    ),
    _C(
        "arch",
        _text,
        "a model preset name",
        doc="without model_preset: the preset whose block architecture "
        "(norms, positions, MLP type, biases …) the row's dimensions are built in",
    ),
    _C("family", _text, "text", doc="family name of a model built from dimensions"),
    _C("ffn_type", _choice(_enum_values(FfnType)), _one_of(_enum_values(FfnType))),
    _C("position", _choice(_enum_values(PositionType)), _one_of(_enum_values(PositionType))),
    _C("norm", _choice(_enum_values(NormType)), _one_of(_enum_values(NormType))),
    _C("tied_embeddings", _bool, _BOOL),
    _C("bias", _bool, _BOOL, doc="biases on the QKV, output and MLP projections"),
    _C("n_layers", _int_ge(1), _WHOLE),
    _C("d_model", _int_ge(1), _WHOLE),
    _C("n_heads", _int_ge(1), _WHOLE),
    _C("n_kv_heads", _int_ge(1), _WHOLE, doc="key/value heads (GQA/MQA); default n_heads"),
    _C("head_dim", _int_ge(1), _WHOLE, doc="default d_model / n_heads"),
    _C("ffn_dim", _int_ge(1), _WHOLE),
    _C("vocab", _int_ge(1), _WHOLE),
    _C("max_positions", _int_ge(1), _WHOLE, doc="learned positions: default seq_len"),
    _C("seq_len", _int_ge(1), _WHOLE, unit="tokens", required=True),
    # plan
    _C(
        "tokens",
        _positive,
        _POS,
        unit="tokens",
        doc="training tokens (runs: required for gpu_hours, days and busy_gpu_hours); "
        "default 100 global batches (a rate needs only a step)",
    ),
    _C(
        "global_batch",
        _positive,
        _POS,
        unit="sequences",
        doc="global batch; or give global_batch_tokens",
    ),
    _C("global_batch_tokens", _positive, _POS, unit="tokens"),
    _C(
        "batch_exact",
        _bool,
        _BOOL,
        doc="false: the batch is a target, rounded to a multiple of "
        "dp × micro_batch (default true)",
    ),
    _C(
        "grad_accum",
        _int_ge(1),
        _WHOLE,
        doc="with micro_batch and dp, gives the global batch when none is given",
    ),
    _C(
        "precision",
        _choice(_enum_values(Precision)),
        _one_of(_enum_values(Precision)),
        doc="compute precision (default bf16)",
    ),
    _C("flash", _bool, _BOOL, doc="FlashAttention (default true)"),
    _C(
        "softmax_passes",
        _int_ge(1),
        _WHOLE,
        doc="without FlashAttention, passes of the softmax over the score "
        "matrix, each a read and a write (default 1: Megatron-LM's fused kernel; 3: eager PyTorch)",
    ),
    _C(
        "fused_loss",
        _bool,
        _BOOL,
        doc="a fused cross-entropy kernel, as Megatron-LM and llm-foundry run (default "
        "false: eager PyTorch)",
    ),
    _C(
        "compile",
        _bool,
        _BOOL,
        doc="the model ran under torch.compile (inductor): a gated MLP saves 3 hidden "
        "tensors instead of 4 (default false)",
    ),
    _C(
        "async_tp",
        _bool,
        _BOOL,
        doc="asynchronous tensor parallelism (torchtitan's AsyncTP, Megatron-Core's "
        "--tp-comm-overlap): the forward's TP collectives overlapped with their matmuls under sequence parallelism "
        "(default false)",
    ),
    _C(
        "task",
        _choice(TASKS),
        _one_of(TASKS),
        doc="what the model's head predicts: causal-lm (default), a "
        "vocabulary's logits, or classification, a few classes (the plan's task: no LM head, no vocabulary logits)",
    ),
    _C(
        "optimizer",
        _choice(_enum_values(Optimizer)),
        _one_of(_enum_values(Optimizer)),
        doc="default adamw",
    ),
    _C("grad_dtype", _choice(_DTYPES), _one_of(_DTYPES), doc="default fp32"),
    _C(
        "optimizer_state_dtype",
        _choice(_DTYPES),
        _one_of(_DTYPES),
        doc="default that of the precision",
    ),
    _C(
        "attention_probs_dtype",
        _choice(_DTYPES),
        _one_of(_DTYPES),
        doc="dtype of the attention probabilities when "
        "flash is off: fp32 under torch.autocast (softmax autocasts to float32); default the activations'",
    ),
    _C(
        "norm_input_dtype",
        _choice(_DTYPES),
        _one_of(_DTYPES),
        doc="dtype a norm keeps its input in: fp32 where an "
        "eager norm runs in fp32 (torch.autocast's layer_norm, Hugging Face's LlamaRMSNorm); default the activations'",
    ),
    # layout: an empty cell is searched, a given one is pinned; the columns are the registry's axes
    *(_axis_column(a) for a in AXES),
)
BY_NAME = {c.name: c for c in COLUMNS}
LAYOUT_AXES: tuple[str, ...] = tuple(a.name for a in AXES)

#: the published record: carried as it was published, documented in data/README.md, never read
PUBLISHED: frozenset[str] = frozenset(
    {
        "model_or_size",
        "params",
        "params_total",
        "params_active",
        "energy_mwh_reported",
        "co2_t_reported",
        "gpu_hours_reported",
        "days_reported",
        "mfu_or_tflops_reported",
        "tflops_per_gpu_reported",
        "mfu_reported",
        "step_time_s_reported",
        "tokens_per_s_reported",
        "sequences_per_s_reported",
        "peak_memory_gb_reported",
        "what_is_counted",
        "zero_stage_or_fsdp",
    }
) | {f"{c.name}_published" for c in COLUMNS}
