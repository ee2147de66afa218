"""The Axolotl, LLaMA-Factory and NeMo trainer presets against their sources' defaults, read by hand from each
trainer's code at the dated commit its preset cites (presets/trainers.toml)."""

from __future__ import annotations

import pytest

from trilemma.presets import trainer

#: each trainer's shipped defaults, as read in its code (the quoted line beside each)
BY_HAND = {
    "axolotl": {
        # axolotl-ai-cloud/axolotl@067b021c (2026-07-24), src/axolotl/utils/schemas/config.py:
        # 'activation_offloading: ... = (Field(default=False'
        "activation_offload": False,
        # src/axolotl/core/trainers/mixins/activation_checkpointing.py: 'max_fwd_stash_size: int = 5'
        "offload_in_flight": 5,
        # config.py: 'chunked_cross_entropy: bool | None = Field(default=None', 'plugins: ... default=None'
        "loss": "eager",
        "loss_chunks": 1,
        # core/trainers/base.py: 'class AxolotlTrainer(..., Trainer)': optimizer.step() after the backward
        "optimizer_in_backward": False,
        # utils/config/__init__.py: 'if cfg.bf16 or cfg.bfloat16: cfg.torch_dtype = torch.bfloat16'
        "master_weights": False,
    },
    "llama-factory": {
        # hiyouga/LLaMA-Factory@ff6d4d12 (2026-08-18), src/llamafactory/hparams/model_args.py:
        # 'use_unsloth_gc: bool = field(default=False', 'enable_liger_kernel: bool = field(default=False'
        "activation_offload": False,
        "offload_in_flight": 1,
        "loss": "eager",
        "loss_chunks": 1,
        # train/sft/trainer.py: 'class CustomSeq2SeqTrainer(Seq2SeqTrainer)'
        "optimizer_in_backward": False,
        # model/adapter.py: 'Upcasting trainable params to float32.' unless pure_bf16 (default=False)
        "master_weights": True,
    },
    "nemo": {
        # NVIDIA/Megatron-LM@d98e8a64 (2026-08-22), megatron/core/model_parallel_config.py:
        # 'cpu_offloading: bool = False'
        "activation_offload": False,
        "offload_in_flight": 1,
        # NVIDIA/NeMo@8cfedd72 (2025-09-20), nemo/collections/llm/gpt/model/base.py:
        # 'cross_entropy_loss_fusion: bool = True' — Megatron's cross entropy over the whole logits
        "loss": "eager",
        "loss_chunks": 1,
        "optimizer_in_backward": False,
        # nemo/collections/llm/recipes/optim/adam.py: 'use_distributed_optimizer=True'; Megatron-LM
        # megatron/core/optimizer/optimizer_config.py: 'main_params_dtype: torch.dtype = torch.float32'
        "master_weights": True,
    },
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_preset_features_are_its_sources_defaults(name: str) -> None:
    t = trainer(name)
    assert t.features == BY_HAND[name]
    # the preset cites the trainer's own repository at a date
    repo = {
        "axolotl": "axolotl-ai-cloud/axolotl",
        "llama-factory": "hiyouga/LLaMA-Factory",
        "nemo": "NVIDIA/NeMo",
    }
    assert repo[name] in t.source and "@20" in t.source


def test_aliases_reach_the_presets() -> None:
    assert trainer("LlamaFactory").name == "llama-factory" and trainer("nemo2").name == "nemo"
