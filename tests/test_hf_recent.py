"""Families from mid-2024 on (Gemma 2/3, Qwen3, Qwen3-MoE, Phi-3, OLMo 2): a config.json written with
the values of the released model's own file must give the count of the shipped preset, which
tests/test_params.py checks against the published figure. Keys a released file leaves to its
config class's defaults are left out here too (Gemma 3's sparse text_config)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trilemma.estimate.params import param_counts
from trilemma.hf import model_from_hf_config
from trilemma.presets import get_model

_ROPE = {"rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 40960}

CONFIGS: dict[str, dict[str, Any]] = {
    # google/gemma-2-9b config.json
    "gemma2-9b": {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "hidden_size": 3584,
        "intermediate_size": 14336,
        "num_hidden_layers": 42,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "vocab_size": 256000,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
        "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0,
    },
    # google/gemma-3-4b-pt config.json: the language model's keys under a sparse text_config
    "gemma3-4b": {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "model_type": "gemma3_text",
            "num_hidden_layers": 34,
            "sliding_window": 1024,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        },
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27, "patch_size": 14},
    },
    # google/gemma-3-1b-pt config.json
    "gemma3-1b": {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": 1152,
        "intermediate_size": 6912,
        "num_hidden_layers": 26,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "vocab_size": 262144,
        "sliding_window": 512,
    },
    # Qwen/Qwen3-8B config.json
    "qwen3-8b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "attention_bias": False,
        **_ROPE,
    },
    # Qwen/Qwen3-30B-A3B config.json
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        **_ROPE,
    },
    # microsoft/phi-4 config.json
    "phi-4": {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "hidden_size": 5120,
        "intermediate_size": 17920,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 10,
        "vocab_size": 100352,
        "tie_word_embeddings": False,
    },
    # allenai/OLMo-2-1124-7B config.json
    "olmo2-7b": {
        "architectures": ["Olmo2ForCausalLM"],
        "model_type": "olmo2",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 100352,
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
}


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_config_family_counts_as_its_preset(tmp_path: Path, preset: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS[preset]), encoding="utf-8")
    from_file = param_counts(model_from_hf_config(path))
    shipped = param_counts(get_model(preset))
    assert (from_file.total, from_file.active, from_file.non_embedding) == (
        shipped.total,
        shipped.active,
        shipped.non_embedding,
    )


def test_gemma3_without_a_text_config_is_refused_by_key(tmp_path: Path) -> None:
    from trilemma.errors import InputError

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3", "hidden_size": 8}), encoding="utf-8")
    with pytest.raises(InputError, match="text_config"):
        model_from_hf_config(path)
