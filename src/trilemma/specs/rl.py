"""RL post-training (``--finetune grpo``): the rollout a GRPO step adds to a fine-tune's training step.

GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300 §4.1) samples a group of ``generations`` completions
per prompt with the policy, scores them, and trains the policy on the group-normalised advantages with a KL
penalty against a frozen reference model (coefficient 0.04 in DeepSeekMath §4.1: the reference is loaded).
TRL's GRPOTrainer (trl/trainer/grpo_config.py@2026-07-24) generates with vLLM colocated on the training GPUs
(vllm_mode "colocate", vllm_gpu_memory_utilization 0.3 of each GPU), 8 generations per prompt, completions of
up to 512 tokens; its ``beta`` defaults to 0, which skips the reference: the default here too
(DEFAULT_REFERENCE; ``--kl-reference`` holds one). A LoRA policy's reference is its base with the
adapters disabled: no second copy.

DPO (Rafailov et al. 2023, arXiv 2305.18290) generates nothing: each example is a chosen and a rejected
completion, both trained on (the step's sequences count both), against a frozen reference. TRL's DPOTrainer
(trl/trainer/dpo_config.py@2026-07-24: beta 0.1, precompute_ref_log_probs False) runs the reference's forward
every step; a PEFT policy without a ref_model uses its base with the adapters disabled (dpo_trainer.py).

PPO (Schulman et al. 2017, arXiv 1707.06347; for language models Ouyang et al. 2022, arXiv 2203.02155 §3.5)
holds four models: the policy and a value model (the critic), both trained, and a frozen reference and reward
model. OpenRLHF (openrlhf/cli/train_ppo_ray.py@3c3be623, 2026-08-13) samples one response per prompt
(--rollout.n_samples_per_prompt default 1) and trains one epoch on each batch (--train.max_epochs default 1);
its critic and reward model are the base model with a d_model × 1 score head in place of the LM head
(openrlhf/models/model.py: nn.Linear(config.hidden_size, 1)); each step forwards the reward model, the
policy (its log-probs), the critic (its values) and the reference (openrlhf/trainer/ppo_utils/
experience_maker.py). TRL's PPOTrainer (trl/experimental/ppo/ppo_trainer.py@2026-07-24) holds the same four
(policy and value model wrapped together, one optimizer; with PEFT the reference is the base with the
adapters disabled). The critic and the reward model here are the policy's size.
"""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec

#: trl/trainer/grpo_config.py@2026-07-24: num_generations default=8, max_completion_length default=512,
#: vllm_gpu_memory_utilization default=0.3 (colocate mode)
TRL_GENERATIONS = 8
TRL_COMPLETION = 512
TRL_VLLM_SHARE = 0.3
#: TRL's colocated vLLM runs in the trainer's process (trl/generation/vllm_generation.py@2026-07-24:
#: distributed_executor_backend="external_launcher", for which vLLM sets VLLM_ENABLE_V1_MULTIPROCESSING=0,
#: vllm/config.py ParallelConfig.__post_init__ at 0.9.0) and asks for the sampled tokens' log-probabilities
#: (trl/trainer/grpo_trainer.py@2026-07-24: logprobs=0, for the importance-sampling correction)
TRL_IN_PROCESS = True
TRL_LOGPROBS = True
#: openrlhf/cli/train_ppo_ray.py@3c3be623: --rollout.n_samples_per_prompt default=1
PPO_SAMPLES = 1
#: the methods with a rollout spec: RL and preference post-training
RL_METHODS = ("grpo", "dpo", "ppo")
#: whether each method's trainers hold a reference model by default. GRPO: none — TRL's GRPOTrainer
#: (trl/trainer/grpo_config.py@f2cd5771, 2026-07-24: beta default 0.0, 'If 0.0 (default), the reference model
#: is not loaded'; the default since 2025-05-30, #3516) and verl (verl/trainer/ppo/utils.py@b178a3cd,
#: 2026-01-29: need_reference_policy = algorithm.use_kl_in_reward or actor.use_kl_loss, both false in
#: ppo_trainer.yaml and actor/actor.yaml); OpenRLHF holds one (openrlhf/cli/train_ppo_ray.py@3c3be623:
#: --algo.kl.init_coef default 0.01, a reference when it is above 0), as NeMo-RL v0.3 does
#: (grpo_math_1B.yaml: reference_policy_kl_penalty 0.01): --kl-reference. DPO: TRL's DPOTrainer's loss is
#: against the reference (dpo_config.py: beta 0.1). PPO: OpenRLHF's init_coef 0.01.
DEFAULT_REFERENCE = {"grpo": False, "dpo": True, "ppo": True}


def default_reference(method: str, trainer_default: bool | None = None) -> bool:
    """Whether a ``method`` run holds a frozen reference model by default: its trainer's default where the trainer
    states one for GRPO (TrainerSpec.kl_reference: Unsloth's beta 0.001, TRL's 0.0), else the method's
    (DEFAULT_REFERENCE)."""
    if method == "grpo" and trainer_default is not None:
        return trainer_default
    return DEFAULT_REFERENCE[method]


class RolloutSpec(Spec):
    """One RL step's rollout: how many completions, how long, where they are generated."""

    method: str = Field("grpo", pattern="^(grpo|dpo|ppo)$")
    generations: int = Field(TRL_GENERATIONS, ge=1, le=1024, description="completions per prompt")
    completion_len: int = Field(
        TRL_COMPLETION, ge=1, le=1 << 20, description="tokens generated per completion (at most)"
    )
    mean_completion: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="the completions' mean length in tokens, where it is known (a run's logs); None: every "
        "completion runs to completion_len",
    )
    engine_share: float = Field(
        TRL_VLLM_SHARE,
        ge=0.0,
        le=1.0,
        description="share of each GPU's memory the colocated inference engine (vLLM) reserves for its "
        "weights and KV cache; 0: generation shares the training weights (Unsloth's fast_inference)",
    )
    in_process: bool = Field(
        TRL_IN_PROCESS,
        description="the engine runs in the trainer's process (vLLM's VLLM_ENABLE_V1_MULTIPROCESSING=0): its "
        "output processing a sequence a step runs in series with the GPU, not in a process of its own",
    )
    logprobs: bool = Field(
        TRL_LOGPROBS,
        description="the engine returns each sampled token's log-probability (vLLM's SamplingParams logprobs=0)",
    )
    reference: bool | None = Field(
        None,
        description="a frozen reference model for the KL penalty (beta > 0); None: the trainer's default "
        "(TrainerSpec.kl_reference), else the method's (DEFAULT_REFERENCE)",
    )


__all__ = [
    "DEFAULT_REFERENCE",
    "PPO_SAMPLES",
    "RL_METHODS",
    "TRL_COMPLETION",
    "TRL_GENERATIONS",
    "TRL_IN_PROCESS",
    "TRL_LOGPROBS",
    "TRL_VLLM_SHARE",
    "RolloutSpec",
    "default_reference",
]
