"""Hugging Face Trainer (+ PEFT): TrainingArguments as JSON, PEFT's LoraConfig and the bitsandbytes
quantisation config for fine-tunes, and a short script that trains with them.

Names: transformers 5.24 TrainingArguments (training_args.py: per_device_train_batch_size,
gradient_accumulation_steps, max_steps, warmup_steps — an integer or a ratio —, lr_scheduler_type
and lr_scheduler_kwargs, bf16 / fp16 / tf32, gradient_checkpointing, torch_compile, optim,
deepspeed); BitsAndBytesConfig (utils/quantization_config.py: load_in_4bit, bnb_4bit_quant_type
"nf4", bnb_4bit_compute_dtype, bnb_4bit_use_double_quant — QLoRA, Dettmers et al. 2023 §3);
peft 0.21 LoraConfig (tuners/lora/config.py: r, lora_alpha, target_modules, lora_dropout, bias,
task_type). Data parallelism is the launcher's processes; ZeRO runs through the DeepSpeed config
(trilemma.export.deepspeed) embedded in TrainingArguments.deepspeed with its batch values "auto".
"""

from __future__ import annotations

import json
from typing import Any

from trilemma.export import deepspeed as ds
from trilemma.export.checkpoint import trainer_arguments
from trilemma.export.document import ExportDocument
from trilemma.export.escape import py_docstring_text
from trilemma.export.plan import ExportError, FineTune, PlanNumbers, recipe, warmup_steps
from trilemma.specs import ModelSpec, Optimizer, Precision, Recompute, TrainingPlan, ZeroStage
from trilemma.specs.enums import FfnType, PositionType
from trilemma.specs.plan import EAGER_SOFTMAX_PASSES

ENGINE = "hf"
VERSION = "transformers 5.24 TrainingArguments, peft 0.21 LoraConfig"

# generic LoRA targets → the module names of Llama-family models in transformers (modeling_llama.py:
# q_proj, k_proj, v_proj, o_proj; gate_proj, up_proj, down_proj); "all": PEFT's "all-linear"
LLAMA_MODULES = {
    "q": ["q_proj"],
    "k": ["k_proj"],
    "v": ["v_proj"],
    "o": ["o_proj"],
    "gate": ["gate_proj"],
    "up": ["up_proj"],
    "down": ["down_proj"],
    "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "mlp": ["gate_proj", "up_proj", "down_proj"],
}
# trilemma optimizer names → TrainingArguments.optim (transformers OptimizerNames)
OPTIM = {
    "adamw": "adamw_torch_fused",
    "sgd": "sgd",
    "adamw_8bit": "adamw_bnb_8bit",
    "adamw8bit": "adamw_bnb_8bit",
    "adamw-8bit": "adamw_bnb_8bit",
    "paged-adamw-8bit": "paged_adamw_8bit",
    "adafactor": "adafactor",
    "lion": "lion_32bit",
    "paged_adamw_8bit": "paged_adamw_8bit",
    "paged_adamw": "paged_adamw_32bit",
    "paged_adamw_32bit": "paged_adamw_32bit",
}


def lora_targets(ft: FineTune, m: ModelSpec) -> list[str] | str:
    """LoRA's target modules as PEFT takes them: the model's own names pass through; generic ones
    (q, k, v, o, gate, up, down, attention, mlp) become Llama-family names (Llama, Mistral, Qwen2:
    rotary SwiGLU models); all → "all-linear"."""
    if not ft.lora_targets or "all" in ft.lora_targets:
        return "all-linear"
    generic = [t for t in ft.lora_targets if t in LLAMA_MODULES]
    if generic and (m.ffn_type != FfnType.SWIGLU or m.position != PositionType.ROTARY):
        raise ExportError(
            ENGINE,
            "LoRA targets",
            ",".join(generic),
            f"{m.name} is not a Llama-family model: give "
            "its module names (e.g. c_attn for GPT-2) or all",
        )
    out: list[str] = []
    for t in ft.lora_targets:
        for name in LLAMA_MODULES.get(t, [t]):
            if name not in out:
                out.append(name)
    return out


def lora_config(ft: FineTune, rec: dict[str, Any], m: ModelSpec) -> dict[str, Any]:
    if ft.lora_rank is None:
        raise ExportError(ENGINE, "LoRA rank", None, "a fine-tune with adapters needs its rank")
    return {
        "r": ft.lora_rank,
        "lora_alpha": ft.lora_alpha if ft.lora_alpha is not None else 2 * ft.lora_rank,
        "target_modules": lora_targets(ft, m),
        "lora_dropout": ft.lora_dropout,
        "bias": "none",
        "task_type": "CAUSAL_LM",
    }


def quantization_config(ft: FineTune, compute: str) -> dict[str, Any] | None:
    """bitsandbytes' config of the frozen base: 4-bit NF4 with double quantisation (QLoRA), 8-bit, or None."""
    base = (ft.base_precision or ("nf4" if ft.method == "qlora" else "")).lower()
    if base in ("nf4", "fp4", "int4"):
        return {
            "load_in_4bit": True,
            "bnb_4bit_quant_type": "fp4" if base == "fp4" else "nf4",
            "bnb_4bit_compute_dtype": compute,
            "bnb_4bit_use_double_quant": True,
        }
    if base == "int8":
        return {"load_in_8bit": True}
    if base in ("", "bf16", "fp16", "fp32"):
        return None
    raise ExportError(
        ENGINE, "base precision", base, "bitsandbytes loads a base in nf4, fp4 or int8"
    )


def training_arguments(
    m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None
) -> tuple[dict[str, Any], list[str]]:
    for axis, value in (("tp", n.tp), ("pp", n.pp), ("cp", n.cp), ("ep", n.ep)):
        if value > 1:
            raise ExportError(
                ENGINE,
                axis,
                value,
                "the exporter writes the Trainer's data parallelism (DDP, ZeRO "
                "through DeepSpeed); export model parallelism with --to torchtitan or --to megatron",
            )
    prec = pl.precision
    if prec == Precision.FP8:
        raise ExportError(
            ENGINE, "precision", prec, "TrainingArguments has bf16, fp16 and tf32, no fp8"
        )
    if n.recompute in (Recompute.SELECTIVE, Recompute.OP):
        raise ExportError(
            ENGINE,
            "recompute",
            n.recompute,
            "gradient_checkpointing recomputes whole layers; "
            "Hugging Face models have no selective recomputation",
        )
    if ft is not None and ft.method == "freeze":
        raise ExportError(
            ENGINE, "fine-tune", ft.method, "TrainingArguments has no frozen-layer switch"
        )
    rec = recipe(ft)
    args: dict[str, Any] = {
        "output_dir": "outputs",
        "per_device_train_batch_size": n.micro_batch,
        "gradient_accumulation_steps": n.accumulation,
        "max_steps": n.steps,
        "learning_rate": rec["lr"],
        "warmup_steps": warmup_steps(rec, n.steps),
        "weight_decay": rec["weight_decay"],
        "adam_beta1": rec["adam_beta1"],
        "adam_beta2": rec["adam_beta2"],
        "adam_epsilon": rec["adam_eps"],
        "max_grad_norm": rec["grad_clip"],
        "gradient_checkpointing": n.recompute == Recompute.FULL,
        "torch_compile": bool(pl.compile),
        "bf16": prec == Precision.BF16,
        "fp16": prec == Precision.FP16,
        **trainer_arguments(n.checkpoint),
    }
    if rec["decay"] == "cosine":
        args.update(
            lr_scheduler_type="cosine_with_min_lr",
            lr_scheduler_kwargs={"min_lr_rate": rec["min_lr_ratio"]},
        )
    else:
        args["lr_scheduler_type"] = "constant_with_warmup"
    if prec == Precision.TF32:
        args["tf32"] = True
    opt = (ft.optimizer if ft is not None and ft.optimizer else str(pl.optimizer)).lower()
    if opt not in OPTIM and opt not in (str(Optimizer.ADAMW), str(Optimizer.SGD)):
        raise ExportError(ENGINE, "optimizer", opt, "one of " + ", ".join(OPTIM))
    args["optim"] = OPTIM.get(opt, opt)
    notes = [f"recipe: {rec['source']}"]
    if n.checkpoint is not None:
        notes.append(n.checkpoint.note("save_steps; train_hf.py resumes from output_dir's latest"))
    if n.zero != ZeroStage.NONE or (ft is not None and ft.offload != "none"):
        cfg, _ = ds.config(m, pl, n, ft, engine=ENGINE, auto=True)
        args["deepspeed"] = cfg
        notes.append(
            f"ZeRO-{int(n.zero)} through DeepSpeed (TrainingArguments.deepspeed; its batch, clipping and "
            'precision values are "auto": the Trainer fills them from these arguments)'
        )
    return args, notes


def export(
    m: ModelSpec, pl: TrainingPlan, n: PlanNumbers, ft: FineTune | None, plan: dict[str, Any]
) -> ExportDocument:
    args, notes = training_arguments(m, pl, n, ft)
    files = {"training_args.json": json.dumps(args, indent=2) + "\n"}
    cfg: dict[str, Any] = {"training_args": args}
    if ft is not None and ft.adapters:
        cfg["lora_config"] = lora_config(ft, recipe(ft), m)
        files["lora_config.json"] = json.dumps(cfg["lora_config"], indent=2) + "\n"
    q = (
        quantization_config(ft, "bfloat16" if pl.precision == Precision.BF16 else "float16")
        if ft is not None
        else None
    )
    if q is not None:
        cfg["bnb_config"] = q
        files["bnb_config.json"] = json.dumps(q, indent=2) + "\n"
    nodes, per_node = n.nodes
    cfg["launcher"] = {"nnodes": nodes, "nproc_per_node": per_node}
    files["train_hf.py"] = SCRIPT.format(
        title=py_docstring_text(plan["title"]),
        nodes=nodes,
        per_node=per_node,
        seq=n.seq_len,
        attn="sdpa" if pl.flash_attention else "eager",
    )
    notes = [
        f"dp {n.dp} = the launcher's processes: torchrun --nnodes {nodes} --nproc-per-node {per_node} train_hf.py "
        "MODEL DATA; global batch "
        f"{n.global_batch} = per_device_train_batch_size {n.micro_batch} × gradient_accumulation_steps "
        f"{n.accumulation} × {n.dp} processes"
    ] + notes
    if ft is None:
        notes.append(
            "training from scratch: train_hf.py builds the model from MODEL's config (AutoConfig) with "
            "fresh weights"
        )
    if not pl.flash_attention and pl.softmax_passes != EAGER_SOFTMAX_PASSES:
        notes.append(
            f"attn_implementation eager makes {EAGER_SOFTMAX_PASSES} passes over the score matrix (scale, "
            "mask, torch.softmax); "
            f"the plan was timed with softmax_passes {pl.softmax_passes}"
        )
    return ExportDocument(
        engine=ENGINE,
        engine_version=VERSION,
        files=files,
        config=cfg,
        numbers=n,
        plan=plan,
        notes=tuple(notes),
    )


SCRIPT = '''"""Hugging Face Trainer: {title}.

Run beside training_args.json (and lora_config.json / bnb_config.json for a fine-tune) on each node:
    torchrun --nnodes {nodes} --nproc-per-node {per_node} train_hf.py MODEL DATA
MODEL: a model name or path (its weights for a fine-tune, its config for training from scratch);
DATA: text files (a glob) packed into {seq}-token sequences.
"""

import json
import os
import sys

from datasets import load_dataset
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, Trainer,
                          TrainingArguments, default_data_collator)
from transformers.trainer_utils import get_last_checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = {seq}


def read(name):
    path = os.path.join(HERE, name)
    return json.load(open(path)) if os.path.exists(path) else None


def main(model_name, data):
    args = TrainingArguments(**read("training_args.json"))
    lora, bnb = read("lora_config.json"), read("bnb_config.json")
    tok = AutoTokenizer.from_pretrained(model_name)
    if lora is None:  # training from scratch: the architecture, fresh weights
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_name), attn_implementation="{attn}")
    else:
        quant = BitsAndBytesConfig(**bnb) if bnb else None
        model = AutoModelForCausalLM.from_pretrained(model_name, quantization_config=quant,
                                                     attn_implementation="{attn}")
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        if quant is not None:
            model = prepare_model_for_kbit_training(model, args.gradient_checkpointing)
        model = get_peft_model(model, LoraConfig(**lora))
    text = load_dataset("text", data_files=data, split="train")
    ids = text.map(lambda b: tok(b["text"]), batched=True, remove_columns=["text"])

    def pack(b):  # concatenate, cut into SEQ-token sequences
        flat = [t for seq in b["input_ids"] for t in seq]
        n = len(flat) // SEQ * SEQ
        blocks = [flat[i:i + SEQ] for i in range(0, n, SEQ)]
        return {{"input_ids": blocks, "labels": [list(x) for x in blocks]}}

    train = ids.map(pack, batched=True, remove_columns=ids.column_names)
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=default_data_collator)
    last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    trainer.train(resume_from_checkpoint=last)  # after a failure: from the latest save


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''


__all__ = [
    "ENGINE",
    "LLAMA_MODULES",
    "OPTIM",
    "SCRIPT",
    "VERSION",
    "export",
    "lora_config",
    "lora_targets",
    "quantization_config",
    "training_arguments",
]
