"""The rollout of an RL post-training step (TrainingPlan.rl, trilemma.specs.rl): its memory per GPU beside
the training states, and its time beside the training step.

Memory per GPU:
- reference: a frozen 16-bit copy of the policy for the KL penalty, sharded like the weights under ZeRO-3
  (TRL prepares it with the policy's DeepSpeed config); none for a LoRA policy, whose reference is its base
  with the adapters disabled (trl/trainer/grpo_trainer.py@2026-07-24: ``with use_adapter(model,
  adapter_name="ref" if "ref" in model.peft_config else None)``).
- reward model (PPO): a frozen 16-bit copy of the base with a score head (head_shares), sharded like the
  reference, for a LoRA policy too (a model of its own);
- critic (PPO): the value model trains like the policy, so its weights, gradients and optimizer states are the
  policy's scaled by its size share (head_shares); its activations are not added: colocated, the two train
  in turn (openrlhf/trainer/ppo_trainer.py@3c3be623 ppo_train: the critic fits, then the actor), one peak;
- generation: the colocated engine's 16-bit weights (vLLM's tensor-parallel size 1 by default: a whole copy
  per GPU) and the KV cache of the completions this GPU generates (trilemma.estimate.deploy.kv_cache_bytes),
  within a pool of ``engine_share`` × the GPU's memory that vLLM reserves whatever it needs
  (gpu_memory_utilization); with ``engine_share`` 0 the engine shares the training weights.

Time per optimizer step, on each GPU for its share of the completions (batch sequences / GPUs):
- prefill: 2 FLOPs per weight per prompt token at a GPU runtime's prefill share of the 16-bit peak;
- decode: at the rollout engine's share of the memory bandwidth (Pope et al. 2022, arXiv 2211.05102 §2:
  decoding is bandwidth-bound) with its fixed cost a step (trilemma.estimate.deploy.decode_tokens_per_s),
  both vLLM's (VLLM_BANDWIDTH_SHARE, VLLM_STEP_S: its published latency test on three GPUs), the weights read
  once a decode step and each generated token's KV cache read at its context. The GEMMs stay bandwidth-bound:
  the training GEMM law (trilemma.estimate.roofline.gemm_s) is not used at decode's rows, as it gives more time
  for the GEMMs alone at 8 rows than vLLM's whole measured step (tests/test_rl.py); at 256 rows an 8B model's
  2 FLOPs a weight a row at the H100's best measured matmul (794.5 TFLOP/s) take less time than reading it.
  vLLM's CPU work a sequence a step (engine_cpu_seconds) runs in series with the GPU: the engine core's
  always, the output processor's where the engine runs in the trainer's process (RolloutSpec.in_process:
  TRL's colocated vLLM, NeMo-RL's), each dearer with log-probabilities asked for (RolloutSpec.logprobs).
  The steps run until the longest completion ends: ``completion_len``, the cap, as in a batch of thousands
  the longest reaches it whatever the mean (AReaL, Fu et al. 2025, arXiv 2505.24298 abstract: a synchronous
  system's generation waits for the longest output in the batch). Where the completions' mean length is known
  (``mean_completion``) the tokens are the batch's at that mean and the KV reads its lengths' mean square
  (completion_square_mean: the maximum-entropy lengths under the mean and the cap), the prompt then ``seq``
  less the mean (``seq``: the tokens trained a sequence); else every completion runs to the cap and the prompt
  is ``seq`` less the cap;
- the policy's log-prob forward (GRPO, PPO): the old log-probs of the importance ratio, recomputed by the
  training engine over the step's tokens before the update, a third of a training step's compute (Kaplan et
  al. 2020 §2.1: the backward is about twice the forward) — TRL's GRPOTrainer with vLLM every step
  (trl/trainer/grpo_trainer.py@2026-07-24: "When using vLLM, we always compute old_per_token_logps for
  importance sampling"; grpo_config.py: vllm_importance_sampling_correction default True), verl's
  compute_log_prob (its timing_s/old_log_prob), OpenRLHF's experience maker;
- reference forward: with a reference, its forward over the step's tokens, a third of a training step;
- PPO (beside_seconds): the reward model's and the critic's forwards and the critic's training step, each the
  policy's scaled by the score-head model's compute share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from trilemma.estimate.deploy import decode_tokens_per_s, kv_cache_bytes, runtime_constants
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.params import ParamCounts
from trilemma.presets import deploy_efficiency, get_runtime
from trilemma.specs import ModelSpec, TrainingPlan
from trilemma.specs.enums import FinetuneMethod

#: the runtime whose prefill share times the rollout's prompts on a datacentre GPU (presets/runtimes.toml: the
#: pooled GPU fit's prefill share, llama.cpp's CUDA backend having no prefill rows of its own)
GPU_RUNTIME = "llamacpp-cuda"

#: vLLM's decode in a rollout: its share of the HBM bandwidth and its fixed cost a step (scheduling, input
#: preparation, sampling, detokenisation), the least-squares line through vLLM's nightly latency test
#: latency_llama8B_tp1 (benchmark_latency.py: offline LLM.generate, as a rollout; Llama 3.1 8B bf16, batch 8,
#: 32 prompt and 128 output tokens): 1,579.27 ms on A100-SXM4-80GB, 997.542 ms on 8xH100, 833.421 ms on H200
#: (buildkite.com/vllm/performance-benchmark/builds/9523, 9555 and 9515), each 128 steps reading the 2N bytes of
#: weights and 8 sequences' KV cache at their mean context (32 + 64 tokens); tests/test_rl.py refits them
VLLM_BANDWIDTH_SHARE = 0.7649
VLLM_STEP_S = 1.857e-3
#: the sequences of that latency test, whose engine-core work a step VLLM_STEP_S already holds
VLLM_LATENCY_SEQS = 8
#: vLLM's CPU work a sequence a decode step, seconds, (without, with the sampled token's log-probability): the
#: engine core's (Scheduler.schedule and update_from_output: KV slots, prefix-cache hashes, stop checks, the
#: step's outputs), in series with the GPU in every mode, and the output processor's (detokenisation,
#: log-probabilities), in series only when the engine runs in the trainer's process. Measured with vLLM 0.9.0's
#: own Scheduler and OutputProcessor, the GPU replaced by a sampling loop, on this project's 2-core AMD EPYC
#: machine: medians of 7 rollouts of 256 sequences (benchmarks/vllm_host.py --seeds 7). The model runner's own
#: work a sequence (input preparation, the sampled tokens' tolist) needs a GPU and is not in them.
VLLM_CORE_SEQ_S = (8.2e-6, 15.5e-6)
VLLM_OUTPUT_SEQ_S = (5.1e-6, 9.4e-6)

#: bytes per weight of the engine's and the reference's 16-bit copies
HALF = 2.0


@dataclass(frozen=True)
class RolloutMemory:
    """Bytes per GPU of an RL step beyond the training states (module docstring)."""

    reference: Any
    generation: Any  # the engine's pool (weights + KV cache, at least engine_share of the GPU)
    engine_weights: Any
    kv_cache: Any
    reward: Any = 0.0  # PPO's frozen reward model
    critic: Any = 0.0  # PPO's value model: weights, gradients and optimizer states


def head_shares(m: ModelSpec, pc: ParamCounts) -> tuple[float, float]:
    """PPO's critic and reward model against the policy: (parameters, matmul weights a token meets), each a
    share of the policy's. Both are the base model with a d_model × 1 score head in place of the LM head
    (openrlhf/models/model.py@3c3be623: nn.Linear(config.hidden_size, 1)): an untied head's V·d parameters
    go, and the head's V·d matmul weights (tied or not), for d."""
    V, d = m.vocab_size, m.d_model
    untied = 0 if m.tied_embeddings else V * d
    return (pc.total - untied + d) / pc.total, (pc.matmul_active - V * d + d) / pc.matmul_active


def _sequences_per_gpu(L: LayoutArrays, batch_seqs: Any) -> Any:
    return np.asarray(batch_seqs, dtype=float) / L.dims.n_gpus


def _full_policy(plan: TrainingPlan) -> bool:
    return plan.finetune is None or plan.finetune.method in (
        FinetuneMethod.FULL,
        FinetuneMethod.FREEZE,
    )


def frozen_weight_bytes(params: float, L: LayoutArrays) -> Any:
    """Bytes per GPU of a frozen model's 16-bit weights (an RL reference, a distillation teacher): split over
    the tensor and pipeline ranks and, under ZeRO-3, the data-parallel ranks too."""
    shards = np.where(L.zero >= 3, L.dims.shard_ranks, 1)
    return HALF * params / L.dims.weight_shards / shards


def rollout_memory(
    m: ModelSpec, pc: ParamCounts, plan: TrainingPlan, L: LayoutArrays, seq: float, batch_seqs: Any,
    hbm_bytes: float, policy_states: Any = 0.0,
) -> RolloutMemory:  # fmt: skip
    """The reference's, the generation engine's and PPO's reward model's and critic's bytes per GPU (module
    docstring), ``policy_states`` the policy's weights, gradients and optimizer states per GPU; zeros without
    an RL plan."""
    rl = plan.rl
    zero = np.zeros(np.shape(L.dp), dtype=float)
    if rl is None:
        return RolloutMemory(zero, zero, zero, zero)
    ref = (
        np.where(rl.reference and _full_policy(plan), frozen_weight_bytes(pc.total, L), 0.0) + zero
    )
    kv_dim = m.d_kv
    if rl.method == "dpo":  # nothing is generated
        return RolloutMemory(reference=ref, generation=zero, engine_weights=zero, kv_cache=zero)
    kv = _sequences_per_gpu(L, batch_seqs) * kv_cache_bytes(m.n_layers, kv_dim, seq) + zero
    weights = (HALF * pc.total if rl.engine_share > 0 else 0.0) + zero
    gen = np.maximum(rl.engine_share * hbm_bytes, weights + kv)
    size = head_shares(m, pc)[0] if rl.method == "ppo" else 0.0
    return RolloutMemory(
        reference=ref, generation=gen, engine_weights=weights, kv_cache=kv,
        reward=frozen_weight_bytes(size * pc.total, L) + zero, critic=size * np.asarray(policy_states) + zero,
    )  # fmt: skip


def rollout_seconds(
    m: ModelSpec, pc: ParamCounts, plan: TrainingPlan, L: LayoutArrays, seq: float, batch_seqs: Any,
    peak_half_flop_per_s: float, hbm_bw: float,
) -> Any:  # fmt: skip
    """Seconds of one optimizer step's generation (prefill + decode) on each GPU; 0 without an RL plan."""
    rl = plan.rl
    if rl is None or rl.method == "dpo":
        return np.zeros(np.shape(L.dp), dtype=float)
    eff = runtime_constants(get_runtime(GPU_RUNTIME), deploy_efficiency())
    cap, mean = completion_lengths(plan, seq)
    prompt = seq - mean
    seqs = _sequences_per_gpu(L, batch_seqs)
    n = float(pc.total)
    prefill = 2.0 * n * seqs * prompt / (peak_half_flop_per_s * eff["prefill_share"])
    kv_token = kv_cache_bytes(m.n_layers, m.d_kv, 1.0)
    # the weights once a step until the longest completion ends; each token's KV cache read at its context:
    # a completion of L tokens reads L·prompt + L²/2 tokens' caches, so the batch's mean square length counts
    read = cap * HALF * n + seqs * kv_token * (
        prompt * mean + completion_square_mean(mean, cap) / 2.0
    )
    return (
        prefill
        + cap / decode_tokens_per_s(hbm_bw, VLLM_BANDWIDTH_SHARE, read / cap, VLLM_STEP_S)
        + engine_cpu_seconds(rl.in_process, rl.logprobs, seqs * mean, cap)
    )


def engine_cpu_seconds(in_process: bool, logprobs: bool, sequence_steps: Any, steps: float) -> Any:
    """Seconds of vLLM's CPU work in series with the GPU beyond what VLLM_STEP_S holds: each of
    ``sequence_steps`` (a sequence decoding one step) at the engine core's cost, and the output processor's
    when ``in_process``, less the latency test's VLLM_LATENCY_SEQS sequences' engine-core work in each of
    ``steps`` (no log-probabilities there)."""
    per = VLLM_CORE_SEQ_S[logprobs] + in_process * VLLM_OUTPUT_SEQ_S[logprobs]
    return sequence_steps * per - steps * VLLM_LATENCY_SEQS * VLLM_CORE_SEQ_S[False]


def completion_square_mean(mean: float, cap: float) -> float:
    """E[L²], tokens², of completions whose mean is ``mean`` and whose longest run to ``cap``, their spread
    unpublished: the maximum-entropy lengths on [0, cap] with that mean (Jaynes 1957, "Information theory and
    statistical mechanics", Phys. Rev. 106(4): under a mean alone, an exponential), truncated at the cap —
    uniform at cap/2, mirrored above it; cap² where the mean is the cap (every completion at the cap)."""
    if mean >= cap:
        return float(cap) ** 2
    if mean > cap / 2.0:  # L = cap - M, M the same law with mean cap - mean
        m2 = completion_square_mean(cap - mean, cap)
        return float(cap**2 - 2.0 * cap * (cap - mean) + m2)
    r = mean / cap
    if (
        r > 0.5 - 1e-3
    ):  # near the uniform: E[L²]/cap² = r - 1/6 to first order in the rate (1/3 at r = 1/2)
        return cap**2 * (r - 1.0 / 6.0)

    def inv(b: float) -> float:  # 1/(e^b - 1), without overflow
        return float(np.exp(-b) / -np.expm1(-b))

    # X = (cap / a)·T, T exponential of unit rate truncated to [0, a]: E[T] = 1 - a/(e^a - 1), so
    # E[X] = cap·E[T]/a = mean fixes a; E[T²] = 2 - (a² + 2a)/(e^a - 1)
    a = brentq(lambda b: 1.0 / b - inv(b) - r, 1e-3, 10.0 / r + 10.0, xtol=1e-14)
    return float((cap / a) ** 2 * (2.0 - (a * a + 2.0 * a) * inv(a)))


def completion_lengths(plan: TrainingPlan, seq: float) -> tuple[float, float]:
    """(decode steps, mean completion) in tokens of an RL plan's rollout at ``seq`` trained tokens a sequence
    (module docstring): the cap and the mean where it is given, else the cap twice, each below ``seq``."""
    rl = plan.rl
    cap = float(rl.completion_len) if rl is not None else 0.0
    mean = float(rl.mean_completion) if rl is not None and rl.mean_completion else cap
    return cap if rl is not None and rl.mean_completion else min(cap, seq - 1), min(
        mean, cap, seq - 1
    )


def reference_seconds(plan: TrainingPlan, step_s: Any) -> Any:
    """The reference's forward over a step's tokens: a third of the training step (module docstring)."""
    if plan.rl is None or not plan.rl.reference:
        return 0.0 * np.asarray(step_s)
    return np.asarray(step_s) / 3.0


def logprob_seconds(plan: TrainingPlan, step_s: Any) -> Any:
    """The policy's log-prob forward over a step's tokens, a third of the training step (module docstring);
    0 without a rollout (no RL plan, or DPO: its policy log-probs come from the training forward)."""
    if plan.rl is None or plan.rl.method == "dpo":
        return 0.0 * np.asarray(step_s)
    return np.asarray(step_s) / 3.0


def ppo_seconds(m: ModelSpec, pc: ParamCounts, plan: TrainingPlan, step_s: Any) -> tuple[Any, Any]:
    """PPO's seconds beside the policy's training step and its and the reference's forwards (module
    docstring): (the forwards of the reward model and the critic; the critic's training step); zeros for
    another method."""
    step = np.asarray(step_s, dtype=float)
    if plan.rl is None or plan.rl.method != "ppo":
        return 0.0 * step, 0.0 * step
    c = head_shares(m, pc)[1]
    return 2.0 * c * step / 3.0, c * step


def beside_seconds(m: ModelSpec, pc: ParamCounts, plan: TrainingPlan, step_s: Any) -> Any:
    """An RL step's seconds beside generation and the policy's training step: the policy's log-prob forward,
    the reference's forward and, for PPO, ppo_seconds."""
    forwards, critic = ppo_seconds(m, pc, plan, step_s)
    return logprob_seconds(plan, step_s) + reference_seconds(plan, step_s) + forwards + critic


def rl_note(est: Any) -> str:
    """One line of an RL estimate: memory per GPU for the policy (weights and gradients), the reference, the
    generation engine and the optimizer; seconds per step for generation, the log-prob forwards (the
    policy's, the reference's) and the training step, and generation's share."""
    from trilemma.units import fmt_bytes, fmt_duration

    rl, mem, st = est.plan.rl, est.memory, est.stages[0]
    L = LayoutArrays.from_layouts([est.layout])
    hw = est.cluster.hardware
    gen = float(
        rollout_seconds(
            est.model, est.params, est.plan, L, st.seq_len, st.global_batch_sequences,
            hw.peak(est.plan.precision), hw.hbm_bw_bytes_per_s,
        )[0]
    )  # fmt: skip
    cap, mean = completion_lengths(est.plan, st.seq_len)
    seqs = float(_sequences_per_gpu(L, st.global_batch_sequences)[0])
    cpu = float(engine_cpu_seconds(rl.in_process, rl.logprobs, seqs * mean, 0.0))  # all of it
    train = est.time.step_s
    ref = float(reference_seconds(est.plan, train))
    logp = float(logprob_seconds(est.plan, train))
    if rl.method == "ppo":
        return _ppo_note(est, gen, ref + logp)
    if rl.method == "dpo":
        return (
            f"dpo: chosen and rejected completions, no generation; memory per GPU: policy "
            f"{fmt_bytes(mem.weights + mem.gradients)} (weights and gradients), reference "
            f"{fmt_bytes(mem.reference)}, optimizer {fmt_bytes(mem.optimizer)}; per step: reference forward "
            f"{fmt_duration(ref)}, training {fmt_duration(train)}"
        )
    return (
        f"{rl.method}: {rl.generations} completions per prompt, up to {rl.completion_len} tokens each; "
        f"memory per GPU: policy {fmt_bytes(mem.weights + mem.gradients)} (weights and gradients), "
        f"reference {_reference_text(rl, mem.reference)}, generation {fmt_bytes(mem.generation)} (engine weights + KV "
        f"cache, at least {rl.engine_share:.0%} of the GPU), optimizer {fmt_bytes(mem.optimizer)}; per step: "
        f"generation {fmt_duration(gen)} (vLLM's CPU work in series {fmt_duration(cpu)}, its engine "
        f"{'in the trainer' if rl.in_process else 'apart'}), log-prob forwards {fmt_duration(ref + logp)} (policy"
        f"{', reference' if ref > 0 else ''}), training {fmt_duration(train)} (generation "
        f"{gen / (gen + ref + logp + train):.0%} of the step)"
    )


def _reference_text(rl: Any, nbytes: float) -> str:
    """The reference's memory in an RL note, or that none is held and how to hold one."""
    from trilemma.units import fmt_bytes

    return fmt_bytes(nbytes) if rl.reference else "none (no KL term; --kl-reference holds one)"


def _ppo_note(est: Any, gen: float, ref: float) -> str:
    """rl_note's line for PPO: the four models' memory per GPU and the step's parts (``ref``: the reference's and
    the policy's log-prob forwards)."""
    from trilemma.units import fmt_bytes, fmt_duration

    rl, mem, train = est.plan.rl, est.memory, est.time.step_s
    forwards, critic = (float(x) for x in ppo_seconds(est.model, est.params, est.plan, train))
    total = gen + ref + forwards + train + critic
    return (
        f"ppo: {rl.generations} completion per prompt, up to {rl.completion_len} tokens; memory per GPU: "
        f"policy {fmt_bytes(mem.weights + mem.gradients)} (weights and gradients), optimizer "
        f"{fmt_bytes(mem.optimizer)}, critic {fmt_bytes(mem.critic)} (weights, gradients and optimizer), "
        f"reference {fmt_bytes(mem.reference)}, reward model {fmt_bytes(mem.reward)}, generation "
        f"{fmt_bytes(mem.generation)} (engine weights + KV cache, at least {rl.engine_share:.0%} of the GPU); "
        f"per step: generation {fmt_duration(gen)}, forwards {fmt_duration(ref + forwards)} (reference, "
        f"log-probs, reward, values), training {fmt_duration(train + critic)} (policy "
        f"{fmt_duration(train)}, critic {fmt_duration(critic)}) (generation {gen / total:.0%} of the step)"
    )


__all__ = [
    "GPU_RUNTIME",
    "VLLM_BANDWIDTH_SHARE",
    "VLLM_STEP_S",
    "VLLM_CORE_SEQ_S",
    "VLLM_OUTPUT_SEQ_S",
    "RolloutMemory",
    "beside_seconds",
    "VLLM_LATENCY_SEQS",
    "completion_lengths",
    "completion_square_mean",
    "engine_cpu_seconds",
    "frozen_weight_bytes",
    "head_shares",
    "logprob_seconds",
    "ppo_seconds",
    "reference_seconds",
    "rl_note",
    "rollout_memory",
    "rollout_seconds",
]
