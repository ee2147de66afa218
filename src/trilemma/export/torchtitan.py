"""torchtitan: a job TOML (``--job.config_file``) and, for a model that is not one of torchtitan's
llama3 flavors, a module that registers the model's shape as a flavor (``experimental.custom_import``).

Field names and defaults: torchtitan v0.2.2 (pytorch/torchtitan tag v0.2.2, commit
73a0e6979dd10b6b1904098eb3c8f62c18ab87ce), torchtitan/config/job_config.py — the last release whose
jobs are TOML files; from 0.3 (PR #2386, 2026-02-23) a job is a Python function returning
``Trainer.Config``. The model is torchtitan's ``llama3`` (torchtitan/models/llama3: RMSNorm, rotary
positions, SwiGLU, no biases, untied output), split over pipeline stages by module name
(``parallelism.module_fqns_per_model_part``, torchtitan/distributed/pipeline_parallel.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trilemma.export.checkpoint import torchtitan_section
from trilemma.export.document import ExportDocument
from trilemma.export.escape import comment_text
from trilemma.export.plan import ExportError, FineTune, PlanNumbers, recipe, warmup_steps
from trilemma.export.torchtitan_model import (
    ENGINE,
    FLAVOR,
    FLAVOR_MODULE,
    check_model,
    flavor_module,
    flavor_of,
)
from trilemma.specs import ModelSpec, Precision, Recompute, TrainingPlan, ZeroStage
from trilemma.tomlw import toml_value

VERSION = "torchtitan 0.2.2 (commit 73a0e6979dd1, torchtitan/config/job_config.py)"


def stage_modules(n_layers: int, stages: int) -> list[list[str]]:
    """Module names per pipeline stage (torchtitan llama3: tok_embeddings, layers.i, norm, output):
    ⌈n_layers / stages⌉ on the heaviest stage, the remainder taken off the first and last stages, which also
    hold the embedding and the head; trilemma times the rank whose stages hold the most layers under this
    placement (trilemma.estimate.pipeline.stage_layers). The first stage may hold the embedding alone and
    the last the head alone (Llama 3.1 405B's 126 layers in 128 virtual stages, arXiv 2407.21783 §3.3.2)."""
    if stages > n_layers + 2:
        raise ExportError(ENGINE, "pp × vp", stages, f"at most the {n_layers} layers + 2")
    per = math.ceil(n_layers / stages)
    counts = [per] * stages
    short = per * stages - n_layers
    k = 0
    while short:  # one layer off the ends in turn (first, last, second, second-to-last, ...)
        i = k // 2 if k % 2 == 0 else stages - 1 - k // 2
        if counts[i] > (0 if i in (0, stages - 1) else 1):
            counts[i] -= 1
            short -= 1
        k += 1
    out, start = [], 0
    for i, c in enumerate(counts):
        mods = [f"layers.{j}" for j in range(start, start + c)]
        start += c
        if i == 0:
            mods = ["tok_embeddings"] + mods
        if i == stages - 1:
            mods = mods + ["norm", "output"]
        out.append(mods)
    return out


def export(
    m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None, plan: dict[str, Any]
) -> ExportDocument:
    """The torchtitan job TOML (and flavor module) of one plan; ExportError where torchtitan cannot
    express the plan."""
    if ft is not None:
        raise ExportError(
            ENGINE,
            "fine-tune",
            ft.method,
            "torchtitan 0.2.2's job config has no adapters, frozen "
            "base or base checkpoint precision (use --to hf)",
        )
    check_model(m)
    notes: list[str] = []
    choice = _Choices.of(n, pl, notes)
    flavor, args = flavor_of(m)
    rec = recipe(ft)
    cfg = _config(m, pl, n, plan, rec, flavor, choice)
    if choice.option is not None:
        cfg["activation_checkpoint"]["selective_ac_option"] = choice.option
    files = {"job.toml": ""}  # first in the listing; written below, once the notes know the flavor
    if args is not None:
        cfg["experimental"] = {"custom_import": FLAVOR_MODULE}
        files[f"{FLAVOR_MODULE}.py"] = flavor_module(m, args)
        notes.append(
            f"{m.name} is not a flavor torchtitan ships: {FLAVOR_MODULE}.py registers its shape as llama3 "
            f"flavor '{FLAVOR}' (keep it importable, e.g. beside the TOML on PYTHONPATH); rope_theta is "
            "torchtitan's default 10,000 (Llama 2's): set yours there"
        )
    notes += _notes(pl, n, rec)
    files["job.toml"] = _toml(cfg, plan, n)
    return ExportDocument(
        engine=ENGINE,
        engine_version=VERSION,
        files=files,
        config=cfg,
        numbers=n,
        plan=plan,
        notes=tuple(notes),
    )


def _data_parallel(n: PlanNumbers, notes: list[str]) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree) of the plan's ZeRO stage
    (appending to ``notes`` what torchtitan does differently); ExportError for a stage it lacks."""
    # data parallelism: FSDP2 (ZeRO-3) shards over data_parallel_shard_degree; DDP replicates, alone
    if n.zero == ZeroStage.THREE:
        replicate, shard = 1, n.dp
    elif n.zero == ZeroStage.ONE and n.pp > 1:
        # with pipeline parallelism torchtitan's FSDP2 keeps ZeRO-1's state: parameters not resharded after
        # the forward (parallelize_llama.py: reshard_after_forward = not pp_enabled) and gradients accumulated
        # unsharded until the last micro-batch (torch.distributed.pipelining backward_maybe_with_nosync), as
        # the calibration's torchtitan 405B rows read it (data/throughput.csv)
        replicate, shard = 1, n.dp
        notes.append(
            "ZeRO-1 under pipeline parallelism is torchtitan's FSDP2 over data_parallel_shard_degree: with "
            "PP it keeps parameters unsharded between micro-batches and reduces gradients once per step"
        )
    elif n.zero == ZeroStage.NONE:
        if (
            n.dp > 1 and n.n_gpus != n.dp
        ):  # v0.2.2 parallelize.py: "DDP has not supported > 1D parallelism"
            raise ExportError(
                ENGINE,
                "ZeRO stage",
                0,
                "torchtitan replicates with DDP only without other "
                "parallelism; pin --zero 3 (FSDP)",
            )
        replicate, shard = n.dp, 1
    else:
        raise ExportError(
            ENGINE,
            "ZeRO stage",
            int(n.zero),
            "torchtitan shards with FSDP2 (ZeRO-3, "
            "data_parallel_shard_degree) or replicates (DDP); it has no ZeRO-1/2 (but ZeRO-1 under pipeline "
            "parallelism, which its FSDP2 keeps): pin --zero 3 or 0",
        )
    return replicate, shard


def _check_layout(n: PlanNumbers) -> None:
    """ExportError for expert parallelism (dense llama3) or TP without sequence parallelism."""
    if n.ep > 1:
        raise ExportError(ENGINE, "ep", n.ep, "the dense llama3 model has no experts")
    if (
        n.tp > 1 and not n.sp
    ):  # torchtitan's TP plan always shards norms over the sequence (SequenceParallel)
        raise ExportError(
            ENGINE, "sp", "off", "torchtitan's tensor parallelism always uses sequence parallelism"
        )


def _precision(pl: TrainingPlan) -> tuple[str, list[str]]:
    """(training.mixed_precision_param, model.converters) of the plan's precision."""
    # precision: training.mixed_precision_param is Literal["bfloat16", "float32"] in v0.2.2
    prec = pl.precision
    if prec == Precision.FP16:
        raise ExportError(
            ENGINE, "precision", prec, "torchtitan's mixed precision is bfloat16 or float32"
        )
    mp = "float32" if prec in (Precision.FP32, Precision.TF32) else "bfloat16"
    converters = (
        ["quantize.linear.float8"] if prec == Precision.FP8 else []
    )  # float8.py register_model_converter
    return mp, converters


def _recompute(n: PlanNumbers, pl: TrainingPlan) -> tuple[str, str | None, bool]:
    """(activation_checkpoint.mode, its selective_ac_option or None, async TP on)."""
    # recomputation: torchtitan's modes are none, full and selective by layer ("2") or by op ("op")
    ac = {
        Recompute.NONE: ("none", None),
        Recompute.FULL: ("full", None),
        Recompute.OP: ("selective", "op"),
    }
    if n.recompute not in ac:
        raise ExportError(
            ENGINE,
            "recompute",
            n.recompute,
            "torchtitan has no attention-core (Korthikanti) "
            "recomputation: its selective modes are every n-th layer or per op (--recompute op)",
        )
    mode, option = ac[n.recompute]
    async_tp = pl.async_tp and n.sp  # TP > 1 with sequence parallelism (PlanNumbers.sp)
    if async_tp and not pl.compile:
        raise ExportError(
            ENGINE,
            "async-tp",
            "on without --compile",
            "torchtitan's async TP is an inductor pass: "
            "parallelism.enable_async_tensor_parallel is 'currently only effective when compile is "
            "enabled' (job_config.py); estimate with --compile too",
        )
    return mode, option, async_tp


@dataclass(frozen=True)
class _Choices:
    """What torchtitan runs the plan with: the data-parallel replicate and shard degrees, the
    parameter precision and model converters, the activation-checkpoint mode and option, and
    whether TP is asynchronous."""

    replicate: int
    shard: int
    mp: str
    converters: list[str]
    mode: str
    option: str | None
    async_tp: bool

    @classmethod
    def of(cls, n: PlanNumbers, pl: TrainingPlan, notes: list[str]) -> _Choices:
        """The choices for the plan, each checked (ExportError where torchtitan lacks it);
        appends to ``notes`` what torchtitan does differently."""
        replicate, shard = _data_parallel(n, notes)
        _check_layout(n)
        mp, converters = _precision(pl)
        mode, option, async_tp = _recompute(n, pl)
        return cls(replicate, shard, mp, converters, mode, option, async_tp)


def _config(
    m: ModelSpec,
    pl: TrainingPlan,
    n: PlanNumbers,
    plan: dict[str, Any],
    rec: dict[str, Any],
    flavor: str,
    c: _Choices,
) -> dict[str, dict[str, Any]]:
    """The job config's sections, in the TOML's order."""
    warm = warmup_steps(rec, n.steps)
    # batch: without a pipeline a rank runs one micro-batch per accumulation step; with one it feeds
    # its whole share to the schedule in micro-batches of pipeline_parallel_microbatch_size
    local = n.micro_batch * n.accumulation if n.pp > 1 else n.micro_batch
    cfg: dict[str, dict[str, Any]] = {
        "job": {
            "dump_folder": "./outputs",
            "description": f"trilemma export: {comment_text(plan['title'])}",
        },
        "model": {
            "name": "llama3",
            "flavor": flavor,
            "hf_assets_path": "./assets/hf/tokenizer",
            "converters": c.converters,
        },
        "optimizer": {
            "name": "AdamW",
            "lr": rec["lr"],
            "eps": rec["adam_eps"],
            "weight_decay": rec["weight_decay"],
        },
        "lr_scheduler": {
            "warmup_steps": warm,
            "decay_type": rec["decay"] if rec["decay"] != "constant" else "linear",
            "min_lr_factor": rec["min_lr_ratio"],
        },
        "training": {
            "local_batch_size": local,
            "global_batch_size": n.global_batch,
            "seq_len": n.seq_len,
            "max_norm": rec["grad_clip"],
            "steps": n.steps,
            "mixed_precision_param": c.mp,
        },
        "parallelism": {
            "data_parallel_replicate_degree": c.replicate,
            "data_parallel_shard_degree": c.shard,
            "tensor_parallel_degree": n.tp,
            "pipeline_parallel_degree": n.pp,
            "context_parallel_degree": n.cp,
            "enable_async_tensor_parallel": c.async_tp,
        },
        "activation_checkpoint": {"mode": c.mode},
        "compile": {"enable": bool(pl.compile)},
        "checkpoint": torchtitan_section(n.checkpoint),
    }
    if n.pp > 1:
        cfg["parallelism"].update(
            pipeline_parallel_schedule="1F1B" if n.vp == 1 else "Interleaved1F1B",
            pipeline_parallel_microbatch_size=n.micro_batch,
            module_fqns_per_model_part=stage_modules(m.n_layers, n.pp * n.vp),
        )
    return cfg


def _notes(pl: TrainingPlan, n: PlanNumbers, rec: dict[str, Any]) -> list[str]:
    """What the reader of the job must know: attention kernels, tf32, the data to set, the recipe
    and the step count."""
    notes: list[str] = []
    if not pl.flash_attention:
        notes.append(
            "torchtitan's llama3 attention is scaled_dot_product_attention, which picks flash kernels "
            "where the GPU has them; the plan assumed none"
        )
    if pl.precision == Precision.TF32:
        notes.append(
            "tf32: float32 parameters; TF32 matmuls follow torch.backends.cuda.matmul.allow_tf32"
        )
    if n.checkpoint is not None:
        notes.append(n.checkpoint.note("[checkpoint] interval, async_mode async, load_step -1"))
    notes += [
        "set model.hf_assets_path (tokenizer) and training.dataset / dataset_path for your data",
        f"recipe: {rec['source']} (torchtitan's AdamW keeps its own betas)",
        f"steps = ⌈{n.tokens_planned:.6g} tokens / ({n.global_batch} × {n.seq_len})⌉ = {n.steps}: "
        f"{n.tokens:,} tokens",
    ]
    return notes


def _toml(cfg: dict[str, dict[str, Any]], plan: dict[str, Any], n: PlanNumbers) -> str:
    lines = [
        f"# torchtitan job: {comment_text(plan['title'])}",
        f"# GPUs {n.n_gpus} = tp {n.tp} × pp {n.pp} × cp {n.cp} × dp {n.dp}; global batch {n.global_batch} "
        f"sequences = micro-batch {n.micro_batch} × accumulation {n.accumulation} × dp {n.dp}",
        f"# run: NGPU={n.nodes[1]} CONFIG_FILE=job.toml ./run_train.sh  (on each of {n.nodes[0]} node(s))",
        "",
    ]
    for section, values in cfg.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
        lines.append("")
    return "\n".join(lines)


__all__ = [
    "ENGINE",
    "VERSION",
    "export",
    "stage_modules",
]
