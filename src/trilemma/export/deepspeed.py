"""DeepSpeed: the JSON config (ds_config.json) — batch, ZeRO stage and offload, bf16 / fp16 with
dynamic loss scaling, gradient clipping, AutoTP's tensor-parallel degree.

Keys and defaults: deepspeedai/DeepSpeed commit edaa7221267243c7be7fb49c5d5f5c4fb97b4641
(2026-08-22; PyPI 0.19.8): deepspeed/runtime/constants.py (train_batch_size,
train_micro_batch_size_per_gpu, gradient_accumulation_steps, gradient_clipping, bf16, fp16 with
loss_scale 0 = dynamic and initial_scale_power), deepspeed/runtime/zero/config.py
(DeepSpeedZeroConfig: stage, offload_optimizer, offload_param; zero/offload_config.py
OffloadDeviceEnum: none, cpu, nvme), deepspeed/runtime/tensor_parallel/config.py
(TPTrainingConfig.autotp_size). DeepSpeed checks train_batch_size = micro-batch × accumulation ×
data-parallel world size (runtime/config.py _configure_train_batch_size). Pipeline stages
(deepspeed.pipe.PipelineModule), MoE layers and recomputation are set in the model's code, not in
this file.
"""

from __future__ import annotations

import json
from typing import Any

from trilemma.export.document import ExportDocument
from trilemma.export.plan import ExportError, FineTune, PlanNumbers, recipe
from trilemma.specs import ModelSpec, Precision, Recompute, TrainingPlan
from trilemma.specs.enums import Offload

ENGINE = "deepspeed"
VERSION = "DeepSpeed 0.19.8 (commit edaa7221267243c7be7fb49c5d5f5c4fb97b4641)"
# fp16 dynamic loss scaling: DeepSpeed's defaults written out (runtime/constants.py FP16_*_DEFAULT)
FP16 = {
    "enabled": True,
    "loss_scale": 0,
    "initial_scale_power": 16,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "min_loss_scale": 1,
}


def config(
    m: ModelSpec,
    pl: TrainingPlan,
    n: PlanNumbers,
    ft: FineTune | None,
    engine: str = ENGINE,
    auto: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """The DeepSpeed config of a plan and its notes. ``auto``: the batch, clipping and precision values
    as "auto", for Hugging Face's Trainer, which fills them from its TrainingArguments
    (transformers integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_process)."""
    notes: list[str] = []
    _check_expressible(pl, n, ft, engine)
    rec = recipe(ft)
    cfg: dict[str, Any] = {
        "train_batch_size": "auto" if auto else n.global_batch,
        "train_micro_batch_size_per_gpu": "auto" if auto else n.micro_batch,
        "gradient_accumulation_steps": "auto" if auto else n.accumulation,
        "gradient_clipping": "auto" if auto else rec["grad_clip"],
        "zero_optimization": {"stage": int(n.zero)},
    }
    if pl.precision == Precision.BF16:
        cfg["bf16"] = {"enabled": "auto" if auto else True}
    elif pl.precision == Precision.FP16:
        cfg["fp16"] = {**FP16, "enabled": "auto" if auto else True}
    if n.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": n.tp}
    _offload(cfg, n, ft, engine)
    if n.recompute == Recompute.FULL and engine == ENGINE:
        notes.append(
            "recompute full: the model's code checkpoints each layer (deepspeed.checkpointing.checkpoint, "
            "or a Hugging Face model's gradient_checkpointing_enable()); the JSON config does not switch it on"
        )
    if pl.compile and engine == ENGINE:
        notes.append("compile: call engine.compile() on the DeepSpeed engine (not a JSON key)")
    return cfg, notes


def _check_expressible(pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None, engine: str) -> None:
    """ExportError for what a DeepSpeed JSON config cannot say: pipeline, context or expert
    parallelism, TP with sequence parallelism, fp8, a frozen-layer or LoRA fine-tune (on its own),
    selective recomputation."""
    for axis, value, why in (
        (
            "pp",
            n.pp,
            "DeepSpeed's pipeline stages are built in code (deepspeed.pipe."
            "PipelineModule(num_stages=...)), not in its JSON config",
        ),
        (
            "cp",
            n.cp,
            "DeepSpeed has no context parallelism (Ulysses' sequence_parallel_size "
            "splits attention heads, a different scheme)",
        ),
        ("ep", n.ep, "DeepSpeed's expert parallelism is set on its MoE layers in code"),
    ):
        if value > 1:
            raise ExportError(engine, axis, value, why)
    if n.tp > 1 and n.sp:
        raise ExportError(
            engine,
            "sp",
            "on",
            "DeepSpeed's AutoTP training has no sequence parallelism (pin --no-sp)",
        )
    if pl.precision == Precision.FP8:
        raise ExportError(
            engine,
            "precision",
            pl.precision,
            "DeepSpeed's config has no fp8 training switch "
            "(Transformer Engine layers are chosen in the model's code)",
        )
    if ft is not None and ft.method == "freeze" and engine == ENGINE:
        raise ExportError(
            engine,
            "fine-tune",
            ft.method,
            "DeepSpeed's config has no frozen-layer switch (a "
            "training script freezes layers in its own code, requires_grad=False), so the exported "
            "run would train every layer the plan freezes",
        )
    if ft is not None and ft.adapters and engine == ENGINE:
        raise ExportError(
            engine,
            "fine-tune",
            ft.method,
            "LoRA adapters are made by the model's code (PEFT): "
            "use --to hf, whose Trainer config embeds this DeepSpeed config",
        )
    if n.recompute in (Recompute.SELECTIVE, Recompute.OP):
        raise ExportError(
            engine,
            "recompute",
            n.recompute,
            "DeepSpeed and Hugging Face models recompute whole "
            "layers (activation checkpointing); they have no selective recomputation",
        )


def _offload(cfg: dict[str, Any], n: PlanNumbers, ft: FineTune | None, engine: str) -> None:
    """The fine-tune's offload into ``cfg``'s zero_optimization; ExportError below the ZeRO stage
    DeepSpeed offloads it from."""
    offload = Offload(ft.offload) if ft is not None else Offload.NONE
    if n.zero < offload.min_zero:
        what = "parameters" if offload == Offload.OPTIMIZER_PARAMS else "optimizer states"
        raise ExportError(
            engine,
            "offload",
            offload.value,
            f"DeepSpeed offloads {what} from ZeRO stage {int(offload.min_zero)}, not at stage "
            f"{int(n.zero)} (pin --zero {int(offload.min_zero)})",
        )
    if (
        offload != Offload.NONE
    ):  # DeepSpeed's OffloadDeviceEnum is none, cpu or nvme: trilemma's host is cpu
        cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    if offload == Offload.OPTIMIZER_PARAMS:
        cfg["zero_optimization"]["offload_param"] = {"device": "cpu"}


def export(
    m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None, plan: dict[str, Any]
) -> ExportDocument:
    cfg, notes = config(m, pl, n, ft)
    nodes, per_node = n.nodes
    data = {"ds_config": cfg, "launcher": {"nnodes": nodes, "nproc_per_node": per_node}}
    notes += [
        f"launch {n.n_gpus} processes ({nodes} node(s) × {per_node}): deepspeed --num_nodes {nodes} "
        f"--num_gpus {per_node} train.py --deepspeed_config ds_config.json",
        f"global batch {n.global_batch} = micro-batch {n.micro_batch} × accumulation {n.accumulation} × "
        f"dp {n.dp} (DeepSpeed's data-parallel world: {n.n_gpus} GPUs / AutoTP {n.tp}); run {n.steps} steps "
        f"({n.tokens:,} tokens) in train.py's loop",
        f"optimizer and schedule are train.py's; recipe: {recipe(ft)['source']}",
    ]
    if (
        n.checkpoint is not None
    ):  # ds_config.json has no interval key (runtime/constants.py): train.py's
        data["checkpoint"] = {"save_interval_steps": n.checkpoint.every_steps, "load": "latest"}
        notes.append(
            n.checkpoint.note(
                "ds_config has no interval key: train.py calls engine.save_checkpoint(dir) every "
                f"{n.checkpoint.every_steps} steps and engine.load_checkpoint(dir) at start, the latest tag; "
                "saves are synchronous, as priced"
            )
        )
    return ExportDocument(
        engine=ENGINE,
        engine_version=VERSION,
        files={"ds_config.json": json.dumps(cfg, indent=2) + "\n"},
        config=data,
        numbers=n,
        plan=plan,
        notes=tuple(notes),
    )


__all__ = ["ENGINE", "FP16", "VERSION", "config", "export"]
