"""RL post-training (--finetune grpo|ppo) against a whole published run (data/rl_steps.csv) and by hand."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from trilemma.api import estimate
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.rl import logprob_seconds, reference_seconds, rollout_seconds
from trilemma.resolve import finetune_fields, make_plan, resolve_model
from trilemma.specs.rl import RolloutSpec

DATA = Path(__file__).resolve().parents[1] / "src" / "trilemma" / "data" / "rl_steps.csv"

#: the prompt ahead of each completion: not published for the Miles run (dapo-math-17k's prompts are one
#: math problem and a one-line instruction); an assumption, and the generation time barely moves with it
PROMPT = 512


def _rows() -> list[dict[str, str]]:
    with open(DATA, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _row(framework: str) -> dict[str, str]:
    return next(r for r in _rows() if r["framework"] == framework)


def _verl_logprob_share(gpus: int) -> tuple[float, float]:
    """(published, planner) seconds of the policy's log-prob forward per second of training, for verl's
    colocated-sync Qwen2.5-Math-7B GRPO (DAPO) row on ``gpus`` H20s. The planner's, from its GRPO plan for
    Qwen2.5-7B (the same shape) without a reference (DAPO has no KL term): logprob_seconds / step."""
    row = next(r for r in _rows() if r["framework"] == "verl" and int(r["gpus"]) == gpus)
    published = float(row["reported_logprob_s"]) / float(row["reported_training_s"])
    m, _ = resolve_model(row["model"])
    fields = finetune_fields(m, row["method"])
    fields["rl"] = RolloutSpec(generations=int(row["generations"]), reference=False)
    plan = make_plan(m, 1e9, 2048, 2048 * 64, **fields)
    t = 100.0  # any training step: the share is per second of it
    return published, float(logprob_seconds(plan, t) + reference_seconds(plan, t)) / t


@pytest.mark.parametrize("gpus", [16, 32])
def test_grpo_logprob_pass_against_verls_7b_colocated_runs(gpus: int) -> None:
    """verl's colocated-sync GRPO (DAPO) on Qwen2.5-Math-7B (docs/advance/one_step_off.md@648e3c95, 16 H20s:
    old_log_prob 88 s and 119 s against update_actor 286 s and 344 s, FSDP2 and Megatron; fully_async.md
    @b25bb7d4, 32 H20s: 107.71 s against 269.80 s): the policy's log-prob forward over the step's tokens, a
    third of the training step in the planner (the backward twice the forward), within 20% of the published
    share — which needs no token count, unpublished for these runs. Holds: 0.308 and 0.346 at 16 GPUs (the
    planner 0.333: 8% over, 4% under), 0.399 at 32 (16% under)."""
    rows = [r for r in _rows() if r["framework"] == "verl" and int(r["gpus"]) == gpus]
    assert rows
    planner = _verl_logprob_share(gpus)[1]
    for row in rows:
        published = float(row["reported_logprob_s"]) / float(row["reported_training_s"])
        assert abs(planner / published - 1) <= 0.20, (row["training_layout"], published, planner)


@pytest.mark.xfail(
    strict=True,
    reason="at 64 and 128 H20s verl's log-prob forward takes 0.527 and 0.474 of the training time (70.26 / 133.41, "
    "53.92 / 113.81 s: fully_async.md@b25bb7d4), the planner a third: 37% and 30% under. With less work per GPU "
    "the forward keeps a cost the training step amortises, not identified (candidates: FSDP's parameter gathers, "
    "repeated in a forward as in training's; dynamic batching's micro-batches)",
)
@pytest.mark.parametrize("gpus", [64, 128])
def test_grpo_logprob_pass_at_64_and_128_gpus(gpus: int) -> None:
    """The same check on verl's 64- and 128-GPU colocated-sync rows."""
    published, planner = _verl_logprob_share(gpus)
    assert abs(planner / published - 1) <= 0.20


@cache
def _miles() -> tuple[dict[str, str], float, float, float]:
    """The Miles GRPO row and the planner's seconds for it: generation, the extra forward, training."""
    row = _row("miles")
    m, _ = resolve_model(row["model"])
    cap, batch = int(row["completion_cap"]), int(row["prompts_per_step"]) * int(row["generations"])
    seq = cap + PROMPT
    fields = finetune_fields(m, row["method"])
    # no KL-loss term (the row's notes): no reference; the policy's log-prob forward all the same
    # SGLang's server: its scheduler a process of its own, not the trainer's
    fields["rl"] = RolloutSpec(
        generations=int(row["generations"]), completion_len=cap, reference=False, in_process=False
    )
    plan = make_plan(m, batch * seq * 100, seq, batch * seq, **fields)
    est = estimate(row["model"], row["hardware"], int(row["gpus"]), plan=plan)
    hw = est.cluster.hardware
    gen = rollout_seconds(
        est.model, est.params, plan, LayoutArrays.from_layouts([est.layout]), seq, batch,
        hw.peak(plan.precision), hw.hbm_bw_bytes_per_s,
    )[0]  # fmt: skip
    fwd = logprob_seconds(plan, est.time.step_s) + reference_seconds(plan, est.time.step_s)
    return row, float(gen), float(fwd), est.time.step_s


def test_grpo_generation_within_twenty_percent_of_a_published_run() -> None:
    """Miles on one 8-GPU MI300X node (LMSYS blog 2026-03-17, Figure 5): Qwen3-30B-A3B, GRPO with 32 prompts
    × 8 samples and an 8k response cap, rollout generation 152.79 s of a 388.50 s step. The planner's
    generation (decode-bound at vLLM's share of HBM bandwidth, its fixed cost a step and its engine core's CPU work
    a sequence a step; no SGLang figure of the kind is published): within 20% (holds: 172.9 s, +13%)."""
    row, gen, _, _ = _miles()
    assert abs(gen / float(row["reported_generation_s"]) - 1) <= 0.20


@pytest.mark.xfail(
    strict=True,
    reason="Miles's training takes 95.30 s, 3.0x the planner's 32.1 s: its ~15-16k tokens/s over 8 GPUs is "
    "~3% of the MI300X bf16 peak for a 3.35B-active MoE (6 x 3.35e9 x 15.5e3 / 8 / 1.307e15), an efficiency "
    "the planner's MoE step time does not reach down to; generation's share of generation + log-prob + "
    "training is then 80% against the published 152.79 / 279.62 = 55%; the 33.85 s weight update is not "
    "modelled",
)
def test_grpo_time_split_within_twenty_percent_of_a_published_run() -> None:
    """The same run's split: training 95.30 s and generation's share of generation, log-prob pass (the
    planner's extra forward: no KL term, so no reference, but one forward of the policy all the same) and
    training, 152.79 / (152.79 + 31.53 + 95.30) = 54.6%: each within 20%."""
    row, gen, fwd, train = _miles()
    published = [float(row[k]) for k in ("reported_generation_s", "reported_logprob_s")]
    share = published[0] / (sum(published) + float(row["reported_training_s"]))
    assert abs(gen / (gen + fwd + train) / share - 1) <= 0.20
    assert abs(train / float(row["reported_training_s"]) - 1) <= 0.20


#: NeMo-RL's prompts are not published: Llama 3.1's chat template and the recipe's chain-of-thought instruction
#: (examples/prompts/cot.txt at v0.3.0) around an OpenMathInstruct-2 problem; the checks hold over this range
NEMO_PROMPTS = (64, 256)

#: Llama 3.1 8B by hand (config.json: 32 layers, hidden 4,096, 32/8 heads of 128, MLP 14,336, vocabulary
#: 128,256, untied): 32 × (4,096² × 2 + 4,096 × 1,024 × 2 + 3 × 4,096 × 14,336 + 2 × 4,096) + 4,096 +
#: 2 × 128,256 × 4,096 parameters; the KV cache 2 × 32 layers × 1,024 × 2 bytes a token
LLAMA8B = (
    32 * (4096**2 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096) + 4096 + 2 * 128256 * 4096
)
LLAMA8B_KV = 2 * 32 * 1024 * 2


@cache
def _nemo(prompt: int) -> tuple[dict[str, str], float, float]:
    """NeMo-RL's Megatron GRPO row on 8 H100s (data/rl_steps.csv) and the planner's generation and training
    seconds for it at ``prompt`` tokens a prompt: the completions capped at 4,096 tokens less the prompt
    (vLLM's max_model_len), their mean as published; training Megatron's distributed optimizer over 8
    (ZeRO-1) on the step's tokens, packed into 4,096-token sequences (the recipe's sequence packing)."""
    row = next(
        r for r in _rows() if r["framework"] == "nemo-rl" and "Megatron" in r["training_layout"]
    )
    m, _ = resolve_model(row["model"])
    batch, mean = (
        int(row["prompts_per_step"]) * int(row["generations"]),
        int(row["mean_completion"]),
    )
    cap = int(row["completion_cap"])
    packed = round(batch * (prompt + mean) / cap / 8) * 8 * cap
    plan = make_plan(m, packed * 100, cap, packed, **finetune_fields(m, "full"))
    lay = {"tp": 1, "pp": 1, "dp": 8, "zero": 1, "micro_batch": 1, "recompute": "none"}
    est = estimate(row["model"], row["hardware"], int(row["gpus"]), plan=plan, layout=lay)
    fields = finetune_fields(m, row["method"])
    # vLLM in the worker's process (nemo_rl/models/generation/vllm.py@b1c86a81: VLLM_ENABLE_V1_MULTIPROCESSING
    # "0"), asked for the sampled tokens' log-probabilities (logprobs=0, the same file)
    fields["rl"] = RolloutSpec(
        generations=int(row["generations"]), completion_len=cap - prompt, mean_completion=mean,
        in_process=True, logprobs=True,
    )  # fmt: skip
    seq = prompt + mean
    rl_plan = make_plan(m, batch * seq * 100, seq, batch * seq, **fields)
    hw = est.cluster.hardware
    gen = rollout_seconds(
        est.model, est.params, rl_plan, LayoutArrays.from_layouts([est.layout]), seq, batch,
        hw.peak(rl_plan.precision), hw.hbm_bw_bytes_per_s,
    )[0]  # fmt: skip
    return row, float(gen), est.time.step_s


@pytest.mark.parametrize("prompt", NEMO_PROMPTS)
def test_grpo_training_within_twenty_percent_of_nemo_rls_8b_run(prompt: int) -> None:
    """NeMo-RL V0.3 (nvidia-nemo.github.io blog 2025-07-21, Results table): Llama 3.1 8B Instruct, GRPO with
    64 prompts × 32 samples, 795 tokens a completion on average, Megatron on 8 GPUs: policy training 28 s and
    the policy's and the reference's log-prob forwards 18 s. The planner's training step over the step's
    2,048 × (prompt + 795) tokens, and its two forwards (a third of it each), within 20% of each. Holds:
    training 24.9 s and 30.4 s at 64 and 256 prompt tokens (−11%, +9%), the forwards 16.6 s and 20.2 s (−8%, +12%)."""
    row, _, train = _nemo(prompt)
    assert abs(train / float(row["reported_training_s"]) - 1) <= 0.20
    assert abs(2 * train / 3 / float(row["reported_logprob_s"]) - 1) <= 0.20


@pytest.mark.parametrize("prompt", NEMO_PROMPTS)
def test_grpo_generation_within_twenty_percent_of_nemo_rls_8b_run(prompt: int) -> None:
    """The same run's generation, 58 s (vLLM 0.9.0 colocated, TP 1, on each of the 8 GPUs): within 20%. The
    planner: 46.5 s and 48.4 s at 64 and 256 prompt tokens (-19.8%, -16.6%; at the edge on the short-prompt
    end): 3,840-4,032 decode steps (the longest of 256 completions reaches the 4,096-token cap) reading the
    16.1 GB of weights and each completion's KV cache at its context (mean 795, the maximum-entropy spread under
    that mean and the cap), at vLLM's 76.5% of the H100's bandwidth and its 1.86 ms a step (its latency test),
    and vLLM's CPU work a sequence a step in series with the GPU, 24.9 us with NeMo-RL's settings: its engine in
    the worker's process and the sampled tokens' log-probabilities asked for (benchmarks/vllm_host.py, on this
    project's machine; the model runner's own work a sequence is not in it). Read at b1c86a81 with vLLM 0.9.0
    (its pin), what else a step holds is configured as the planner has it: CUDA graphs (enforce_eager False,
    up to 512 sequences), the 256 sequences decoding together (max_num_seqs 1,024 on a 70 GiB+ GPU), TP 1, the
    weight refit timed apart (prepare_for_generation). Not modelled: the math environment's scoring inside
    the timer (no figure), prefix caching sharing a prompt's prefill across its 32 samples (0.5-2.0 s less)."""
    row, gen, _ = _nemo(prompt)
    assert abs(gen / float(row["reported_generation_s"]) - 1) <= 0.20


@cache
def _max_entropy_square_mean(mean: float, cap: float) -> float:
    """E[L²] of the density ∝ exp(-λL) on [0, cap] whose mean is ``mean`` (below cap / 2), by quadrature on a
    grid and bisection on λ: the maximum-entropy lengths under a mean and a cap (Jaynes 1957)."""
    x = np.linspace(0.0, cap, 40_001)
    lo, hi = 1e-9, 1.0
    for _ in range(60):
        lam = (lo + hi) / 2
        w = np.exp(-lam * x)
        lo, hi = (lo, lam) if np.trapezoid(x * w, x) / np.trapezoid(w, x) < mean else (lam, hi)
    w = np.exp(-lam * x)
    return float(np.trapezoid(x * x * w, x) / np.trapezoid(w, x))


def test_completion_spread_by_hand() -> None:
    """The completions' mean square length where only their mean and cap are known: the maximum-entropy
    lengths by quadrature (an exponential's 2 × mean² far below the cap), the uniform's cap² / 3 at half the
    cap, mirrored above it, and cap² with every completion at the cap."""
    from trilemma.estimate.rl import completion_square_mean

    assert completion_square_mean(795, 3946) == pytest.approx(
        _max_entropy_square_mean(795, 3946), 1e-5
    )
    assert completion_square_mean(10, 1e6) == pytest.approx(2 * 10**2, rel=1e-6)
    assert completion_square_mean(2048, 4096) == pytest.approx(4096**2 / 3, rel=1e-6)
    # L = cap - M, M with mean 795: E[L²] = cap² - 2·cap·795 + E[M²]
    mirrored = 3946**2 - 2 * 3946 * 795 + _max_entropy_square_mean(795, 3946)
    assert completion_square_mean(3946 - 795, 3946) == pytest.approx(mirrored, rel=1e-5)
    assert completion_square_mean(3946, 3946) == 3946**2


def test_rollout_decode_runs_to_the_cap_with_the_tokens_at_the_mean() -> None:
    """By hand, NeMo-RL's row at 150 prompt tokens: 256 completions a GPU, cap 3,946, mean 795; the prefill
    2 × N × 256 × 150 at the GPU runtime's prefill share of the bf16 peak, the decode 3,946 reads of the 2N
    bytes of weights and each completion's KV cache at its context, 256 × (150 × 795 + E[L²] / 2) tokens'
    caches with E[L²] the maximum-entropy lengths' under that mean and cap (by quadrature), at vLLM's
    bandwidth share, with vLLM's fixed cost a step at each of the 3,946, and vLLM's CPU work a sequence a step
    (benchmarks/vllm_host.py). Without a mean every completion runs to the cap: the cap's KV reads."""
    from trilemma.estimate.deploy import runtime_constants
    from trilemma.estimate.rl import GPU_RUNTIME, VLLM_BANDWIDTH_SHARE, VLLM_STEP_S
    from trilemma.presets import deploy_efficiency, get_runtime

    m, _ = resolve_model("llama3.1-8b")
    est = _ppo_like_estimate()
    eff = runtime_constants(get_runtime(GPU_RUNTIME), deploy_efficiency())
    peak, bw = (
        989.5e12,
        3.35e12,
    )  # any peak and bandwidth: the H100 SXM datasheet's bf16 dense and HBM3
    seqs, prompt, cap, mean = 256, 150, 3946, 795
    L = LayoutArrays.from_layouts([est.layout])
    for mc, reads, in_process in (
        (mean, seqs * (prompt * mean + _max_entropy_square_mean(mean, cap) / 2), True),
        (None, seqs * cap * (prompt + cap / 2), True),
        (mean, seqs * (prompt * mean + _max_entropy_square_mean(mean, cap) / 2), False),
    ):
        seq = prompt + (mc or cap)
        fields = finetune_fields(m, "grpo")
        fields["rl"] = RolloutSpec(
            generations=32, completion_len=cap, mean_completion=mc, in_process=in_process
        )
        plan = make_plan(m, 2048 * seq * 100, seq, 2048 * seq, **fields)
        got = float(rollout_seconds(m, est.params, plan, L, seq, 2048, peak, bw)[0])
        prefill = 2 * LLAMA8B * seqs * prompt / (peak * eff["prefill_share"])
        decode = (cap * 2 * LLAMA8B + reads * LLAMA8B_KV) / (
            VLLM_BANDWIDTH_SHARE * bw
        ) + cap * VLLM_STEP_S
        # vLLM's CPU work: every sequence's every step (log-probabilities asked for, TRL's default) at the
        # engine core's 15.5 us, and in process the output processor's 9.4 us; less the 8 sequences' 8.2 us a
        # step (no log-probabilities) the latency test's 1.857 ms already holds
        cpu = seqs * (mc or cap) * (15.5e-6 + in_process * 9.4e-6) - cap * 8 * 8.2e-6
        assert got == pytest.approx(prefill + decode + cpu, rel=1e-9)


#: vLLM's nightly latency test latency_llama8B_tp1 (benchmark_latency.py: Llama 3.1 8B bf16, batch 8, 32 prompt
#: and 128 output tokens), mean end-to-end ms, and the GPU's HBM bandwidth (bytes/s, its datasheet):
#: buildkite.com/vllm/performance-benchmark/builds/9523 (A100-SXM4-80GB), 9555 (8xH100), 9515 (H200)
VLLM_LATENCY = {
    "a100-80gb": (1579.27, 2.039e12),
    "h100-sxm": (997.542, 3.35e12),
    "h200": (833.421, 4.8e12),
}


def test_vllm_decode_constants_refit_from_its_latency_test() -> None:
    """VLLM_BANDWIDTH_SHARE and VLLM_STEP_S by hand: each run is 128 steps reading 2 × LLAMA8B bytes of weights
    and 8 sequences' KV cache at their mean context 32 + 64 tokens; the least-squares line of ms a step against
    bytes / bandwidth gives 1 / share as its slope and the fixed cost a step as its intercept. The line passes
    within 6% of each of the three GPUs' steps."""
    import numpy as np

    from trilemma.estimate.rl import VLLM_BANDWIDTH_SHARE, VLLM_STEP_S

    step_bytes = 2 * LLAMA8B + 8 * LLAMA8B_KV * (32 + 128 / 2)
    x = np.array([[step_bytes / bw, 1.0] for _, bw in VLLM_LATENCY.values()])
    y = np.array([ms / 1e3 / 128 for ms, _ in VLLM_LATENCY.values()])
    (slope, fixed), *_ = np.linalg.lstsq(x, y, rcond=None)
    assert 1 / slope == pytest.approx(VLLM_BANDWIDTH_SHARE, abs=1e-4)
    assert fixed == pytest.approx(VLLM_STEP_S, abs=1e-6)
    assert np.all(np.abs(x @ [slope, fixed] / y - 1) < 0.06)


@pytest.mark.parametrize("gpu", sorted(VLLM_LATENCY))
def test_training_gemm_law_cannot_time_decode(gpu: str) -> None:
    """Why decode's GEMMs are timed by their weight reads, not by the training GEMM law (roofline.gemm_s, fitted
    on training's GEMMs of thousands of rows): at vLLM's 8 sequences the law's time for Llama 3.1 8B's GEMMs
    alone (32 layers of QKV 6,144 × 4,096, output 4,096², gate and up 14,336 × 4,096, down 4,096 × 14,336, and
    the 128,256 × 4,096 head) exceeds vLLM's whole measured step (VLLM_LATENCY: ms / 128) on each GPU, by
    2.1x, 1.3x and 1.6x on A100, H100 and H200."""
    from trilemma.estimate.roofline import device_constants, gemm_s
    from trilemma.presets import constants, get_hardware
    from trilemma.specs import Precision

    hw = get_hardware(gpu)
    c = device_constants(constants(), hw, Precision.BF16)

    def g(n: int, k: int) -> float:
        return float(gemm_s(8.0, n, k, hw.peak(Precision.BF16), hw.hbm_bw_bytes_per_s, 2.0, c))

    layer = g(6144, 4096) + g(4096, 4096) + 2 * g(14336, 4096) + g(4096, 14336)
    law = 32 * layer + g(128256, 4096)
    assert law > VLLM_LATENCY[gpu][0] / 1e3 / 128


@cache
def _ppo_like_estimate():
    """Llama 3.1 8B on 8 H100s, data parallel: the layout and parameter counts the by-hand rollout uses."""
    lay = {"tp": 1, "pp": 1, "dp": 8, "zero": 3, "micro_batch": 1, "recompute": "full"}
    return estimate("llama3.1-8b", "h100-sxm", 8, tokens="20M", seq_len=1024, layout=lay)


#: Qwen2.5-7B by hand (config.json: hidden 3,584, 28 layers, 28/4 heads of 128, MLP 18,944, vocabulary
#: 152,064, untied head): 7,615,616,512 parameters; matmul weights a token meets: 28 × (attention 3,584² × 2 +
#: 3,584 × 512 × 2 = 29,360,128 + MLP 3 × 3,584 × 18,944 = 203,685,888) + the LM head 152,064 × 3,584
QWEN7B = 7_615_616_512
QWEN7B_MATMUL = 28 * (29_360_128 + 203_685_888) + 152_064 * 3584
QWEN7B_HEAD = 152_064 * 3584


@cache
def _ppo():
    lay = {"tp": 1, "pp": 1, "dp": 8, "zero": 3, "micro_batch": 4, "recompute": "full"}
    return estimate(
        "qwen2.5-7b", "h100-sxm", 8, tokens="20M", seq_len=1024, finetune="ppo", layout=lay
    )


def test_ppo_holds_four_models_by_hand() -> None:
    """--finetune ppo (OpenRLHF's layout: policy and critic trained, reference and reward model frozen; the
    critic and reward model the base with a 3,584 × 1 score head in place of the LM head), ZeRO-3 over 8:
    reference 2 × 7,615,616,512 / 8 bytes; reward model 2 × (7,615,616,512 − 152,064 × 3,584 + 3,584) / 8;
    critic the policy's weights, gradients and optimizer states × the same parameter share."""
    est = _ppo()
    size = (QWEN7B - QWEN7B_HEAD + 3584) / QWEN7B
    assert est.memory.reference == pytest.approx(2 * QWEN7B / 8, rel=1e-9)
    assert est.memory.reward == pytest.approx(2 * (QWEN7B - QWEN7B_HEAD + 3584) / 8, rel=1e-9)
    states = est.memory.weights + est.memory.gradients + est.memory.optimizer
    assert est.memory.critic == pytest.approx(size * states, rel=1e-9)
    line = next(w for w in est.warnings if w.startswith("ppo:"))
    for part in ("policy", "critic", "reference", "reward model", "generation", "training"):
        assert part in line


def test_ppo_time_split_by_hand() -> None:
    """Beside generation and the policy's step t: the reference's and the policy's log-prob forwards (t/3
    each: the backward is twice the forward), the reward model's and the critic's forwards (c·t/3 each) and
    the critic's step c·t, c the score-head model's share of the matmul weights a token meets:
    (QWEN7B_MATMUL − 152,064 × 3,584 + 3,584) / QWEN7B_MATMUL = 0.9229."""
    from trilemma.estimate.rl import beside_seconds

    est = _ppo()
    t = est.time.step_s
    c = (QWEN7B_MATMUL - QWEN7B_HEAD + 3584) / QWEN7B_MATMUL
    assert c == pytest.approx(0.9229, abs=1e-4)
    beside = beside_seconds(est.model, est.params, est.plan, t)
    assert float(beside) == pytest.approx(t / 3 + t / 3 + 2 * c * t / 3 + c * t, rel=1e-9)


@pytest.mark.parametrize(
    ("flags", "field"),
    [(["--lora-rank", "0"], "lora-rank"), (["--trainable-layers", "3"], "trainable-layers")],
)
def test_ppo_refuses_what_grpo_refuses(capsys, flags: list[str], field: str) -> None:
    """The same one-line refusal (exit status 2, naming the flag) for ppo as for grpo."""
    from clitools import run

    errs = []
    for method in ("grpo", "ppo"):
        code, _, err = run(
            capsys, "estimate", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8",
            "--tokens", "20M", "--finetune", method, *flags,
        )  # fmt: skip
        assert code == 2 and err.count("\n") == 1 and field in err
        errs.append(err)
    assert errs[0] == errs[1]


def _refused(capsys, tmp_path, flags: dict[str, str | bool]) -> tuple[str, str, str]:
    """The one-line refusals (exit status 2) of a Llama 3 8B fine-tune on 8 H100s with ``flags`` (a flag's
    name → its text, or True for a switch) from the CLI, a scenario file and the Python API."""
    from clitools import run

    from trilemma.errors import InputError

    argv = [a for k, v in flags.items() for a in ((f"--{k}",) if v is True else (f"--{k}", v))]
    code, _, err = run(
        capsys, "estimate", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tokens", "20M", *argv
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1
    f = tmp_path / "bad.toml"
    lines = [
        f"{k} = {'true' if v is True else repr(v).replace(chr(39), chr(34))}"
        for k, v in flags.items()
    ]
    body = 'model = "llama3-8b"\ntokens = "20M"\ngpu = "h100-sxm"\nmax-gpus = 8\ndeadline = "7d"\n'
    f.write_text(body + "\n".join(lines) + "\n", encoding="utf-8")
    code, _, err2 = run(capsys, "solve", str(f))
    assert code == 2 and err2.count("\n") == 1
    with pytest.raises(InputError) as e:
        estimate(
            "llama3-8b",
            "h100-sxm",
            8,
            tokens="20M",
            **{k.replace("-", "_"): v for k, v in flags.items()},
        )
    return err, err2, str(e.value)


def test_an_unknown_method_lists_the_rl_ones(capsys, tmp_path) -> None:
    """A misspelt method: one line naming grpo, dpo and ppo among the allowed, from the CLI, a scenario file
    and the Python API alike."""
    for err in _refused(capsys, tmp_path, {"finetune": "ppx"}):
        assert "ppx" in err and all(m in err for m in ("grpo", "dpo", "ppo"))


def test_kl_reference_without_an_rl_method_is_one_line_everywhere(capsys, tmp_path) -> None:
    """--kl-reference with a LoRA fine-tune: the same one line naming the flag and the RL methods from the CLI,
    a scenario file, the Python API and the web API (422)."""
    cli, scenario, api = _refused(capsys, tmp_path, {"finetune": "lora", "kl-reference": True})
    assert cli == scenario and api in cli and "kl-reference" in api and "grpo" in api
    testclient = pytest.importorskip("fastapi.testclient")
    from trilemma.web.app import create_app

    body = {"model": "llama3-8b", "gpu": "h100-sxm", "gpus": 8, "tokens": "20M", "finetune": "lora"}
    with testclient.TestClient(create_app(), raise_server_exceptions=False) as c:
        r = c.post("/api/estimate", json=body | {"kl-reference": True})
    assert r.status_code == 422 and r.json()["error"] == api


def test_trainer_presets_set_the_engines_process_and_log_probabilities() -> None:
    """verl's and OpenRLHF's async engines run the output processor in a process of their own and ask for no
    log-probabilities (presets/trainers.toml, their configs' defaults); NeMo-RL's and TRL's colocated vLLM (the
    method's default) run in the trainer's process with logprobs=0; a RolloutSpec that states them keeps its
    own. Under verl the CPU term loses the output processor's and the log-probabilities' share."""
    from trilemma.resolve import with_rl_reference

    m, _ = resolve_model("qwen2.5-7b")
    for trainer, expected in (
        ("verl", (False, False)),
        ("openrlhf", (False, False)),
        ("nemo-rl", (True, True)),
        (None, (True, True)),
    ):
        fields = finetune_fields(m, "grpo") | ({"trainer": trainer} if trainer else {})
        rl = with_rl_reference(fields)["rl"]
        assert (rl.in_process, rl.logprobs) == expected, trainer
    stated = finetune_fields(m, "grpo") | {"trainer": "verl"}
    stated["rl"] = RolloutSpec(in_process=True, logprobs=True)
    rl = with_rl_reference(stated)["rl"]
    assert (rl.in_process, rl.logprobs) == (True, True)
    from trilemma.estimate.rl import engine_cpu_seconds

    # 1,000 sequence-steps over 100 steps: 15.5 + 9.4 us each in process with log-probabilities, 8.2 us each
    # in an engine of its own without; less the latency test's 8 sequences' 8.2 us in each step
    assert engine_cpu_seconds(True, True, 1000, 100) == pytest.approx(1000 * 24.9e-6 - 800 * 8.2e-6)
    assert engine_cpu_seconds(False, False, 1000, 100) == pytest.approx(
        1000 * 8.2e-6 - 800 * 8.2e-6
    )
