"""The fine-tuning trainer as a lever (--trainer; presets/trainers.toml) and the published fine-tune rows it
is checked on (data/finetune_memory.csv)."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from clitools import run

from trilemma.api import estimate
from trilemma.errors import InputError
from trilemma.presets import stack, trainer, trainers
from trilemma.units import GIB
from trilemma.validate.finetune import FinetuneMemoryCase, by_trainer, predict_all, rows


@cache
def _cases() -> tuple[FinetuneMemoryCase, ...]:
    return tuple(predict_all())


def test_every_preset_cites_its_features() -> None:
    for name, t in trainers().items():
        assert t.source and "@" in t.source, name  # a repository file at a date, or a page
    assert trainer("unsloth").activation_offload and trainer("tune").name == "torchtune"


def test_unknown_trainer_is_one_line_exit_2(capsys) -> None:
    code, _, err = run(
        capsys, "estimate", "--model", "llama3-8b", "--gpu", "rtx-4090", "--gpus", "1",
        "--finetune", "lora", "--tokens", "20M", "--trainer", "nemo-x",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "torchtune" in err and "trainer" in err
    with pytest.raises(InputError, match="trainer"):
        estimate("llama3-8b", "rtx-4090", 1, tokens="20M", finetune="lora", trainer="nemo-x")


def test_published_finetune_rows_from_five_trainers_within_ten_percent() -> None:
    """At least 40 published fine-tunes from at least 5 trainers, each predicted without its own source
    (no constant is fitted on these rows): median |predicted / reported − 1| at most 10%."""
    cases = _cases()
    by = by_trainer(list(cases))
    assert len(cases) >= 40 and len(by) >= 5, by
    assert float(np.median([abs(c.error) for c in cases])) <= 0.10


def test_published_finetune_step_times_within_fifteen_percent() -> None:
    """Throughput: at least 40 published fine-tune step times, median |predicted / reported − 1| ≤ 15%
    (Qwen's finetune.py profile; no time constant is fitted on them)."""
    timed = [c for c in _cases() if c.step_error is not None]
    assert len(timed) >= 40  # holds: 42
    assert float(np.median([abs(c.step_error) for c in timed])) <= 0.15


def test_published_runs_that_trained_fit_at_the_point() -> None:
    """No false out-of-memory at the point: every published run that trained has a fit-verdict total
    (tensors + outside the allocator) within its card."""
    assert not [c.case for c in _cases() if c.over_at_point]


def test_every_published_run_that_trained_is_predicted_to_fit() -> None:
    """As estimate decides (docs/memory-verdict.md): no published run that trained is refused — at the favourable
    (lower) end of the memory band its fit total is within its card."""
    assert not [c.case for c in _cases() if c.refused]


def test_published_runs_below_the_cards_edge_fit_with_margin() -> None:
    """Every published run that did not fill its card (a measured peak, not the longest context that fit) fits
    with margin: the memory band's upper end within the card, estimate's "fits". Runs measured at the edge
    (capacity_at_max_context: peak = card) may be tight — an exact prediction of a peak equal to the card has
    its upper end over the card by the band's width — but at the point they fit (the test above it)."""
    edge = {r["case"] for r in rows() if r["metric"] == "capacity_at_max_context"}
    below = [c for c in _cases() if c.case not in edge]
    assert len(below) >= 60 and not [c.case for c in below if c.without_margin]


def test_offloaded_checkpoints_and_fused_loss_match_unsloth_8b_table() -> None:
    """Unsloth's Llama 3.1 8B QLoRA max-context table (README@2025-01-14): 342,733 tokens fit 80 GB and
    2,972 fit 8 GB. With its offloaded checkpointing, Cut Cross-Entropy and Triton RMSNorm (a 16-bit input
    kept, no fp32 copy) the planner's device total at each is under the card (the run fit) and within 12%
    of it: 2% under at 8 GB, 11% at 80 GB — per token of context some 11% is not accounted for."""
    for c in _cases():
        if c.trainer == "unsloth" and c.case.startswith("llama3.1-8b"):
            assert -0.12 <= c.error <= 0.0, (c.case, c.error)


def test_torchtune_activation_offload_llama3_8b_rtx4090() -> None:
    """torchtune README@2024-12 'Memory and training speed': Llama 3.1 8B LoRA on 1x 4090, batch 2, packed
    2048, 16.2 GiB peak per GPU (a kept-independent table: checked here, nothing fitted or tuned to it). The
    planner with --trainer torchtune and activation offloading, LoRA rank 8 on q and v (the 8B config's),
    checkpointing: within 15%; and offloading saves the checkpointed layer inputs beyond the copy stash."""
    kw = dict(
        tokens="20M", seq_len=2048, global_batch_tokens=4096, finetune="lora", lora_rank=8,
        lora_targets="q_proj,v_proj", trainer="torchtune",
        layout={"micro_batch": 2, "recompute": "full", "tp": 1, "pp": 1, "dp": 1},
    )  # fmt: skip
    on = estimate("llama3-8b", "rtx-4090", 1, activation_offload=True, **kw)
    off = estimate("llama3-8b", "rtx-4090", 1, activation_offload=False, **kw)
    peak = float(np.asarray(on.memory.per_gpu_bytes)) / GIB
    assert abs(peak / 16.2 - 1) <= 0.15, peak
    saved = off.memory.per_gpu_bytes - on.memory.per_gpu_bytes
    # 32 - 5 layers' inputs: 2 sequences × 2048 tokens × 4096 × 2 bytes each (hand count)
    assert saved == pytest.approx((32 - 5) * 2 * 2048 * 4096 * 2, rel=0.01)


def test_a_finetune_of_few_steps_says_so_and_suggests_a_batch() -> None:
    """20M tokens at the default fine-tune batch (128 sequences of 2048: 262,144 tokens) is 20e6 / 262,144 =
    76.3 steps (hand count), under 100: the warning suggests 97 sequences (20e6 / (100 × 2048) = 97.7, floored),
    which gives 20e6 / (97 × 2048) = 100.7 steps. 200M tokens gives 763 steps: no warning."""
    est = estimate("llama3-8b", "rtx-4090", 1, tokens="20M", seq_len=2048, finetune="lora")
    few = [w for w in est.warnings if w.startswith("few optimizer steps")]
    assert len(few) == 1 and "76 for" in few[0] and "97 sequences of 2048" in few[0], few
    assert "gives 101" in few[0]
    est = estimate("llama3-8b", "rtx-4090", 1, tokens="200M", seq_len=2048, finetune="lora")
    assert not [w for w in est.warnings if w.startswith("few optimizer steps")]


def test_solve_finetune_auto_compares_methods_on_the_same_pins() -> None:
    """--finetune auto: LoRA, QLoRA and full solved on the same pins; the optimum is the cheapest of the
    three optima (a deadline is pinned: cost is minimised), the two others are runners-up named by method."""
    from trilemma.solve import solve

    r = solve(
        model="llama3-8b", tokens="20M", deadline="4h", budget="$50", finetune={"finetune": "auto"}
    )
    by_method = {why: e for why, e, _ in r.runners_up if why.startswith("method ")}
    chosen = r.optimum.plan.finetune.method.value
    assert set(by_method) == {f"method {m}" for m in ("lora", "qlora", "full") if m != chosen}
    assert all(r.optimum.cost.usd <= e.cost.usd for e in by_method.values())
    assert all(e.time.total_s <= 4 * 3600 and e.cost.usd <= 50 for e in by_method.values())


def test_solve_finetune_list_refuses_an_unknown_method_in_one_line(capsys) -> None:
    code, _, err = run(
        capsys, "solve", "--model", "llama3-8b", "--finetune", "lora,qlorra", "--tokens", "20M",
        "--deadline", "4h",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "qlorra" in err and "auto" in err


def test_grpo_prints_its_memory_and_time_split() -> None:
    """--finetune grpo on a 7B model: the memory per GPU of the policy, the reference, the generation engine
    and the optimizer, and the step's time split into generation and training, in one line; with
    --kl-reference the reference is a 16-bit copy (2 bytes × 7,615,616,512 parameters ÷ the layout's TP, ZeRO-2
    leaving weights whole). Without it, none, as TRL's GRPOTrainer (beta 0.0 by default: grpo_config.py at
    f2cd5771, 2026-07-24) and verl (use_kl_loss and use_kl_in_reward false) run GRPO: 0 bytes, and the line
    says so."""
    kw = {"tokens": "20M", "seq_len": 1024, "finetune": "grpo"}
    none = estimate("qwen2.5-7b", "h100-sxm", 8, **kw)
    assert none.memory.reference == 0.0
    assert "reference none" in next(w for w in none.warnings if w.startswith("grpo:"))
    est = estimate("qwen2.5-7b", "h100-sxm", 8, kl_reference=True, **kw)
    line = next(w for w in est.warnings if w.startswith("grpo:"))
    for part in ("policy", "reference", "generation", "optimizer", "training"):
        assert part in line
    tp = est.layout.tp
    shards = est.layout.dp if est.layout.zero >= 3 else 1
    assert est.memory.reference == pytest.approx(2 * 7_615_616_512 / tp / shards, rel=1e-6)
    # the colocated engine reserves at least TRL's vllm_gpu_memory_utilization 0.3 of the 80 GiB
    assert est.memory.generation >= 0.3 * 80 * GIB


def test_grpo_reference_follows_the_trainers_default() -> None:
    """A GRPO run's reference as its trainer ships it: TRL's GRPOTrainer loads none (grpo_config.py at f2cd5771,
    2026-07-24: beta defaults to 0.0), Unsloth replaces that default by 0.001 (unsloth/models/rl.py at 015bdef0,
    2026-08-22) and so holds one: a full policy's 16-bit copy, 2 × 7,615,616,512 bytes ÷ TP (and ÷ DP under
    ZeRO-3); --no-kl-reference drops it whatever the trainer."""
    assert trainer("trl").kl_reference is False and trainer("unsloth").kl_reference is True
    kw = {"tokens": "20M", "seq_len": 1024, "finetune": "grpo", "trainer": "unsloth"}
    held = estimate("qwen2.5-7b", "h100-sxm", 8, **kw)
    shards = held.layout.dp if held.layout.zero >= 3 else 1
    assert held.memory.reference == pytest.approx(
        2 * 7_615_616_512 / held.layout.tp / shards, rel=1e-6
    )
    assert estimate("qwen2.5-7b", "h100-sxm", 8, kl_reference=False, **kw).memory.reference == 0.0


def test_grpo_generation_memory_matches_unsloths_trl_breakdown() -> None:
    """unsloth.ai/blog/grpo (2025-02-20), 'GRPO VRAM Breakdown', TRL + FA2, Llama 3.1 8B at 20K context:
    'Inference Cost' 16GB (the colocated vLLM's 16-bit weights) and 'Inference KV Cache for 20K context'
    2.5GB. The planner's engine weights and one 20,480-token sequence's KV cache: within 20% of each."""
    from trilemma.estimate.layouts import LayoutArrays
    from trilemma.estimate.params import param_counts
    from trilemma.estimate.rl import rollout_memory
    from trilemma.resolve import finetune_fields, make_plan, resolve_model
    from trilemma.specs import Layout

    m, _ = resolve_model("llama3.1-8b")
    plan = make_plan(m, "20M", 20480, 20480, **finetune_fields(m, "grpo"))
    L = LayoutArrays.from_layouts([Layout(tp=1, pp=1, dp=1, micro_batch=1)])
    ro = rollout_memory(m, param_counts(m), plan, L, 20480, 1, 80 * GIB)
    assert abs(float(ro.engine_weights[0]) / 16e9 - 1) <= 0.20
    assert abs(float(ro.kv_cache[0]) / (2.5 * GIB) - 1) <= 0.20


def test_a_scenario_file_names_a_trainer(tmp_path, capsys) -> None:
    """A scenario's trainer is the flag's: Unsloth's offloaded checkpoints and fused loss lower the plan's
    memory against the same scenario without one; an unknown name is the same one-line refusal."""
    base = (
        'model = "llama3-8b"\nfinetune = "qlora"\ntokens = "20M"\nseq = 8192\ngpu = "rtx-4090"\n'
        'max-gpus = 1\ndeadline = "7d"\n'
    )
    per_gpu = {}
    for name, extra in (("none", ""), ("unsloth", 'trainer = "unsloth"\n')):
        f = tmp_path / f"{name}.toml"
        f.write_text(base + extra, encoding="utf-8")
        code, out, _ = run(capsys, "solve", str(f), "--json")
        assert code == 0
        per_gpu[name] = json.loads(out)["optimum"]["memory"]["per_gpu_bytes"]
    assert per_gpu["unsloth"] < per_gpu["none"]
    f = tmp_path / "bad.toml"
    f.write_text(base + 'trainer = "unslot"\n', encoding="utf-8")
    code, _, err = run(capsys, "solve", str(f))
    assert code == 2 and err.count("\n") == 1 and "unsloth" in err


def test_optimizer_in_backward_keeps_one_gradient() -> None:
    """torchtune's optimizer_in_bwd on a full fine-tune: each parameter's step runs as its gradient is ready,
    so at most the largest one is whole: Llama 3 8B's output table, 128,256 × 4,096 bf16 gradients =
    1,050,673,152 bytes (hand count; torchtune keeps bf16 gradients: dtype bf16, no master)."""
    from trilemma.presets import trainer as preset

    tune = preset("torchtune")
    lay = {"micro_batch": 1, "recompute": "full", "tp": 1, "pp": 1, "dp": 1, "zero": 0}
    kw = dict(tokens="20M", seq_len=2048, finetune="full", layout=lay)
    fused = estimate(
        "llama3-8b", "h100-sxm", 1, trainer=tune.replace(optimizer_in_backward=True), **kw
    )
    plain = estimate("llama3-8b", "h100-sxm", 1, trainer=tune, **kw)
    assert fused.memory.gradients == pytest.approx(128_256 * 4096 * 2, rel=1e-9)
    assert plain.memory.gradients == pytest.approx(8_030_261_248 * 2, rel=1e-9)


def test_loss_kernels_bytes_by_hand() -> None:
    """The logits term under each trainer's loss, Llama 3 8B, 2 × 2,048 tokens, bf16 (hand counts):
    chunked over 8 (torchtune): 4,096 × 128,256 × (4 + 8/8) bytes; fused-linear (Liger): a chunk of
    next_power_of_2(4,096 / ceil(128,256 / 4,096) = 128) = 128 tokens' bf16 logits + the input's bf16
    gradient, 128 × 128,256 × 2 + 4,096 × 4,096 × 2 bytes. Beside either: the LM head's and the final norm's
    inputs, 2 × 4,096 × 4,096 × 2 bytes."""
    lay = {"micro_batch": 2, "recompute": "full", "tp": 1, "pp": 1, "dp": 1}
    kw = dict(tokens="20M", seq_len=2048, finetune="lora", layout=lay)
    beside = 2 * 4096 * 4096 * 2
    chunked = estimate("llama3-8b", "h100-sxm", 1, trainer="torchtune", **kw).memory.logits
    assert chunked == pytest.approx(4096 * 128_256 * 5 + beside, rel=1e-9)
    fused = estimate("llama3-8b", "h100-sxm", 1, trainer="liger", **kw).memory.logits
    assert fused == pytest.approx(128 * 128_256 * 2 + 4096 * 4096 * 2 + beside, rel=1e-9)


def test_compiled_and_cut_losses_bytes_by_hand() -> None:
    """Llama 3 8B, 2 × 2,048 tokens: a trainer that compiles the whole model keeps 10 bytes a logit (the
    returned fp32 logits, AOTAutograd's zero fp32 tangent for them, the bf16 gradient:
    benchmarks/compiled_loss_bytes.py) where eager keeps 12; Cut Cross-Entropy (Unsloth) keeps no logits, only
    the input's bf16 gradient and an fp32 log-sum-exp a token, 4,096 × (4,096 × 2 + 4). Beside each, the LM
    head's and the final norm's inputs, 2 × 4,096 × 4,096 × 2."""
    lay = {"micro_batch": 2, "recompute": "full", "tp": 1, "pp": 1, "dp": 1}
    kw = dict(tokens="20M", seq_len=2048, finetune="lora", layout=lay)
    beside = 2 * 4096 * 4096 * 2
    eager = estimate("llama3-8b", "h100-sxm", 1, trainer="hf-trainer", **kw).memory.logits
    assert eager == pytest.approx(4096 * 128_256 * 12 + beside, rel=1e-9)
    hf_compiled = stack("hf-trainer").replace(host="compile")  # the Trainer's torch_compile=True
    compiled = estimate("llama3-8b", "h100-sxm", 1, trainer="hf-trainer", stack=hf_compiled, **kw)
    assert compiled.memory.logits == pytest.approx(4096 * 128_256 * 10 + beside, rel=1e-9)
    cut = estimate("llama3-8b", "h100-sxm", 1, trainer="unsloth", **kw).memory.logits
    assert cut == pytest.approx(4096 * (4096 * 2 + 4) + beside, rel=1e-9)


def test_dpo_holds_a_reference_but_generates_nothing() -> None:
    """--finetune dpo: no generation engine and no rollout time; a full policy holds a 16-bit reference,
    sharded like the weights under ZeRO-3 (2 bytes × 8,030,261,248 parameters / 4 GPUs), whose forward adds a
    third of the training step; a LoRA policy's reference is its base with the adapters disabled: 0 bytes."""
    lay = {"micro_batch": 1, "recompute": "full", "tp": 1, "pp": 1, "dp": 4, "zero": 3}
    kw = dict(tokens="20M", seq_len=1024, finetune="dpo", layout=lay)
    full = estimate("llama3-8b", "h100-sxm", 4, **kw)
    assert full.memory.generation == 0
    assert full.memory.reference == pytest.approx(2 * 8_030_261_248 / 4, rel=1e-9)
    line = next(w for w in full.warnings if w.startswith("dpo:"))
    assert "reference forward" in line and "generation" not in line.split(";", 1)[1]
    lora = estimate("llama3-8b", "h100-sxm", 4, lora_rank=16, **kw)
    assert lora.memory.reference == 0 and lora.plan.finetune.method.value == "lora"
