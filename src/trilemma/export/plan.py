"""What every exporter reads from a plan: the integers an engine is given (degrees, micro-batch,
accumulation, global batch, steps), the fine-tune fields, the recipe, and the error an engine that
cannot express a feature raises.

The integers follow from the estimate's layout and its (rounded) global batch:

    GPUs = tp × pp × cp × dp                        (trilemma.specs.axes.Layout.n_gpus)
    global batch = micro-batch × accumulation × dp   (sequences; estimate rounds it to a multiple
                                                      of dp × micro-batch, estimate.layouts.legal_mask)
    steps = ⌈tokens / (global batch × sequence)⌉     (an engine runs whole steps: the run trains at
                                                      least the planned tokens and less than one
                                                      global batch more)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from trilemma.errors import TrilemmaError
from trilemma.export.checkpoint import Checkpointing
from trilemma.specs import Layout, Recompute, TrainingPlan, ZeroStage

ENGINES = ("torchtitan", "megatron", "deepspeed", "hf")


class ExportError(TrilemmaError):
    """A plan feature the target engine cannot express (exit status 2): names the engine, the
    feature, its value, and why."""

    def __init__(self, engine: str, feature: str, value: object, why: str) -> None:
        where = "export" if engine == "any engine" else f"export --to {engine}"
        super().__init__(f"{where}: {feature} {value!s} cannot be expressed: {why}")
        self.engine, self.feature, self.value, self.why = engine, feature, value, why


@dataclass(frozen=True)
class PlanNumbers:
    """The integers of one plan as engines take them. Batches in sequences, lengths in tokens."""

    n_gpus: int
    gpus_per_node: int
    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    dp: int
    sp: bool
    zero: ZeroStage
    recompute: Recompute
    micro_batch: int  # sequences per micro-batch per data-parallel rank
    accumulation: int  # micro-batches per data-parallel rank per optimizer step
    global_batch: int  # sequences per optimizer step
    seq_len: int
    steps: int
    tokens_planned: float  # the plan's tokens
    tokens: int  # steps × global batch × seq_len: what the exported run trains
    checkpoint: Checkpointing | None = (
        None  # the interval the estimate priced, in steps (None: none)
    )

    @classmethod
    def build(
        cls,
        layout: Layout,
        n_gpus: int,
        gpus_per_node: int,
        global_batch: int,
        seq_len: int,
        tokens: float,
    ) -> PlanNumbers:
        """From a layout, the global batch (sequences, a multiple of dp × micro-batch) and the tokens."""
        if layout.n_gpus != n_gpus:
            raise ValueError(f"layout {layout.summary()} uses {layout.n_gpus} GPUs, not {n_gpus}")
        unit = layout.dp * layout.micro_batch
        if global_batch % unit:
            raise ValueError(
                f"global batch {global_batch} is not a multiple of dp × micro-batch = {unit}"
            )
        batch_tokens = global_batch * seq_len
        steps = max(1, -(-round(tokens) // batch_tokens))  # ceil in integers: no float rounding
        return cls(
            n_gpus=n_gpus,
            gpus_per_node=gpus_per_node,
            tp=layout.tp,
            pp=layout.pp,
            vp=layout.vp,
            cp=layout.cp,
            ep=layout.ep,
            dp=layout.dp,
            sp=bool(layout.sp and layout.tp > 1),
            zero=ZeroStage(layout.zero),
            recompute=Recompute(layout.recompute),
            micro_batch=layout.micro_batch,
            accumulation=global_batch // unit,
            global_batch=global_batch,
            seq_len=seq_len,
            steps=steps,
            tokens_planned=float(tokens),
            tokens=steps * batch_tokens,
        )

    @classmethod
    def of(cls, est: Any) -> PlanNumbers:
        """From an Estimate (trilemma.estimate.result): its layout, cluster and single stage."""
        hw = est.cluster.hardware
        if hw.family.startswith("google-tpu"):
            raise ExportError(
                "any engine",
                "hardware",
                hw.name,
                "every exporter writes a torchrun or deepspeed launch for CUDA or ROCm GPUs; a TPU "
                "trains through JAX/XLA (MaxText, Levanter), which trilemma does not export to",
            )
        if len(est.stages) != 1:
            raise ExportError(
                "any engine",
                "a plan of",
                f"{len(est.stages)} stages",
                "an engine's config holds one sequence length and global batch: export each stage",
            )
        s = est.stages[0]
        n = cls.build(
            est.layout,
            est.cluster.n_gpus,
            est.cluster.node_size,
            s.global_batch_sequences,
            s.seq_len,
            s.tokens,
        )
        return replace(n, checkpoint=Checkpointing.of(est, n.steps))

    @property
    def nodes(self) -> tuple[int, int]:
        """(nodes, processes per node) for the launcher: whole nodes, or one node with fewer GPUs."""
        if self.n_gpus <= self.gpus_per_node:
            return 1, self.n_gpus
        if self.n_gpus % self.gpus_per_node:
            raise ExportError(
                "any engine",
                "GPUs",
                self.n_gpus,
                f"a launcher starts the same number of processes on every node: use a multiple of "
                f"the {self.gpus_per_node} GPUs per node (--gpus-per-node)",
            )
        return self.n_gpus // self.gpus_per_node, self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_gpus": self.n_gpus,
            "tp": self.tp,
            "pp": self.pp,
            "vp": self.vp,
            "cp": self.cp,
            "ep": self.ep,
            "dp": self.dp,
            "sp": self.sp,
            "zero": int(self.zero),
            "recompute": str(self.recompute),
            "micro_batch": self.micro_batch,
            "accumulation": self.accumulation,
            "global_batch_sequences": self.global_batch,
            "seq_len": self.seq_len,
            "steps": self.steps,
            "tokens_planned": self.tokens_planned,
            "tokens": self.tokens,
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_dict(),
        }


# ------------------------------------------------------------------ fine-tunes


@dataclass(frozen=True)
class FineTune:
    """The fine-tune fields an exporter needs. ``method``: full, lora, qlora or freeze; LoRA's rank r
    and alpha (Hu et al. 2021, arXiv 2106.09685 §4: the update is (alpha / r) · B·A); target modules
    as the model names them or generically (q, k, v, o, gate, up, down, attention, mlp, all);
    ``base_precision`` of the frozen weights (nf4 for QLoRA, Dettmers et al. 2023); the optimizer;
    ``offload``: where optimizer states live (none or cpu)."""

    method: str = "full"
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_targets: tuple[str, ...] = ()
    lora_dropout: float = (
        0.0  # the plan's (FinetuneSpec.lora_dropout): its memory counts the dropout mask or not
    )
    base_precision: str | None = None
    optimizer: str | None = None
    offload: str = "none"

    @property
    def adapters(self) -> bool:
        return self.method in ("lora", "qlora")


def finetune_of(plan: TrainingPlan) -> FineTune | None:
    """The plan's fine-tune (TrainingPlan.finetune, a FinetuneSpec; optimizer and offload are the plan's),
    or None for a training run from scratch: the one place exporters read it."""
    ft = plan.finetune
    if ft is None:
        return None
    adapters = ft.adapters
    return FineTune(
        method=str(ft.method),
        lora_rank=ft.lora_rank if adapters else None,
        lora_alpha=float(ft.lora_alpha) if adapters else None,
        lora_targets=tuple(ft.targets) if adapters else (),
        lora_dropout=float(ft.lora_dropout),
        base_precision=str(ft.base_precision),
        optimizer=str(plan.optimizer),
        offload=str(plan.offload),
    )


def recipe(finetune: FineTune | None) -> dict[str, Any]:
    """The recipe written beside the plan (presets/export.toml): Llama 2's for training from scratch,
    QLoRA's for a fine-tune."""
    from trilemma.presets import export_recipes

    return dict(export_recipes()["finetune" if finetune is not None else "pretrain"])


def warmup_steps(rec: dict[str, Any], steps: int) -> int:
    """Warm-up steps: the recipe's count, at most its share of a short run (or its fraction)."""
    if "warmup_fraction" in rec:
        return int(steps * rec["warmup_fraction"])
    return min(int(rec["warmup_steps"]), int(steps * rec["warmup_max_fraction"]))


__all__ = [
    "ENGINES",
    "ExportError",
    "FineTune",
    "PlanNumbers",
    "finetune_of",
    "recipe",
    "warmup_steps",
]
