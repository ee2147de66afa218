"""Training plan: what to train on (stages of tokens / sequence / batch), precision, dtypes.
The parallel layout (how the work is split over devices) is ``trilemma.specs.axes.Layout``."""

from __future__ import annotations

from pydantic import Field, model_validator

from trilemma.specs.base import Spec
from trilemma.specs.bounds import MAX_SEQ, MIN_GOODPUT, bounded
from trilemma.specs.distill import DistillSpec
from trilemma.specs.enums import DTYPE_BYTES, Dtype, Offload, Optimizer, Precision, Task
from trilemma.specs.finetune import FinetuneSpec
from trilemma.specs.rl import RolloutSpec
from trilemma.specs.stack import StackSpec
from trilemma.specs.trainer import TrainerSpec


class Stage(Spec):
    """One phase of training at a fixed sequence length and global batch."""

    tokens: float = Field(gt=0, le=1e18, description="tokens trained in this stage")
    seq_len: int = bounded(
        "seq_len",
        "seq",
        f"a whole number of tokens from 1 to {MAX_SEQ:,}",
        gt=0,
        le=MAX_SEQ,
        description="tokens per sequence",
    )
    global_batch_tokens: float = Field(gt=0, description="target tokens per optimizer step")
    explicit_batch: bool = Field(
        False, description="the user gave the batch: do not round it, fail if it cannot work"
    )

    @model_validator(mode="after")
    def _check(self) -> Stage:
        if self.global_batch_tokens > self.tokens:
            raise ValueError(
                f"global_batch_tokens={self.global_batch_tokens:.6g}: at most the stage's tokens ({self.tokens:.6g})"
            )
        if self.global_batch_tokens < self.seq_len and self.explicit_batch:
            raise ValueError(
                f"global_batch_tokens={self.global_batch_tokens:.6g}: at least one sequence ({self.seq_len} tokens)"
            )
        n_seq = self.global_batch_tokens / self.seq_len
        if self.explicit_batch and n_seq != int(n_seq):
            lo, hi = int(n_seq) * self.seq_len, (int(n_seq) + 1) * self.seq_len
            raise ValueError(
                f"global_batch_tokens={self.global_batch_tokens:.6g}: a whole number of {self.seq_len:,}-token "
                f"sequences ({self.global_batch_tokens:,.0f} tokens is {n_seq:,.1f} sequences; the nearest "
                f"whole batches are {lo:,} and {hi:,} tokens)"
            )
        return self


class DtypeSpec(Spec):
    """Storage of model states, in bytes per parameter (Rajbhandari et al. 2020, ZeRO §3).

    Mixed-precision Adam: 2 (bf16 weights) + 2 (grads) + 12 (fp32 master, m, v) = 16 bytes;
    Megatron accumulates gradients in fp32: 2 + 4 + 12 = 18 bytes (our default).
    Frozen (non-trainable) parameters carry only ``frozen_weight`` bytes (e.g. 0.5 for 4-bit).
    """

    weight: Dtype = Dtype.BF16
    grad: Dtype = Dtype.FP32
    master: Dtype | None = Field(
        Dtype.FP32, description="fp32 master copy; None when weights are fp32"
    )
    optimizer_state: Dtype = Dtype.FP32
    frozen_weight: Dtype = Dtype.BF16
    activation: Dtype = Dtype.BF16
    attention_probs: Dtype | None = Field(
        None,
        description="dtype of the materialised attention probabilities "
        "(flash off): None = the activation dtype, as Megatron-LM's fused "
        "softmax keeps them; fp32 under torch.autocast, whose softmax autocasts "
        "to float32 (trilemma.estimate.activations.activation_bytes_per_layer)",
    )
    norm_input: Dtype | None = Field(
        None,
        description="dtype a norm keeps its input in for backward: None = the "
        "activation dtype, as a fused norm kernel (Apex, Transformer Engine, torch.compile) "
        "keeps it; fp32 in eager PyTorch where the norm runs in fp32 — under torch.autocast "
        "(layer_norm autocasts to float32) or Hugging Face's LlamaRMSNorm (hidden_states.to("
        "torch.float32), whose pow saves the fp32 copy)",
    )

    @classmethod
    def for_precision(cls, precision: Precision, grad: Dtype | str = Dtype.FP32) -> DtypeSpec:
        """Default storage for a compute precision (fp8 keeps bf16 weights: Micikevicius 2022)."""
        if precision in (Precision.FP32, Precision.TF32):
            return cls(
                weight="fp32", grad="fp32", master=None, activation="fp32", frozen_weight="fp32"
            )
        half = "fp16" if precision == Precision.FP16 else "bf16"
        return cls(weight=half, grad=grad, master="fp32", activation=half, frozen_weight=half)

    def bytes_of(self, field: str) -> float:
        v = getattr(self, field)
        return 0.0 if v is None else DTYPE_BYTES[v]

    def optimizer_bytes(self, n_moments: int) -> float:
        """Optimizer state per trainable parameter, bytes: the fp32 master copy (none when weights are
        fp32) plus ``n_moments`` moment tensors (Adam 2, momentum SGD 1). ZeRO §3: 4 + 4 + 4 = 12 for Adam."""
        return self.bytes_of("master") + n_moments * self.bytes_of("optimizer_state")


#: passes over the score matrix of eager PyTorch's unfused attention (scale, mask, torch.softmax): Hugging Face's
#: eager attention, Megatron-LM's FusedScaleMaskSoftmax with its fusion off (TrainingPlan.softmax_passes)
EAGER_SOFTMAX_PASSES = 3
#: the features a plan without a stack is timed with (StackSpec's defaults)
DEFAULT_STACK = StackSpec(name="default")


class TrainingPlan(Spec):
    """What is trained: one or more stages, at one precision, with one optimizer."""

    stages: tuple[Stage, ...] = Field(min_length=1)
    precision: Precision = Precision.BF16
    dtypes: DtypeSpec = DtypeSpec()
    optimizer: Optimizer = Optimizer.ADAMW
    trainable_fraction: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="share of parameters that train when "
        "finetune is None (a fine-tune says what trains: trilemma.estimate.finetune)",
    )
    finetune: FinetuneSpec | None = Field(
        None,
        description="fine-tune an existing model (full, LoRA, QLoRA, freeze); "
        "None: pre-training from scratch",
    )
    offload: Offload = Field(
        Offload.NONE,
        description="optimizer states (and weights) in host memory: ZeRO-Offload "
        "/ ZeRO-Infinity (trilemma.estimate.finetune)",
    )
    flash_attention: bool = True
    softmax_passes: int = Field(
        1,
        ge=1,
        le=16,
        description="without FlashAttention, the passes over the h·s·S score "
        "matrix between its two GEMMs, each a read and a write: 1, Megatron-LM's fused "
        "scale-mask-softmax kernel; 3, eager PyTorch (scale, mask, torch.softmax: Hugging Face "
        "eager attention); more for a softmax written by hand (trilemma.estimate.layer_ops."
        "unfused_attention_s). No effect with FlashAttention",
    )
    fused_loss: bool = Field(
        False,
        description="a fused cross-entropy kernel (Megatron's vocab-parallel one, "
        "llm-foundry's fused_crossentropy): fewer bytes per logit than eager PyTorch's "
        "cross_entropy(logits.float()) (memory.fused_logits_bytes_per_element)",
    )
    compile: bool = Field(
        False,
        description="torch.compile (inductor) on the model: fused pointwise chains whose "
        "intermediates are recomputed in the fused backward — a gated MLP saves 3 hidden "
        "tensors instead of eager PyTorch's 4 (trilemma.estimate.activations.COMPILED_GATED_HIDDEN)",
    )
    task: Task = Field(
        Task.CAUSAL_LM,
        description="what the head predicts: causal-lm, the next token over the "
        "vocabulary (an LM head and its logits), or classification, a few classes from a pooled "
        "token: no LM head GEMMs, cross-entropy over the vocabulary or logits memory "
        "(finetune.backward_shares, memory.memory_per_device)",
    )
    async_tp: bool = Field(
        False,
        description="asynchronous tensor parallelism: under sequence parallelism the forward's "
        "TP all-gathers and reduce-scatters are split by rank and overlapped with the matmul each "
        "feeds or follows (torchtitan parallelism.enable_async_tensor_parallel; Megatron-Core "
        "--tp-comm-overlap); no effect without sequence parallelism (trilemma.estimate.parallel_time.async_tp_s)",
    )
    stack: StackSpec | None = Field(
        None,
        description="the software stack that runs the loop, as its features (presets/stacks.toml); "
        "None: not given — the step is timed with StackSpec's defaults and its bands widen by the "
        "cross-stack error (trilemma.estimate.bands)",
    )
    trainer: TrainerSpec | None = Field(
        None,
        description="the fine-tuning trainer, as its memory features (presets/trainers.toml): "
        "activation offload, loss kernel, optimizer-in-backward, master weights; None: not given "
        "(eager loss, no offload, mixed precision with an fp32 master)",
    )
    rl: RolloutSpec | None = Field(
        None,
        description="RL post-training (--finetune grpo): the rollout each step adds — a reference "
        "model, a colocated generation engine, completions per prompt (trilemma.estimate.rl); None: none",
    )
    distill: DistillSpec | None = Field(
        None,
        description="distillation from an existing teacher: its forward on every training token and its "
        "16-bit weights on every GPU (trilemma.estimate.distill); None: trained on the data alone",
    )
    goodput: float | None = bounded(
        "goodput",
        "goodput",
        f"a fraction from {MIN_GOODPUT} to 1",
        None,
        ge=MIN_GOODPUT,
        le=1.0,
        description="useful share of wall-clock time; None: "
        "modelled (failures, checkpoints and restarts for the GPU count and duration, "
        "trilemma.estimate.goodput) times the straggler share for the GPU count "
        "(trilemma.estimate.stragglers.straggler_share: each step waits for the slowest GPU)",
    )

    @property
    def stack_features(self) -> StackSpec:
        """The stack the step is timed with: the plan's, else StackSpec's defaults."""
        return self.stack if self.stack is not None else DEFAULT_STACK

    @property
    def total_tokens(self) -> float:
        return sum(s.tokens for s in self.stages)

    @property
    def optimizer_moments(self) -> int:
        """Moment tensors the optimizer keeps per trainable parameter: AdamW (8-bit too) 2 (m, v), SGD/LION 1,
        Adafactor 1 (its factored second moment, counted as one tensor here; its bytes:
        trilemma.estimate.finetune.optimizer_state_bytes)."""
        return (
            2
            if self.optimizer in (Optimizer.ADAMW, Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT)
            else 1
        )

    @property
    def is_finetune(self) -> bool:
        return self.finetune is not None

    @property
    def checkpoint_bytes_per_param(self) -> float:
        """Bytes a training checkpoint saves per parameter of the model: the trainable share's weights and
        optimizer state (master copy + moments). Frozen weights are not saved: they are reloaded from the
        base model. bf16 + AdamW: 2 + 4 + 2 × 4 = 14 bytes, the size of BLOOM-176B's 2.3 TB checkpoints
        (bigscience tr11-176B-ml README: 176e9 × 14 bytes)."""
        d = self.dtypes
        return self.trainable_fraction * (
            d.bytes_of("weight") + d.optimizer_bytes(self.optimizer_moments)
        )
