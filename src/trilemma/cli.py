"""The `trilemma` command: a thin layer over the Python API (trilemma.api)."""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any

import typer

from trilemma.errors import InputError, TrilemmaError
from trilemma.fileio import check_output, one_command
from trilemma.specs.axes import AXES, MAX_DEGREE
from trilemma.specs.bounds import BOUNDS, FAILURE_RATE_ALLOWED, MAX_SEQ
from trilemma.text import printable
from trilemma.units import (
    IEC,
    fmt_power,
    parse_bandwidth,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_power,
    parse_usd,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Speed, quality and cost of Transformer training: estimate a plan, list presets.",
)


_MAX_INT = MAX_DEGREE  # GPUs, sequence length, parallel degrees: beyond this the int64 layout arithmetic overflows


def layout_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command one option per layout axis of the registry (trilemma.specs.axes.AXES), parsed
    and collected into the ``layout`` dict the command receives (None for an axis not given)."""
    sig = inspect.signature(fn)
    axes = [a for a in AXES if a.flag is not None]
    params = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in sig.parameters.values()
        if p.name != "layout"
    ]
    extra = [
        inspect.Parameter(
            a.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(None, *a.flag.split("/")[:1], help=a.help)
            if a.kind is not bool
            else typer.Option(None, a.flag, help=a.help + " (default on)"),
            annotation=bool | None if a.kind is bool else str | None,
        )
        for a in axes
    ]
    at = next(
        i for i, p in enumerate(params) if p.name == "price"
    )  # after the run's own flags, before the cluster's

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        layout = {a.name: a.parse(kwargs.pop(a.name, None)) for a in axes}
        return fn(**kwargs, layout=layout)

    wrapper.__signature__ = sig.replace(parameters=params[:at] + extra + params[at:])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in fn.__annotations__.items() if k != "layout"},
        **{p.name: p.annotation for p in extra},
    }
    del wrapper.__wrapped__  # typer must read the new signature, not the wrapped one
    return wrapper


def _seq(text: str | None, field: str = "seq") -> int | None:
    """--seq: a whole number of tokens; 4k / 8K / 32k are 4,096 / 8,192 / 32,768, as context lengths are
    named (binary), not 4,000."""
    if text is not None and re.fullmatch(r"\d+[kK]", str(text).strip()):
        return int(str(text).strip()[:-1]) * int(IEC["Ki"])
    if field != "seq":
        return _int(text, field, most=MAX_SEQ)
    return BOUNDS["seq_len"].check(_int(text, field, most=None))  # Stage.seq_len's bound


def _inference_tokens(value: Any) -> float | None:
    """--inference-tokens: a token count such as 10T, or 0 (none: training cost only, overriding a scenario's)."""
    if value is None:
        return None
    if str(value).strip() in ("0", "0.0"):
        return 0.0
    return parse_count(value, "inference-tokens")


def _float(text: Any, field: str) -> float:
    """A finite number given as a flag or scenario value; a one-line error naming ``field`` otherwise."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise InputError(field, text, "a number") from None
    if not math.isfinite(v):
        raise InputError(field, text, "a finite number")
    return v


def _int(text: str | None, field: str, most: int | None = _MAX_INT) -> int | None:
    """A positive whole number; at most ``most`` (None: the spec that takes it states the bound)."""
    if text is None:
        return None
    v = parse_count(text, field)
    if v != int(v) or (most is not None and v > most):
        raise InputError(field, text, f"a positive whole number (at most {most or _MAX_INT:,})")
    return int(v)


from trilemma.report.emit import emit  # noqa: E402  (printed for the CLI, returned for trilemma.web)


def _softmax_passes(v: int) -> int:
    """--softmax-passes: within TrainingPlan.softmax_passes's bounds, else a one-line error naming the flag."""
    from trilemma.specs import TrainingPlan

    bounds = {
        k: getattr(c, k)
        for c in TrainingPlan.model_fields["softmax_passes"].metadata
        for k in ("ge", "le")
        if hasattr(c, k)
    }
    if not bounds["ge"] <= v <= bounds["le"]:
        raise InputError(
            "softmax-passes",
            v,
            f"a whole number from {bounds['ge']} (a fused softmax) to {bounds['le']}",
        )
    return v


def _task(v: str) -> str:
    """--task: causal-lm or classification (trilemma.specs.Task), else a one-line error."""
    from trilemma.specs import Task

    key = str(v).strip().lower()
    if key not in {t.value for t in Task}:
        raise InputError("task", v, " or ".join(t.value for t in Task))
    return key


TASK_HELP = (
    "what the model's head predicts: causal-lm (default: the next token over the vocabulary) or "
    "classification (a few classes from a pooled token, as a sequence-classification fine-tune: no LM head "
    "GEMMs, no vocabulary cross-entropy, no logits in memory)"
)
ASYNC_TP_HELP = (
    "asynchronous tensor parallelism (torchtitan's enable_async_tensor_parallel, Megatron-Core's "
    "--tp-comm-overlap): under sequence parallelism the forward's TP all-gathers and reduce-scatters "
    "are split by rank and overlapped with their matmuls; default off"
)
COMPILE_HELP = (
    "the model runs under torch.compile (inductor): a gated MLP saves 3 hidden tensors per token "
    "instead of eager PyTorch's 4 (act(gate) is recomputed in the fused backward); default off"
)
PRECISION_HELP = (
    "bf16, fp16, fp32, tf32 or fp8 (fp8: float8 linears, torchao Float8Linear / torchtitan's "
    "--model.converters float8 — fp8 matmuls, bf16 weights and activations, fp32 master copy)"
)
EXPORT_HELP = "print the plan as an engine's config instead: torchtitan, megatron, deepspeed or hf (trilemma export)"
#: what `trilemma export` passes to the verb it runs: the frontier point and the output folder
_EXPORT: contextvars.ContextVar[dict] = contextvars.ContextVar("trilemma_export", default={})
FINETUNE_HELP = (
    "fine-tune the model instead of pre-training it: full, lora, qlora (LoRA on an nf4 base with double "
    "quantisation, bf16 compute) or freeze (with --trainable-layers N: the last N layers train)"
)
LORA_TARGETS_HELP = "attn, mlp, all-linear (default) or module names, e.g. q_proj,v_proj"
BASE_PRECISION_HELP = (
    "storage of the frozen base: bf16 (default), fp16, int8 (LLM.int8; lora) or nf4 (qlora)"
)
OPTIMIZER_HELP = (
    "adamw (default), adamw-8bit, paged-adamw-8bit (bitsandbytes), adafactor, sgd or lion"
)
OFFLOAD_HELP = (
    "none (default), optimizer (ZeRO-Offload: states and CPU Adam on the host) or optimizer+params "
    "(ZeRO-Infinity: the weights too); host memory is checked (--host-memory)"
)
HOST_POWER_HELP = (
    "host and network power per node (CPUs, memory, NICs, fans), e.g. 4.6kW; 0 counts the devices "
    "alone, as published energy figures do (default 575 W per device: a DGX H100's 10.2 kW less its 8 "
    "GPUs' 5.6 kW)"
)
DEPLOY_HELP = (
    "where the trained model must run: a device preset (iphone-15-pro, snapdragon-8-gen3, tensor-g3, "
    "macbook-air-m2-8gb, rtx-4090, ...: presets/devices.toml) or a hardware preset"
)
DEPLOY_PRECISION_HELP = (
    "weights on the device: int4, int8 (one fp16 scale per 32 weights) or fp16 (default int4)"
)
CONTEXT_HELP = "tokens of KV cache on the device, e.g. 4k (default: the plan's sequence length)"
HOST_MEMORY_HELP = "host memory per node for offloaded states, e.g. 1TB (default 125 GB per device, a DGX A100's share)"
FAILURE_RATE_HELP = (
    "unexpected job interruptions per GPU-hour, e.g. 5e-5 (default: Llama 3's 1.97e-5, 419 in 54 days "
    "on 16,384 H100s; OPT-175B's 2021 cloud cluster logged 7.9e-5)"
)
RESTART_HELP = (
    "time from a failure to training again (detection, swapping the node, restart, checkpoint reload), "
    "e.g. 30min (default 10min)"
)
STORAGE_BW_HELP = (
    "the whole job's checkpoint write bandwidth, e.g. 200GB/s (default: 1.22e8 B/s per GPU, Llama 3's "
    "2 TB/s sustained over 16,384 GPUs)"
)


def finetune_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the fine-tune flags (--finetune, --trainable-layers, --lora-rank, --lora-alpha,
    --lora-targets, --base-precision, --optimizer, --offload), collected into the ``finetune`` dict it
    receives (None values for flags not given)."""
    sig = inspect.signature(fn)
    params = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in sig.parameters.values()
        if p.name != "finetune"
    ]
    opts = [
        ("finetune", "--finetune", FINETUNE_HELP),
        (
            "trainable_layers",
            "--trainable-layers",
            "with --finetune freeze: the last N layers train",
        ),
        ("lora_rank", "--lora-rank", "LoRA rank r (default 16)"),
        ("lora_alpha", "--lora-alpha", "LoRA alpha (default 32)"),
        ("lora_targets", "--lora-targets", LORA_TARGETS_HELP),
        ("base_precision", "--base-precision", BASE_PRECISION_HELP),
        ("optimizer", "--optimizer", OPTIMIZER_HELP),
        ("offload", "--offload", OFFLOAD_HELP),
    ]
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(None, flag, help=h),
            annotation=str | None,
        )
        for name, flag, h in opts
    ]
    at = next(i for i, p in enumerate(params) if p.name == "as_json")

    def call(**kwargs: Any) -> Any:
        ft = {name: kwargs.pop(name, None) for name, _, _ in opts}
        return fn(**kwargs, finetune=ft)

    call.__signature__ = sig.replace(parameters=params[:at] + extra + params[at:])  # type: ignore[attr-defined]
    call.__annotations__ = {
        **{k: v for k, v in fn.__annotations__.items() if k != "finetune"},
        **{p.name: p.annotation for p in extra},
    }
    call.__name__, call.__doc__ = fn.__name__, fn.__doc__
    return call


def finetune_args(ft: dict | None) -> dict[str, Any]:
    """The fine-tune flags as API keyword arguments (numbers parsed, each error naming its flag)."""
    ft = dict(ft or {})
    out: dict[str, Any] = {k: v for k, v in ft.items() if v is not None}
    if "trainable_layers" in out:
        out["trainable_layers"] = _int(str(out["trainable_layers"]), "trainable-layers")
    if "lora_rank" in out:
        out["lora_rank"] = _int(str(out["lora_rank"]), "lora-rank")
    if "lora_alpha" in out:
        try:
            out["lora_alpha"] = float(out["lora_alpha"])
        except ValueError:
            raise InputError(
                "lora-alpha", out["lora_alpha"], "a positive number, e.g. 16 or 32"
            ) from None
    return out


MEMORY_HEADROOM_HELP = (
    "share of device memory a plan must leave free to count as fitting, e.g. 0.1 or 10% "
    "(default: the upper end of the memory model's 80% band from its leave-one-source-out "
    "error; 0 = fit to the last byte)"
)


def _headroom(value: str | None) -> float | None:
    """--memory-headroom as a fraction in [0, 1): 0.1 or 10%."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        h = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InputError(
            "memory-headroom", value, "a fraction in [0, 1) or a percentage, e.g. 0.1 or 10%"
        ) from None
    if not 0 <= h < 1:
        raise InputError(
            "memory-headroom", value, "a fraction in [0, 1) or a percentage, e.g. 0.1 or 10%"
        )
    return h


@app.command()
@layout_options
@finetune_options
def estimate(
    model: str = typer.Option(
        "llama2-7b",
        "--model",
        "-m",
        help="preset name, path to a Hugging Face config.json, or a size such as 3B",
    ),
    gpu: str = typer.Option(
        "a100-80gb", "--gpu", "-g", help="hardware preset, e.g. a100-80gb, h100-sxm"
    ),
    gpus: str = typer.Option("2048", "--gpus", "-n", help="number of devices"),
    tokens: str | None = typer.Option(
        None,
        "--tokens",
        "-t",
        help="training tokens, e.g. 2T (default: the model's published count)",
    ),
    seq: str | None = typer.Option(
        None,
        "--seq",
        help="sequence length, tokens; 4k = 4096 (default: the model's published one)",
    ),
    global_batch: str | None = typer.Option(
        None,
        "--global-batch",
        help="tokens per optimizer step, e.g. 4M (exact: fails if no layout divides it)",
    ),
    precision: str = typer.Option("bf16", "--precision", help=PRECISION_HELP),
    price: str | None = typer.Option(
        None, "--price", help="USD per GPU-hour (default: the preset's reference price)"
    ),
    gpus_per_node: str | None = typer.Option(
        None, "--gpus-per-node", help="devices per scale-up node"
    ),
    intra_node_bw: str | None = typer.Option(
        None, "--intra-node-bw", help="per device, per direction, e.g. 450GB/s"
    ),
    inter_node_bw: str | None = typer.Option(
        None, "--inter-node-bw", help="per device, per direction, e.g. 400Gb/s"
    ),
    pue: float | None = typer.Option(None, "--pue", help="datacentre PUE (default 1.1)"),
    region: str | None = typer.Option(
        None, "--region", help="grid region preset (us, eu, france, ...) or kg CO2e/kWh"
    ),
    memory_headroom: str | None = typer.Option(
        None, "--memory-headroom", help=MEMORY_HEADROOM_HELP
    ),
    goodput: float | None = typer.Option(
        None,
        "--goodput",
        help="useful share of wall time, 0-1, replacing the model (default: modelled — failures, checkpoint writes and restarts for this GPU count and duration, times the slow-node share for the node count, 1/(1 + σ√(2 ln nodes)), σ = run.slow_node_spread fitted on whole published runs; the speed table and --json's time.reliability show each part)",
    ),
    flash: bool = typer.Option(
        True, "--flash/--no-flash", help="flash attention (no s² attention matrix stored)"
    ),
    softmax_passes: int = typer.Option(
        1,
        "--softmax-passes",
        help="with --no-flash: passes over the score matrix between the attention GEMMs, each a read and a write — 1 Megatron-LM's fused softmax (default), 3 eager PyTorch (scale, mask, torch.softmax), 6 a softmax written by hand (max, subtract, exp, sum, divide)",
    ),
    fused_loss: bool = typer.Option(
        False,
        "--fused-loss/--eager-loss",
        help="a fused cross-entropy kernel (Megatron-LM, llm-foundry): 8 bytes per logit instead of eager PyTorch's 12 (16 with --tp above 1: DTensor's loss_parallel)",
    ),
    compile_model: bool = typer.Option(False, "--compile/--no-compile", help=COMPILE_HELP),
    async_tp: bool = typer.Option(False, "--async-tp/--no-async-tp", help=ASYNC_TP_HELP),
    task: str = typer.Option("causal-lm", "--task", help=TASK_HELP),
    law: str | None = typer.Option(
        None, "--law", help="scaling law for the loss (name or fitted law file)"
    ),
    unique_tokens: str | None = typer.Option(
        None, "--unique-tokens", help="unique data available; repetition is priced in"
    ),
    host_memory: str | None = typer.Option(None, "--host-memory", help=HOST_MEMORY_HELP),
    host_power: str | None = typer.Option(None, "--host-power", help=HOST_POWER_HELP),
    failure_rate: str | None = typer.Option(None, "--failure-rate", help=FAILURE_RATE_HELP),
    restart: str | None = typer.Option(None, "--restart", help=RESTART_HELP),
    storage_bw: str | None = typer.Option(None, "--storage-bw", help=STORAGE_BW_HELP),
    deploy: str | None = typer.Option(None, "--deploy", help=DEPLOY_HELP),
    deploy_precision: str | None = typer.Option(
        None, "--deploy-precision", help=DEPLOY_PRECISION_HELP
    ),
    context: str | None = typer.Option(None, "--context", help=CONTEXT_HELP),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
    export: str | None = typer.Option(None, "--export", help=EXPORT_HELP),
    layout: dict | None = None,
    finetune: dict | None = None,
) -> Any:
    """Time, GPU-hours, $, kWh, CO2 and memory per GPU for one training plan.

    Any layout flag (--tp, --pp, --cp, --ep, --vp, --zero, --recompute, --micro-batch, --sp/--no-sp:
    the axes of trilemma.specs.axes) pins that axis; the rest are searched."""
    from trilemma.api import estimate as run_estimate
    from trilemma.api import make_plan, resolve_model
    from trilemma.resolve import finetune_fields
    from trilemma.specs import Precision

    _check_export(export)
    _check_deploy_flags(deploy, deploy_precision, context)
    try:
        prec = Precision(precision.lower())
    except ValueError:
        raise InputError("precision", precision, "bf16, fp16, fp32, tf32 or fp8") from None
    cluster = {
        "memory_headroom": _headroom(memory_headroom),
        "gpus_per_node": _int(gpus_per_node, "gpus-per-node"),
        "intra_node_bw_bytes_per_s": None
        if intra_node_bw is None
        else _link(intra_node_bw, "intra-node-bw"),
        "inter_node_bw_bytes_per_s": None
        if inter_node_bw is None
        else _link(inter_node_bw, "inter-node-bw"),
        "price_usd_per_hour": None if price is None else _price(price),
        "pue": pue,
        "region": region,
        "host_memory_bytes": None
        if host_memory is None
        else parse_bytes(host_memory, "host-memory"),
        "host_power_w_per_node": None if host_power is None else _host_power(host_power),
        "failures_per_gpu_hour": None if failure_rate is None else _failure_rate(failure_rate),
        "restart_s": None if restart is None else _restart(restart),
        "storage_write_bytes_per_s": None if storage_bw is None else _storage_bw(storage_bw),
    }
    n = _int(gpus, "gpus")
    m, _ = resolve_model(model)
    plan = make_plan(
        m,
        None if tokens is None else parse_count(tokens, "tokens"),
        _seq(seq),
        _int(global_batch, "global-batch"),
        prec,
        flash_attention=flash,
        fused_loss=fused_loss,
        compile=compile_model,
        async_tp=async_tp,
        softmax_passes=_softmax_passes(softmax_passes),
        task=_task(task),
        **({} if goodput is None else {"goodput": goodput}),
        **finetune_fields(m, **finetune_args(finetune)),
    )
    if export:  # the fastest layout the engine can write, not the fastest of all
        from trilemma.export import expressible
    est = run_estimate(
        model,
        gpu,
        n,
        layout=layout,
        cluster=cluster,
        plan=plan,
        law=law,
        unique_tokens=None
        if unique_tokens is None
        else parse_count(unique_tokens, "unique-tokens"),
        accept=expressible(export) if export else None,
    )
    if deploy is not None:
        from trilemma.api import with_deploy

        est = with_deploy(
            est, deploy, _deploy_precision(deploy_precision), _seq(context, "context")
        )
    if export:
        from trilemma.export import export as export_plan

        return _emit_export(export_plan(est, export), as_json)
    from trilemma.report.table import print_estimate

    return emit(est, as_json, lambda e: e.to_dict(), print_estimate)


@app.command()
@finetune_options
def solve(
    scenario: str | None = typer.Argument(None, help="a scenario TOML file (flags override it)"),
    deadline: str | None = typer.Option(None, "--deadline", help="wall-clock limit, e.g. 30d"),
    budget: str | None = typer.Option(
        None, "--budget", help="dollars ($2M), GPU-hours (100k GPUh) or energy (500MWh)"
    ),
    target_loss: float | None = typer.Option(
        None, "--target-loss", help="loss to reach (nats/token, the law's data)"
    ),
    minimize: str | None = typer.Option(
        None, "--minimize", help="time, cost, loss or energy (default: the unpinned corner)"
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="fix the model (preset, config.json or size)"
    ),
    params: str | None = typer.Option(None, "--params", help="model sizes to search, e.g. 1B..70B"),
    tokens: str | None = typer.Option(None, "--tokens", help="fix the training tokens"),
    unique_tokens: str | None = typer.Option(
        None, "--unique-tokens", help="unique data available (repetition is priced in)"
    ),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU type(s), comma-separated (default: the whole catalogue)"
    ),
    max_gpus: str | None = typer.Option(
        None, "--max-gpus", help="most GPUs to use (default 16384)"
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="precision(s), comma-separated (default bf16; fp8: float8 linears, as --precision of estimate)",
    ),
    seq: str | None = typer.Option(
        None, "--seq", help="sequence length, tokens; 4k = 4096 (default 4096)"
    ),
    global_batch: str | None = typer.Option(
        None,
        "--global-batch",
        help="tokens per step (default: each model size its own, DeepSeek LLM's batch law B = 0.292·C^0.3271 at its compute, rounded to a power of two sequences)",
    ),
    law: str | None = typer.Option(None, "--law", help="scaling law name or a fitted law file"),
    price: list[str] | None = typer.Option(
        None, "--price", help="GPU=USD_PER_HOUR (repeatable) or one price for all"
    ),
    memory_headroom: str | None = typer.Option(
        None, "--memory-headroom", help=MEMORY_HEADROOM_HELP
    ),
    compile_model: bool | None = typer.Option(None, "--compile/--no-compile", help=COMPILE_HELP),
    async_tp: bool | None = typer.Option(None, "--async-tp/--no-async-tp", help=ASYNC_TP_HELP),
    task: str | None = typer.Option(None, "--task", help=TASK_HELP),
    frontier_csv: str | None = typer.Option(
        None, "--frontier", help="write the Pareto frontier to this CSV"
    ),
    plot: str | None = typer.Option(
        None, "--plot", help="draw the frontier to this image (.png, .svg or .pdf)"
    ),
    plot_range: str | None = typer.Option(
        None,
        "--plot-range",
        help="what --plot shows: pins (default: a decade "
        "around the pins and the optimum) or full (every point)",
    ),
    frontier_all: bool | None = typer.Option(
        None,
        "--frontier-all",
        help="keep every plan on the frontier: by default "
        "it drops runs of fewer than 1,000 steps, under 10 minutes or over a year",
    ),
    host_memory: str | None = typer.Option(None, "--host-memory", help=HOST_MEMORY_HELP),
    deploy: str | None = typer.Option(
        None, "--deploy", help=DEPLOY_HELP + ": only model sizes that fit it are searched"
    ),
    deploy_precision: str | None = typer.Option(
        None, "--deploy-precision", help=DEPLOY_PRECISION_HELP
    ),
    context: str | None = typer.Option(
        None, "--context", help="tokens of KV cache on the device (default: --seq)"
    ),
    min_tokens_per_s: str | None = typer.Option(
        None,
        "--min-tokens-per-s",
        help="with --deploy: the model must decode at least this many tokens/s on the device",
    ),
    inference_tokens: str | None = typer.Option(
        None,
        "--inference-tokens",
        help="tokens the model will serve, e.g. 10T: "
        "their cost (Sardana et al. 2023: 2N FLOPs each, at the plan's $ per "
        "FLOP) is added, and a $ budget holds training + serving",
    ),
    failure_rate: str | None = typer.Option(None, "--failure-rate", help=FAILURE_RATE_HELP),
    restart: str | None = typer.Option(None, "--restart", help=RESTART_HELP),
    storage_bw: str | None = typer.Option(None, "--storage-bw", help=STORAGE_BW_HELP),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
    export: str | None = typer.Option(None, "--export", help=EXPORT_HELP + " (the optimum)"),
    finetune: dict | None = None,
) -> Any:
    """Pin two of time, money and loss; get the best plan on the third, runners-up and the frontier.
    With --finetune (needs --model and --tokens) there is no loss corner: it minimises time or cost."""
    from trilemma.report.solve import plot_frontier, print_solve, write_frontier
    from trilemma.solve import solve as run_solve
    from trilemma.solve.scenario import merge_scenario

    _check_export(export)
    args = merge_scenario(
        scenario,
        dict(
            deadline=deadline,
            budget=budget,
            target_loss=target_loss,
            minimize=minimize,
            model=model,
            params=params,
            tokens=tokens,
            unique_tokens=unique_tokens,
            gpu=gpu,
            max_gpus=max_gpus,
            precision=precision,
            seq=seq,
            global_batch=global_batch,
            law=law,
            price=price,
            memory_headroom=memory_headroom,
            frontier=frontier_csv,
            plot=plot,
            compile=compile_model,
            host_memory=host_memory,
            frontier_all=frontier_all,
            plot_range=plot_range,
            deploy=deploy,
            deploy_precision=deploy_precision,
            context=context,
            min_tokens_per_s=min_tokens_per_s,
            inference_tokens=inference_tokens,
            async_tp=async_tp,
            task=task,
            failure_rate=failure_rate,
            restart=restart,
            storage_bw=storage_bw,
            **(finetune or {}),
        ),
    )
    from trilemma.solve.scenario import FINETUNE_KEYS

    _check_deploy_flags(args["deploy"], args["deploy_precision"], args["context"])
    if args["plot_range"] not in (None, "pins", "full"):
        raise InputError("plot-range", args["plot_range"], "pins or full")
    if args["plot_range"] is not None and args["plot"] is None:
        raise InputError(
            "plot-range", args["plot_range"], "a value with --plot FILE.png (the plot it frames)"
        )
    for key in ("frontier", "plot"):
        if args[key] is not None:  # before the search, not after it; the law file is read later
            check_output(key, args[key], [args["law"]])
    result = run_solve(
        deadline=args["deadline"],
        budget=args["budget"],
        target_loss=args["target_loss"],
        minimize=args["minimize"],
        model=args["model"],
        params=args["params"],
        tokens=args["tokens"],
        unique_tokens=args["unique_tokens"],
        gpu=args["gpu"],
        max_gpus=_int(args["max_gpus"], "max-gpus") if args["max_gpus"] is not None else None,
        precision=args["precision"],
        seq_len=_seq(None if args["seq"] is None else str(args["seq"])),
        global_batch_tokens=_int(args["global_batch"], "global-batch"),
        law=args["law"],
        prices=_prices(args["price"], args["gpu"]),
        memory_headroom=_headroom(args["memory_headroom"]),
        compile=bool(args["compile"]),
        finetune=finetune_args({k: args[k] for k in FINETUNE_KEYS}),
        host_memory_bytes=None
        if args["host_memory"] is None
        else parse_bytes(args["host_memory"], "host-memory"),
        frontier_all=bool(args["frontier_all"]),
        deploy=args["deploy"],
        deploy_precision=_deploy_precision(args["deploy_precision"]),
        context=_seq(None if args["context"] is None else str(args["context"]), "context"),
        min_tokens_per_s=None
        if args["min_tokens_per_s"] is None
        else _float(args["min_tokens_per_s"], "min-tokens-per-s"),
        inference_tokens=_inference_tokens(args["inference_tokens"]),
        async_tp=bool(args["async_tp"]),
        task=_task("causal-lm" if args["task"] is None else args["task"]),
        failures_per_gpu_hour=None
        if args["failure_rate"] is None
        else _failure_rate(args["failure_rate"]),
        restart_s=None if args["restart"] is None else _restart(args["restart"]),
        storage_write_bytes_per_s=None
        if args["storage_bw"] is None
        else _storage_bw(args["storage_bw"]),
    )
    if args["frontier"]:
        write_frontier(result, args["frontier"])
    if args["plot"]:
        plot_frontier(result, args["plot"], args["plot_range"] or "pins")
    if export:
        from trilemma.export import export_solve

        return _emit_export(export_solve(result, export, _EXPORT.get().get("point")), as_json)
    return emit(result, as_json, lambda r: r.to_dict(), print_solve)


def _prices(price: object, gpu: object) -> dict[str, float] | None:
    """--price a100-80gb=1.5 (repeatable), or one bare price for every GPU searched."""
    from trilemma.presets import hardware_presets
    from trilemma.resolve import resolve_hardware

    if not price:
        return None
    items = [price] if isinstance(price, (str, int, float)) else list(price)
    if isinstance(price, dict):
        items = [f"{k}={v}" for k, v in price.items()]
    out: dict[str, float] = {}
    names = (
        [
            str(g).strip()
            for g in (gpu.split(",") if isinstance(gpu, str) else gpu)
            if str(g).strip()
        ]
        if gpu
        else []
    )
    searched = {resolve_hardware(n).name for n in names} if names else None
    for item in items:
        text = str(item)
        if "=" in text:
            name, _, value = text.partition("=")
            hw = resolve_hardware(name.strip()).name
            if hw in out:
                raise InputError("price", text, f"one price for {hw} (it was given twice)")
            if searched is not None and hw not in searched:
                raise InputError(
                    "price",
                    text,
                    f"a price for a GPU type searched ({', '.join(sorted(searched))})",
                )
            out[hw] = _price(value)
        else:
            value = _price(text)
            for n in searched if searched is not None else hardware_presets():
                out[resolve_hardware(n).name] = value
    return out


#: the most host power per node, W (a DGX H100 draws ~10 kW in all; 1 MW is a typo)
MAX_HOST_POWER_W = 1e6


def _price(text: object) -> float:
    """--price: dollars per GPU-hour (its bounds: ClusterSpec.price_usd_per_hour)."""
    return parse_usd(text, "price")


def _link(text: object, field: str) -> float:
    """--intra-node-bw / --inter-node-bw: bytes/s per device (bounds: ClusterSpec's link fields)."""
    return parse_bandwidth(text, field)


def _failure_rate(text: object) -> float:
    """--failure-rate: unexpected interruptions per GPU-hour, above 0 and at most 1."""
    try:  # its bounds: ClusterSpec.failures_per_gpu_hour
        return float(str(text).strip())
    except ValueError:
        raise InputError("failure-rate", text, FAILURE_RATE_ALLOWED) from None


def _restart(text: object) -> float:
    """--restart: seconds from a failure to training again (bounds: ClusterSpec.restart_s)."""
    return parse_duration(text, "restart")


def _storage_bw(text: object) -> float:
    """--storage-bw: the job's checkpoint write bandwidth, bytes/s (bounds: ClusterSpec)."""
    return parse_bandwidth(text, "storage-bw")


def _host_power(text: object) -> float:
    """--host-power: watts per node, from 0 to MAX_HOST_POWER_W."""
    value = parse_power(text, "host-power")
    if value > MAX_HOST_POWER_W:
        raise InputError("host-power", text, f"at most {fmt_power(MAX_HOST_POWER_W)} per node")
    return value


def _check_deploy_flags(deploy: str | None, deploy_precision: str | None, context: object) -> None:
    """--deploy-precision and --context describe the device of --deploy: without it they would do nothing."""
    for flag, v in (("deploy-precision", deploy_precision), ("context", context)):
        if deploy is None and v is not None:
            raise InputError(
                flag, v, "a value with --deploy DEVICE (the device the model will run on)"
            )


def _deploy_precision(value: object) -> str:
    """--deploy-precision as given (any case), else the default (an empty one is refused downstream)."""
    from trilemma.estimate.deploy import DEFAULT_DEPLOY_PRECISION

    return DEFAULT_DEPLOY_PRECISION if value is None else str(value).lower()


def _check_export(engine: str | None) -> None:
    """--export's engine checked before any work (named as the flag the user typed)."""
    if engine is not None:
        from trilemma.export import check_engine

        check_engine(engine, "export")


def _emit_export(doc: Any, as_json: bool) -> Any:
    """An exported plan: written to `export --out`'s folder, or printed (the files, or --json's document)."""
    from trilemma.report.export import print_export, print_written, write_export

    out = _EXPORT.get().get("out")
    if out:
        paths = write_export(doc, out)
        if not as_json:
            print_written(doc, paths)
            return doc
    return emit(doc, as_json, lambda d: d.to_dict(), print_export)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def export(
    ctx: typer.Context,
    to: str = typer.Option(..., "--to", help="torchtitan, megatron, deepspeed or hf"),
    point: int | None = typer.Option(
        None,
        "--point",
        help="with solve: export this frontier point (the 0-based "
        "row of --frontier's CSV) instead of the optimum",
    ),
    out: str | None = typer.Option(None, "--out", help="write the files into this folder"),
) -> None:
    """A plan as the config of the engine that runs it: `trilemma export --to ENGINE` then `estimate` (the
    default) or `solve` and that verb's own flags; prints (or --out writes) torchtitan's job TOML,
    Megatron-LM's launch script, DeepSpeed's JSON config, or Hugging Face's TrainingArguments (+ PEFT)."""
    from trilemma.export import check_engine

    engine = check_engine(to)
    rest = list(ctx.args)
    lead = 0  # --json (a switch of both verbs) may come before the verb
    while lead < len(rest) and rest[lead] == "--json":
        lead += 1
    verb = (
        rest.pop(lead) if lead < len(rest) and rest[lead] in ("estimate", "solve") else "estimate"
    )
    if "--export" in rest:
        raise InputError(
            "export", "--export", "--to ENGINE alone (`trilemma export` sets the verb's --export)"
        )
    if point is not None and verb != "solve":
        raise InputError(
            "point", point, "a frontier index with `trilemma export --to ENGINE solve ...`"
        )
    if out is not None and not out.strip():
        raise InputError("out", out, "a folder to write the engine's files into")
    token = _EXPORT.set({"point": point, "out": out})
    try:
        app(args=[verb, *rest, "--export", engine], standalone_mode=False)
    finally:
        _EXPORT.reset(token)


@app.command()
def validate(
    kind: str | None = typer.Option(
        None,
        "--kind",
        help="runs, throughput, memory or finetune (published "
        "fine-tuning memory, not fitted; default: all)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
    csv_path: str | None = typer.Option(
        None, "--csv", help="also write one line per row to this CSV file"
    ),
    live_loso: bool = typer.Option(
        False,
        "--loso",
        help="recompute leave-one-source-out now (about a minute) "
        "instead of reading the last calibration's",
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        help="backtest your own measurements: a CSV in the "
        "schema of trilemma/data/SCHEMA.md (step times, throughput or memory)",
    ),
) -> Any:
    """Backtest the planner against the published runs, throughput and memory figures it ships with,
    or against your own measurements (--data FILE.csv)."""
    from trilemma.report.validate import print_validate, write_csv
    from trilemma.validate.run import run_validate

    kind = kind.strip().lower() if kind is not None else None
    if kind is not None and kind not in ("runs", "throughput", "memory", "finetune"):
        raise InputError("kind", kind, "runs, throughput, memory or finetune")
    if data is not None and kind == "finetune":
        raise InputError(
            "kind",
            kind,
            "runs, throughput or memory with --data (finetune is the shipped "
            "fine-tuning memory table, not a kind of your rows)",
        )
    if csv_path is not None:  # before the backtest: a writable path, and not --data's file
        check_output("csv", csv_path, [data])
    doc = run_validate(kind, live_loso=live_loso, data=data)
    if csv_path:
        write_csv(doc, csv_path)
    return emit(doc, as_json, lambda d: d, print_validate)


@app.command()
def presets(
    kind: str = typer.Argument("all", help="models, hardware, devices (deployment targets) or all"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> Any:
    """List the model and hardware presets (with sources)."""
    from trilemma.report.table import presets_document, print_presets

    kind = kind.strip().lower()
    if kind not in ("models", "hardware", "devices", "all"):
        raise InputError("kind", kind, "models, hardware, devices or all")
    return emit(presets_document(kind), as_json, lambda d: d, lambda d: print_presets(kind))


@app.command()
def serve(
    host: str = typer.Option(
        "127.0.0.1", "--host", help="address to listen on (default: this machine only)"
    ),
    port: int = typer.Option(8000, "--port", help="TCP port"),
) -> None:
    """The verbs as a JSON API over HTTP (docs at /docs) and a page that explores the triangle (needs the
    web extra: pip install 'trilemma\\[web]')."""
    import importlib.util

    if not 1 <= port <= 65535:
        raise InputError("port", port, "a TCP port from 1 to 65535")
    if not host.strip():
        raise InputError(
            "host", host, "an address to listen on, e.g. 127.0.0.1 (this machine) or 0.0.0.0 (all)"
        )
    import socket

    try:  # a name or address this machine can bind, checked before the banner
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        raise InputError(
            "host", host, f"an address or name this machine resolves ({exc})"
        ) from None
    with socket.socket(family, kind, proto) as probe_socket:
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe_socket.bind(addr)
        except OSError as exc:
            raise InputError("port", port, f"a port free on {host} ({exc.strerror})") from None
    missing = [m for m in ("fastapi", "uvicorn", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(
            "serve", ", ".join(missing), "the web extra installed (pip install 'trilemma[web]')"
        )
    from trilemma.web.serve import local, run, url

    typer.echo(
        f"trilemma serve: {url(host, port)}  (API docs at {url(host, port)}docs; Ctrl-C stops it)"
    )
    if not local(host):
        typer.echo(
            f"note: listening on {host}: other machines can reach it (--host 127.0.0.1 keeps it local)"
        )
    run(host, port)


from trilemma.cli_quality import fit, optimal  # noqa: E402  (thin command functions; heavy imports inside)

app.command("fit")(fit)
app.command("optimal")(optimal)

from trilemma.cli_probe import probe  # noqa: E402  (torch is imported only when the probe runs)

app.command("probe")(probe)

from trilemma.cli_ladder import ladder  # noqa: E402

app.command("ladder")(ladder)


def _typed_value_message(exc: Exception, argv: list[str]) -> str | None:
    """A number the command line could not parse, in InputError's words ("pue: 'abc' is not allowed; expected
    a number"), with the value as typed (click's message names the option but not the value); None for
    anything else."""
    text = str(getattr(exc, "message", ""))
    param = getattr(exc, "param", None)
    allowed = (
        "a whole number"
        if "valid integer" in text
        else "a number"
        if "valid number" in text
        else None
    )
    if type(exc).__name__ != "BadParameter" or param is None or allowed is None:
        return None
    opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    for i, tok in enumerate(argv):
        for o in opts:
            if tok == o and i + 1 < len(argv):
                return str(InputError(o.lstrip("-"), argv[i + 1], allowed))
            if tok.startswith(o + "="):
                return str(InputError(o.lstrip("-"), tok[len(o) + 1 :], allowed))
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line and exit status 2 for bad input, 1 for an infeasible request.

    numpy's floating-point warnings (overflow in an absurd but finite input) are not printed: a result
    that overflowed is refused where it is written (report.jsonout refuses NaN and infinity)."""
    try:
        with warnings.catch_warnings(), one_command():  # one_command: no write onto an input
            warnings.simplefilter("ignore", RuntimeWarning)
            app(args=argv, standalone_mode=False)
        return 0
    except TrilemmaError as exc:
        sys.stderr.write(f"trilemma: error: {printable(exc)}\n")
        return exc.exit_code
    except Exception as exc:  # typer vendors click: match its exceptions by shape, not by import
        name = type(exc).__name__
        if name == "Exit" or (name != "Abort" and not hasattr(exc, "format_message")):
            if name == "Exit":
                return int(getattr(exc, "exit_code", 0))
            raise
        if name == "Abort":
            sys.stderr.write("trilemma: aborted\n")
            return 130
        msg = _typed_value_message(exc, sys.argv[1:] if argv is None else argv) or " ".join(
            str(exc.format_message()).split()
        )  # one line
        if name == "NoArgsIsHelpError":  # the help is already on stdout; its message is empty
            msg = (
                "missing command: estimate, solve, export, optimal, fit, validate, probe, ladder, presets or serve "
                "(see trilemma --help)"
            )
        sys.stderr.write(f"trilemma: error: {printable(msg)}\n")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
