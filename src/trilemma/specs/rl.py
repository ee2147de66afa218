"""RL post-training (``--finetune grpo``): the rollout a GRPO step adds to a fine-tune's training step.

GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300 §4.1) samples a group of ``generations`` completions
per prompt with the policy, scores them, and trains the policy on the group-normalised advantages with a KL
penalty against a frozen reference model (coefficient 0.04 in DeepSeekMath §4.1: the reference is loaded).
TRL's GRPOTrainer (trl/trainer/grpo_config.py@2026-07-24) generates with vLLM colocated on the training GPUs
(vllm_mode "colocate", vllm_gpu_memory_utilization 0.3 of each GPU), 8 generations per prompt, completions of
up to 512 tokens; with ``beta`` 0 it skips the reference. A LoRA policy's reference is its base with the
adapters disabled: no second copy.

DPO (Rafailov et al. 2023, arXiv 2305.18290) generates nothing: each example is a chosen and a rejected
completion, both trained on (the step's sequences count both), against a frozen reference. TRL's DPOTrainer
(trl/trainer/dpo_config.py@2026-07-24: beta 0.1, precompute_ref_log_probs False) runs the reference's forward
every step; a PEFT policy without a ref_model uses its base with the adapters disabled (dpo_trainer.py).
"""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec

#: trl/trainer/grpo_config.py@2026-07-24: num_generations default=8, max_completion_length default=512,
#: vllm_gpu_memory_utilization default=0.3 (colocate mode)
TRL_GENERATIONS = 8
TRL_COMPLETION = 512
TRL_VLLM_SHARE = 0.3


class RolloutSpec(Spec):
    """One GRPO step's rollout: how many completions, how long, where they are generated."""

    method: str = Field("grpo", pattern="^(grpo|dpo)$")
    generations: int = Field(TRL_GENERATIONS, ge=1, le=1024, description="completions per prompt")
    completion_len: int = Field(
        TRL_COMPLETION, ge=1, le=1 << 20, description="tokens generated per completion (at most)"
    )
    engine_share: float = Field(
        TRL_VLLM_SHARE,
        ge=0.0,
        le=1.0,
        description="share of each GPU's memory the colocated inference engine (vLLM) reserves for its "
        "weights and KV cache; 0: generation shares the training weights (Unsloth's fast_inference)",
    )
    reference: bool = Field(
        True, description="a frozen reference model for the KL penalty (beta > 0)"
    )


__all__ = ["TRL_COMPLETION", "TRL_GENERATIONS", "TRL_VLLM_SHARE", "RolloutSpec"]
