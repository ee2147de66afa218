"""The fine-tuning trainer as a set of memory features (``--trainer``; presets/trainers.toml).

Who fine-tunes knows their trainer, and trainers differ less in their arithmetic than in what they keep on
the device: whether the checkpointed layer inputs stay in HBM or go to the host, whether the logits are
materialised whole for the loss, whether the gradients of every parameter exist at once, whether there is an
fp32 master copy. Each feature here is one physical memory term of trilemma.estimate.memory, never a scalar
efficiency; each preset cites every feature from the trainer's code or docs at a dated commit.
"""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec
from trilemma.specs.enums import StrEnum
from trilemma.specs.stack import feature_values


class LossKernel(StrEnum):
    """How the cross-entropy over the vocabulary is computed (trilemma.estimate.memory._logits_bytes)."""

    EAGER = "eager"  # cross_entropy(logits.float()) on the whole logits tensor
    CHUNKED = "chunked"  # the logits in chunks, each upcast and reduced on its own (torchtune)
    FUSED_LINEAR = "fused-linear"  # LM head and loss fused by token chunks: no whole logits (Liger)
    CUT = "cut"  # Cut Cross-Entropy (Wijmans et al. 2024): the log-sum-exp in on-chip memory, no logits at all
    # flash-attn's Triton cross_entropy_loss on the activation-dtype logits, its backward in place (verl)
    FLASH_INPLACE = "flash-inplace"
    # the logits upcast to fp32, then flash-attn's cross_entropy_loss, a new fp32 gradient (OpenRLHF)
    FLASH_FP32 = "flash-fp32"


class TrainerSpec(Spec):
    """One fine-tuning trainer's memory features."""

    name: str = Field(min_length=1, max_length=64)
    aliases: tuple[str, ...] = ()
    description: str = ""
    activation_offload: bool = Field(
        False,
        description="under activation checkpointing, the checkpointed layer inputs are copied to host "
        "memory in the forward and brought back in the backward",
    )
    offload_in_flight: int = Field(
        1,
        ge=1,
        le=64,
        description="with activation_offload, the layers whose checkpointed inputs are on the device at "
        "once (the copy stream's stash)",
    )
    loss: LossKernel = LossKernel.EAGER
    loss_chunks: int = Field(
        8, ge=1, le=1024, description="chunks of the logits a chunked loss upcasts one at a time"
    )
    optimizer_in_backward: bool = Field(
        False,
        description="each parameter's optimizer step runs in the backward as its gradient is ready and "
        "frees it: no whole gradient buffer",
    )
    master_weights: bool = Field(
        True,
        description="an fp32 master copy with fp32 gradients and optimizer states (mixed precision); "
        "False: the model and its optimizer states in bf16 throughout",
    )
    kl_reference: bool | None = Field(
        None,
        description="whether its GRPO trainer holds a frozen reference model by default (a KL coefficient "
        "above 0); None: no GRPO trainer of its own, the method's default (trilemma.specs.rl.DEFAULT_REFERENCE)",
    )
    rollout_share: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="share of each GPU's memory its RL trainer's colocated engine reserves by default "
        "(vLLM's gpu_memory_utilization); None: the method's default (trilemma.specs.rl.RolloutSpec.engine_share)",
    )
    rollout_in_process: bool | None = Field(
        None,
        description="whether its RL trainer runs the colocated engine in its own process by default "
        "(VLLM_ENABLE_V1_MULTIPROCESSING=0); None: the method's default (trilemma.specs.rl.RolloutSpec.in_process)",
    )
    rollout_logprobs: bool | None = Field(
        None,
        description="whether its RL trainer asks the engine for the sampled tokens' log-probabilities by "
        "default; None: the method's default (trilemma.specs.rl.RolloutSpec.logprobs)",
    )
    source: str = ""

    @property
    def features(self) -> dict[str, object]:
        """The features as plain values (the JSON's ``plan.trainer.features``)."""
        return feature_values(self)


__all__ = ["LossKernel", "TrainerSpec"]
