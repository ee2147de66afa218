"""Mappers for the families released from mid-2024: Gemma 2 and 3, Qwen3 (dense and MoE), Phi-3
(Phi-3.5-mini, Phi-4) and OLMo 2. Each maps its config keys, with its Hugging Face config class's
defaults for absent keys (``transformers/models/<family>/configuration_<family>.py``), onto
ModelSpec fields; ``trilemma.hf.families`` registers them by ``model_type``.

What the parameter count needs beyond the Llama-shaped decoder:

- Gemma 2 and 3: four RMSNorms per layer (before and after attention, before and after the MLP);
  Gemma 3 adds per-head query and key norms. Logit soft-capping, ``query_pre_attn_scalar`` and the
  sliding window (local layers of ``sliding_window`` tokens) carry no weights.
- Qwen3 and Qwen3-MoE: per-head query and key norms; no q/k/v biases (Qwen2 had them).
- OLMo 2: the two norms of a layer sit after attention and after the MLP (same weights as the
  pre-norm pair), and the query and key norms span all heads (``n_heads·head_dim``,
  ``n_kv_heads·head_dim``).
- Phi-3: fused ``qkv_proj`` and ``gate_up_proj``, the same tensors as Llama's split ones.
"""

from __future__ import annotations

from typing import Any

from trilemma.errors import InputError
from trilemma.hf.config import _Config, _rotary_decoder, _routed_experts
from trilemma.specs import QkNorm


def _gemma_sandwich(c: _Config, vocab: int) -> dict:
    # Gemma2Config and Gemma3TextConfig alike: hidden 2304, intermediate 9216, 26 layers, 8 heads,
    # kv 4, head_dim 256, hidden_activation gelu_pytorch_tanh, tie true, attention_bias false;
    # vocab 256000 (Gemma 2) or 262208 (Gemma 3)
    bias = c.flag("attention_bias", False)
    fields = _rotary_decoder(
        c,
        vocab=vocab,
        hidden=2304,
        inter=9216,
        layers=26,
        heads=8,
        kv=4,
        head_dim=256,
        tie=True,
        act="gelu_pytorch_tanh",
        act_keys=("hidden_activation", "hidden_act"),
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=False,
    )
    return {**fields, "norms_per_layer": 4}


def _gemma2(c: _Config) -> dict:
    return _gemma_sandwich(c, vocab=256000)


def _gemma3_text(c: _Config) -> dict:
    return {**_gemma_sandwich(c, vocab=262208), "qk_norm": QkNorm.HEAD}


def _gemma3(c: _Config) -> dict:
    """Gemma3ForConditionalGeneration (4B, 12B, 27B): the language model of ``text_config``; the
    SigLIP vision tower and its projector are not counted (a text-only plan never runs them)."""
    text: Any = c.data.get("text_config")
    if not isinstance(text, dict):
        raise InputError(
            "config.json text_config", text, "an object of the language model's config keys"
        )
    return _gemma3_text(_Config(text))


def _qwen3(c: _Config) -> dict:
    # Qwen3Config: vocab 151936, hidden 4096, intermediate 22016, 32 layers, 32 heads, kv 32,
    # head_dim 128, silu, tie false, attention_bias false
    bias = c.flag("attention_bias", False)
    fields = _rotary_decoder(
        c,
        vocab=151936,
        hidden=4096,
        inter=22016,
        layers=32,
        heads=32,
        kv=32,
        head_dim=128,
        tie=False,
        act="silu",
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=False,
    )
    return {**fields, "qk_norm": QkNorm.HEAD}


def _qwen3_moe(c: _Config) -> dict:
    # Qwen3MoeConfig: vocab 151936, hidden 2048, intermediate 6144 (dense layers), 24 layers,
    # 32 heads, kv 4, head_dim hidden / heads, attention_bias false, decoder_sparse_step 1,
    # moe_intermediate_size 768, num_experts 128, num_experts_per_tok 8, mlp_only_layers [];
    # no shared expert
    bias = c.flag("attention_bias", False)
    fields = _rotary_decoder(
        c,
        vocab=151936,
        hidden=2048,
        inter=6144,
        layers=24,
        heads=32,
        kv=4,
        tie=False,
        act="silu",
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=False,
    )
    fields["qk_norm"] = QkNorm.HEAD
    moe = _routed_experts(c, fields, experts=128, top_k=8, moe_ffn=768)
    return fields if moe is None else {**fields, **moe}


def _phi3(c: _Config) -> dict:
    # Phi3Config: vocab 32064, hidden 3072, intermediate 8192, 32 layers, 32 heads, kv None
    # (= heads), silu, tie false; qkv_proj, o_proj and gate_up_proj without bias
    return _rotary_decoder(
        c,
        vocab=32064,
        hidden=3072,
        inter=8192,
        layers=32,
        heads=32,
        kv=None,
        tie=False,
        act="silu",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
    )


def _olmo2(c: _Config) -> dict:
    # Olmo2Config: vocab 50304, hidden 4096, intermediate 11008, 32 layers, 32 heads, kv None
    # (= heads), silu, tie false, attention_bias false
    bias = c.flag("attention_bias", False)
    fields = _rotary_decoder(
        c,
        vocab=50304,
        hidden=4096,
        inter=11008,
        layers=32,
        heads=32,
        kv=None,
        tie=False,
        act="silu",
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=False,
    )
    return {**fields, "qk_norm": QkNorm.FULL}


#: DeepseekV3Config's decoder defaults; head_dim 1 stands aside (MLA's head widths are read on their own)
_V3_DECODER: dict[str, Any] = dict(
    vocab=129280, hidden=7168, inter=18432, layers=61, heads=128, kv=None, head_dim=1, tie=False
) | {"act": "silu", "mlp_bias": False}


def _deepseek_v3(c: _Config) -> dict:
    """DeepseekV3Config (transformers models/deepseek_v3/configuration_deepseek_v3.py, whose defaults are
    DeepSeek-V3's 671B): vocab 129280, hidden 7168, intermediate 18432 (the first_k_dense_replace 3 dense
    layers), 61 layers, 128 heads, tie false, attention_bias false; MLA q_lora_rank 1536 (None: a full query
    projection), kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128; MoE
    n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1, moe_intermediate_size 2048. The
    multi-token-prediction module (num_mtp_layers) is not part of the model's 671B (arXiv 2412.19437 §2.2)."""
    bias = c.flag("attention_bias", False)
    fields = _rotary_decoder(c, **_V3_DECODER, qkv_bias=bias, out_bias=bias)
    nope, v = c.integer("qk_nope_head_dim", 128), c.integer("v_head_dim", 128, nullable=True)
    if v is not None and v != nope:
        raise InputError(
            "config.json v_head_dim", v, f"qk_nope_head_dim ({nope}): ModelSpec has one head_dim"
        )
    experts = c.integer("n_routed_experts", 256, minimum=0)
    k = c.integer("num_experts_per_tok", 8)
    if experts and k > experts:
        raise InputError(
            "config.json num_experts_per_tok", k, f"between 1 and n_routed_experts ({experts})"
        )
    moe = {
        "n_experts": experts,
        "top_k": k if experts else 0,
        "n_shared_experts": c.integer("n_shared_experts", 1, minimum=0) if experts else 0,
        "expert_ffn_dim": c.integer("moe_intermediate_size", 2048),
        "moe_every": c.integer("moe_layer_freq", 1),
        "first_dense_layers": c.integer("first_k_dense_replace", 3, minimum=0) if experts else 0,
    }
    return {
        **fields,
        "n_kv_heads": None,
        "head_dim": nope,
        "kv_lora_rank": c.integer("kv_lora_rank", 512),
        # null: no query latent (DeepSeek-V2-Lite's full query projection); absent: the class's 1536
        "q_lora_rank": 0 if c._get("q_lora_rank")[1] is None else c.integer("q_lora_rank", 1536),
        "qk_rope_head_dim": c.integer("qk_rope_head_dim", 64, minimum=0),
        **moe,
    }


RECENT_FAMILIES = {
    "deepseek_v3": ("DeepseekV3Config", _deepseek_v3),
    "gemma2": ("Gemma2Config", _gemma2),
    "gemma3_text": ("Gemma3TextConfig", _gemma3_text),
    "gemma3": ("Gemma3Config (text_config)", _gemma3),
    "qwen3": ("Qwen3Config", _qwen3),
    "qwen3_moe": ("Qwen3MoeConfig", _qwen3_moe),
    "phi3": ("Phi3Config", _phi3),
    "olmo2": ("Olmo2Config", _olmo2),
}
