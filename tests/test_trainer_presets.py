"""The Axolotl, LLaMA-Factory, NeMo, verl, OpenRLHF and NeMo-RL trainer presets against their sources' defaults, read by hand from each
trainer's code at the dated commit its preset cites (presets/trainers.toml)."""

from __future__ import annotations

import pytest

from trilemma.presets import trainer

FIELDS = (
    "activation_offload",
    "offload_in_flight",
    "loss",
    "loss_chunks",
    "optimizer_in_backward",
    "master_weights",
    "kl_reference",
    "rollout_share",
    "rollout_in_process",
    "rollout_logprobs",
)
#: each trainer's shipped defaults in FIELDS' order, as read in its code (kl_reference None: the preset states no
#: GRPO default of its own):
#: axolotl-ai-cloud/axolotl@067b021c (2026-07-24): utils/schemas/config.py 'activation_offloading: ... =
#: (Field(default=False'; core/trainers/mixins/activation_checkpointing.py 'max_fwd_stash_size: int = 5';
#: config.py 'chunked_cross_entropy: ... default=None', 'plugins: ... default=None' (the model's own loss);
#: core/trainers/base.py 'class AxolotlTrainer(..., Trainer)'; utils/config/__init__.py 'if cfg.bf16 or
#: cfg.bfloat16: cfg.torch_dtype = torch.bfloat16' (no fp32 master).
#: hiyouga/LLaMA-Factory@ff6d4d12 (2026-08-18): hparams/model_args.py 'use_unsloth_gc: bool =
#: field(default=False', 'enable_liger_kernel: bool = field(default=False'; train/sft/trainer.py
#: 'class CustomSeq2SeqTrainer(Seq2SeqTrainer)'; model/adapter.py 'Upcasting trainable params to float32.'
#: unless pure_bf16 (default=False).
#: NVIDIA/NeMo@8cfedd72 (2025-09-20) with NVIDIA/Megatron-LM@d98e8a64: megatron/core/model_parallel_config.py
#: 'cpu_offloading: bool = False'; nemo/collections/llm/gpt/model/base.py 'cross_entropy_loss_fusion: bool =
#: True' (Megatron's cross entropy over the whole logits); recipes/optim/adam.py 'use_distributed_optimizer=
#: True' and megatron/core/optimizer/optimizer_config.py 'main_params_dtype: torch.dtype = torch.float32'.
#: volcengine/verl@b178a3cd (2026-01-29): trainer/config/_generated_ppo_trainer.yaml 'enable_activation_offload:
#: false', actor 'model_dtype: fp32' (fsdp_workers.py: MixedPrecision param_dtype bf16 over it), 'use_kl_loss:
#: false' and algorithm 'use_kl_in_reward: false' (no reference), rollout 'gpu_memory_utilization: 0.5',
#: 'mode: async' (workers/rollout/vllm_rollout/vllm_async_server.py: vLLM's AsyncLLM, its engine core a process
#: of its own) and 'calculate_log_probs: False'; workers/actor/dp_actor.py 'inplace_backward = True' into logprobs_from_logits (flash-attn's cross entropy).
#: OpenRLHF/OpenRLHF@3c3be623 (2026-08-13): cli/train_ppo_ray.py '--algo.kl.init_coef ... default=0.01' (a
#: reference), no activation offload, vLLM engines on GPUs of their own by default (no colocated share);
#: models/actor.py 'output["logits"].to(torch.float32)' before flash-attn's cross_entropy_loss (models/utils.py);
#: utils/deepspeed/deepspeed_utils.py '"bf16": {"enabled": param_dtype == "bf16"' (DeepSpeed's fp32 master);
#: trainer/ray/vllm_engine.py 'vllm.AsyncLLMEngine.from_engine_args' (VLLM_ENABLE_V1_MULTIPROCESSING "0" only
#: under --train.full_determinism_enable, default False); trainer/ppo_utils/samples_generator.py 'logprobs=1 if
#: self.args.algo.advantage.is_correction_enable else None' (default False).
#: NVIDIA-NeMo/RL@b1c86a81 (v0.3.0, 2025-07-25): examples/configs/grpo_math_1B.yaml dtensor_cfg 'cpu_offload:
#: False', 'activation_checkpointing: false', 'reference_policy_kl_penalty: 0.01', vllm_cfg
#: 'gpu_memory_utilization: 0.6'; nemo_rl/models/policy/dtensor_policy_worker.py 'torch_dtype=torch.float32'
#: ('keep master weights in float32'); nemo_rl/algorithms/loss_functions.py 'next_token_logits.to(
#: torch.float32)' then log_softmax over the whole logits; nemo_rl/models/generation/vllm.py
#: 'VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"' and 'logprobs=0'.
BY_HAND = {
    "axolotl": (False, 5, "eager", 1, False, False, None, None, None, None),
    "llama-factory": (False, 1, "eager", 1, False, True, None, None, None, None),
    "nemo": (False, 1, "eager", 1, False, True, None, None, None, None),
    "verl": (False, 1, "flash-inplace", 1, False, True, False, 0.5, False, False),
    "openrlhf": (False, 1, "flash-fp32", 1, False, True, True, None, False, False),
    "nemo-rl": (False, 1, "eager", 1, False, True, True, 0.6, True, True),
}
REPO = {
    "axolotl": "axolotl-ai-cloud/axolotl",
    "llama-factory": "hiyouga/LLaMA-Factory",
    "nemo": "NVIDIA/NeMo",
    "verl": "volcengine/verl",
    "openrlhf": "OpenRLHF/OpenRLHF",
    "nemo-rl": "NVIDIA-NeMo/RL",
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_preset_features_are_its_sources_defaults(name: str) -> None:
    t = trainer(name)
    assert t.features == dict(zip(FIELDS, BY_HAND[name], strict=True))
    assert REPO[name] in t.source and "@20" in t.source  # the trainer's own repository at a date


def test_aliases_reach_the_presets() -> None:
    assert trainer("LlamaFactory").name == "llama-factory" and trainer("nemo2").name == "nemo"


def test_rl_trainers_log_prob_losses_bytes_by_hand() -> None:
    """The logits term under verl's and OpenRLHF's log-prob losses, Llama 3 8B, 2 × 2,048 tokens, bf16 (hand
    counts): flash-attn's cross_entropy_loss keeps its input logits and an fp32 log-sum-exp a token (4,096 × 4);
    verl's are the bf16 logits, the gradient written in place: 4,096 × 128,256 × 2; OpenRLHF's the fp32 upcast
    and the backward's new fp32 gradient: 4,096 × 128,256 × 8. Beside each, the LM head's and the final
    norm's inputs, 2 × 4,096 × 4,096 × 2."""
    from trilemma.api import estimate

    lay = {"micro_batch": 2, "recompute": "full", "tp": 1, "pp": 1, "dp": 1}
    kw = dict(tokens="20M", seq_len=2048, finetune="lora", layout=lay)
    beside, lse = 2 * 4096 * 4096 * 2, 4096 * 4
    for name, per_logit in (("verl", 2), ("openrlhf", 8)):
        got = estimate("llama3-8b", "h100-sxm", 1, trainer=name, **kw).memory.logits
        assert got == pytest.approx(4096 * 128_256 * per_logit + lse + beside, rel=1e-9), name


def test_rl_trainers_reference_and_engine_share_by_default() -> None:
    """GRPO on Qwen2.5-7B over 8 H100s as each trainer ships it: verl holds no reference (no KL term) and
    its colocated engine reserves its gpu_memory_utilization 0.5 of the 80 GiB; OpenRLHF holds the reference
    (KL 0.01), a 16-bit copy, 2 × 7,615,616,512 bytes ÷ TP (÷ DP under ZeRO-3), and states no colocated
    share (the method's, TRL's 0.3); an engine share given in the plan wins over the trainer's."""
    from trilemma.api import estimate
    from trilemma.resolve import finetune_fields, make_plan, resolve_model
    from trilemma.specs.rl import RolloutSpec
    from trilemma.units import GIB

    kw = {"tokens": "20M", "seq_len": 1024, "finetune": "grpo"}
    verl = estimate("qwen2.5-7b", "h100-sxm", 8, trainer="verl", **kw)
    assert verl.memory.reference == 0.0 and verl.plan.rl.engine_share == 0.5
    assert verl.memory.generation >= 0.5 * 80 * GIB
    orl = estimate("qwen2.5-7b", "h100-sxm", 8, trainer="openrlhf", **kw)
    shards = orl.layout.dp if orl.layout.zero >= 3 else 1
    assert orl.memory.reference == pytest.approx(
        2 * 7_615_616_512 / orl.layout.tp / shards, rel=1e-6
    )
    assert orl.plan.rl.engine_share == 0.3
    m, _ = resolve_model("qwen2.5-7b")
    fields = finetune_fields(m, "grpo") | {"rl": RolloutSpec(engine_share=0.4), "trainer": "verl"}
    assert make_plan(m, "20M", 1024, 1024 * 64, **fields).rl.engine_share == 0.4


def test_every_door_takes_the_rl_trainers_and_refuses_a_misspelling(tmp_path, capsys) -> None:
    """--trainer verl / openrlhf at the CLI, in a scenario file, through the web API and the Python API; a
    misspelt one is the same one-line refusal naming the field and every known trainer (exit 2)."""
    from clitools import run

    from trilemma.api import estimate
    from trilemma.errors import InputError

    args = [
        "estimate",
        "--model",
        "qwen2.5-7b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "8",
        "--tokens",
        "20M",
    ]
    args += ["--finetune", "grpo", "--trainer"]
    assert run(capsys, *args, "OpenRLHF")[0] == 0
    code, _, err = run(capsys, *args, "verll")
    assert code == 2 and err.count("\n") == 1 and "trainer" in err
    assert "verl" in err and "openrlhf" in err
    f = tmp_path / "s.toml"
    f.write_text(
        'model = "qwen2.5-7b"\nfinetune = "grpo"\ntrainer = "verll"\ndeadline = "7d"\n', "utf-8"
    )
    code, _, scenario_err = run(capsys, "solve", str(f))
    assert code == 2 and scenario_err.strip().endswith(err.strip().split(": ", 1)[-1])
    with pytest.raises(InputError, match="openrlhf"):
        estimate("qwen2.5-7b", "h100-sxm", 8, tokens="20M", finetune="grpo", trainer="verll")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trilemma.web import app as web

    body = {
        "model": "qwen2.5-7b",
        "gpu": "h100-sxm",
        "gpus": 8,
        "tokens": "20M",
        "finetune": "grpo",
    }
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        ok = c.post("/api/estimate", json=body | {"trainer": "verl"})
        bad = c.post("/api/estimate", json=body | {"trainer": "verll"})
    assert ok.status_code == 200, ok.text
    assert bad.status_code in (400, 422) and "openrlhf" in bad.text and "trainer" in bad.text
