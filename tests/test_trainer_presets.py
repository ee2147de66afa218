"""The Axolotl, LLaMA-Factory and NeMo trainer presets against their sources' defaults, read by hand from each
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
BY_HAND = {
    "axolotl": (False, 5, "eager", 1, False, False, None),
    "llama-factory": (False, 1, "eager", 1, False, True, None),
    "nemo": (False, 1, "eager", 1, False, True, None),
}
REPO = {
    "axolotl": "axolotl-ai-cloud/axolotl",
    "llama-factory": "hiyouga/LLaMA-Factory",
    "nemo": "NVIDIA/NeMo",
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_preset_features_are_its_sources_defaults(name: str) -> None:
    t = trainer(name)
    assert t.features == dict(zip(FIELDS, BY_HAND[name], strict=True))
    assert REPO[name] in t.source and "@20" in t.source  # the trainer's own repository at a date


def test_aliases_reach_the_presets() -> None:
    assert trainer("LlamaFactory").name == "llama-factory" and trainer("nemo2").name == "nemo"
