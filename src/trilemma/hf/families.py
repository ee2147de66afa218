"""One mapper per Hugging Face model family: its config keys (with its config class's defaults) onto
ModelSpec fields. The table of families and their defaults is in ``trilemma.hf``'s docstring."""

from __future__ import annotations

from collections.abc import Callable

from trilemma.errors import InputError
from trilemma.hf.config import _Config, _heads, _plain_ffn, _rotary_decoder, _routed_experts
from trilemma.hf.recent import RECENT_FAMILIES
from trilemma.specs import NormType, PositionType


def _llama(c: _Config) -> dict:
    # LlamaConfig: vocab 32000, hidden 4096, intermediate 11008, 32 layers, 32 heads, kv None,
    # silu, tie false, attention_bias false (q, k, v and o_proj), mlp_bias false, head_dim None
    bias = c.flag("attention_bias", False)
    return _rotary_decoder(
        c,
        vocab=32000,
        hidden=4096,
        inter=11008,
        layers=32,
        heads=32,
        kv=None,
        head_dim=None,
        tie=False,
        act="silu",
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=c.flag("mlp_bias", False),
    )


def _mistral(c: _Config) -> dict:
    # MistralConfig: vocab 32000, hidden 4096, intermediate 14336, 32 layers, 32 heads, kv 8,
    # silu, tie false; no bias anywhere
    return _rotary_decoder(
        c,
        vocab=32000,
        hidden=4096,
        inter=14336,
        layers=32,
        heads=32,
        kv=8,
        head_dim=None,
        tie=False,
        act="silu",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
    )


def _mixtral(c: _Config) -> dict:
    # MixtralConfig: as Mistral, plus num_local_experts 8 (alias num_experts), num_experts_per_tok 2
    fields = _mistral(c)
    experts = c.integer(("num_local_experts", "num_experts"), 8)
    top_k = c.integer("num_experts_per_tok", 2)
    if top_k > experts:
        raise InputError(
            "config.json num_experts_per_tok", top_k, f"between 1 and num_local_experts ({experts})"
        )
    return {**fields, "n_experts": experts, "top_k": top_k}


def _qwen2(c: _Config) -> dict:
    # Qwen2Config: vocab 151936, hidden 4096, intermediate 22016, 32 layers, 32 heads, kv 32,
    # silu, tie false; q/k/v projections biased, o_proj and MLP not
    return _rotary_decoder(
        c,
        vocab=151936,
        hidden=4096,
        inter=22016,
        layers=32,
        heads=32,
        kv=32,
        head_dim=None,
        tie=False,
        act="silu",
        qkv_bias=True,
        out_bias=False,
        mlp_bias=False,
    )


def _qwen2_moe(c: _Config) -> dict:
    # Qwen2MoeConfig: vocab 151936, hidden 2048, intermediate 5632 (dense layers), 24 layers,
    # 16 heads, kv 16, tie false, qkv_bias true, decoder_sparse_step 1, moe_intermediate_size 1408,
    # shared_expert_intermediate_size 5632, num_experts 60, num_experts_per_tok 4,
    # mlp_only_layers []
    fields = _rotary_decoder(
        c,
        vocab=151936,
        hidden=2048,
        inter=5632,
        layers=24,
        heads=16,
        kv=16,
        head_dim=None,
        tie=False,
        act="silu",
        qkv_bias=c.flag("qkv_bias", True),
        out_bias=False,
        mlp_bias=False,
    )
    moe = _routed_experts(c, fields, experts=60, top_k=4, moe_ffn=1408)
    if moe is None:
        return fields  # no layer is sparse: a dense model
    moe_ffn = moe["expert_ffn_dim"]
    shared = c.integer("shared_expert_intermediate_size", 5632, minimum=0)
    if shared % moe_ffn:
        raise InputError(
            "config.json shared_expert_intermediate_size",
            shared,
            f"a multiple of moe_intermediate_size ({moe_ffn}), so the shared expert "
            "is a whole number of routed-expert widths",
        )
    return {
        **fields,
        **moe,
        "n_shared_experts": shared // moe_ffn,
        "shared_expert_gate": shared > 0,
    }


def _gemma(c: _Config) -> dict:
    # GemmaConfig: vocab 256000, hidden 3072, intermediate 24576, 28 layers, 16 heads, kv 16,
    # head_dim 256, gelu_pytorch_tanh (older files: hidden_activation), tie true,
    # attention_bias false
    bias = c.flag("attention_bias", False)
    return _rotary_decoder(
        c,
        vocab=256000,
        hidden=3072,
        inter=24576,
        layers=28,
        heads=16,
        kv=16,
        head_dim=256,
        tie=True,
        act="gelu_pytorch_tanh",
        act_keys=("hidden_activation", "hidden_act"),
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=False,
    )


def _gpt2(c: _Config) -> dict:
    # GPT2Config: vocab 50257, n_positions 1024, n_embd 768, n_layer 12, n_head 12, n_inner None
    # (→ 4·n_embd), gelu_new, dropouts 0.1; tie_word_embeddings from PretrainedConfig (true)
    hidden = c.integer(("n_embd", "hidden_size"), 768)
    heads = c.integer(("n_head", "num_attention_heads"), 12)
    inner = c.integer("n_inner", None, nullable=True)
    drop = max(c.prob("resid_pdrop", 0.1), c.prob("embd_pdrop", 0.1), c.prob("attn_pdrop", 0.1))
    return {
        "n_layers": c.integer(("n_layer", "num_hidden_layers"), 12),
        "d_model": hidden,
        **_heads(c, hidden, heads, None, None, heads_key="n_head"),
        "ffn_dim": inner or 4 * hidden,
        "ffn_type": _plain_ffn(c, "activation_function", "gelu_new"),
        "vocab_size": c.integer("vocab_size", 50257),
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "position": PositionType.LEARNED,
        "max_positions": c.integer(("n_positions", "max_position_embeddings"), 1024),
        "norm": NormType.LAYERNORM,
        "dropout": drop > 0,
    }


def _gpt_neox(c: _Config) -> dict:
    # GPTNeoXConfig: vocab 50432, hidden 6144, 44 layers, 64 heads, intermediate 24576, gelu,
    # tie false, use_parallel_residual true, attention_bias true (qkv and dense), MLP always biased
    hidden = c.integer("hidden_size", 6144)
    heads = c.integer("num_attention_heads", 64)
    bias = c.flag("attention_bias", True)
    drop = max(c.prob("hidden_dropout", 0.0), c.prob("attention_dropout", 0.0))
    return {
        "n_layers": c.integer("num_hidden_layers", 44),
        "d_model": hidden,
        **_heads(c, hidden, heads, None, None),
        "ffn_dim": c.integer("intermediate_size", 24576),
        "ffn_type": _plain_ffn(c, "hidden_act", "gelu"),
        "vocab_size": c.integer("vocab_size", 50432),
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "position": PositionType.ROTARY,
        "norm": NormType.LAYERNORM,
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": True,
        "parallel_block": c.flag("use_parallel_residual", True),
        "dropout": drop > 0,
    }


def _bert(c: _Config) -> dict:
    # BertConfig: vocab 30522, hidden 768, 12 layers, 12 heads, intermediate 3072, gelu,
    # max_position_embeddings 512, type_vocab_size 2, dropouts 0.1, position_embedding_type absolute
    kind = c.text("position_embedding_type", "absolute")
    if kind != "absolute":
        raise InputError(
            "config.json position_embedding_type",
            kind,
            "absolute (relative_key embeddings have no ModelSpec form)",
        )
    hidden = c.integer("hidden_size", 768)
    heads = c.integer("num_attention_heads", 12)
    drop = max(c.prob("hidden_dropout_prob", 0.1), c.prob("attention_probs_dropout_prob", 0.1))
    return {
        "causal": False,
        "n_layers": c.integer("num_hidden_layers", 12),
        "d_model": hidden,
        **_heads(c, hidden, heads, None, None),
        "ffn_dim": c.integer("intermediate_size", 3072),
        "ffn_type": _plain_ffn(c, "hidden_act", "gelu"),
        "vocab_size": c.integer("vocab_size", 30522),
        "tied_embeddings": True,  # BertModel has no LM head; an MLM head would reuse the table
        "position": PositionType.LEARNED,
        "max_positions": c.integer("max_position_embeddings", 512),
        "type_vocab_size": c.integer("type_vocab_size", 2, minimum=0),
        "norm": NormType.LAYERNORM,
        "embedding_norm": True,
        "final_norm": False,  # post-LN: each layer ends in its own LayerNorm
        "pooler": True,
        "dropout": drop > 0,
    }


def _opt(c: _Config) -> dict:
    # OPTConfig: vocab 50272, max_position_embeddings 2048, 12 layers, 12 heads, ffn_dim 3072,
    # relu, d_model 768 (alias hidden_size), do_layer_norm_before true, word_embed_proj_dim None
    # (→ d_model), enable_bias true, layer_norm_elementwise_affine true, dropout 0.1; tied
    hidden = c.integer(("hidden_size", "d_model"), 768)
    heads = c.integer("num_attention_heads", 12)
    proj = c.integer("word_embed_proj_dim", None, nullable=True)
    if proj is not None and proj != hidden:
        raise InputError(
            "config.json word_embed_proj_dim",
            proj,
            f"null or hidden_size ({hidden}): the project_in/project_out matrices "
            "have no ModelSpec form",
        )
    if not c.flag("layer_norm_elementwise_affine", True):
        raise InputError(
            "config.json layer_norm_elementwise_affine",
            False,
            "true (LayerNorms without weights have no ModelSpec form)",
        )
    bias = c.flag("enable_bias", True)
    pre_ln = c.flag("do_layer_norm_before", True)
    drop = max(c.prob("dropout", 0.1), c.prob("attention_dropout", 0.0))
    return {
        "n_layers": c.integer("num_hidden_layers", 12),
        "d_model": hidden,
        **_heads(c, hidden, heads, None, None),
        "ffn_dim": c.integer("ffn_dim", 3072),
        "ffn_type": _plain_ffn(c, "activation_function", "relu"),
        "vocab_size": c.integer("vocab_size", 50272),
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "position": PositionType.LEARNED,
        # OPTLearnedPositionalEmbedding keeps 2 rows ahead of position 0
        "max_positions": c.integer("max_position_embeddings", 2048) + 2,
        "norm": NormType.LAYERNORM,
        "final_norm": pre_ln and not c.flag("_remove_final_layer_norm", False),
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": bias,
        "dropout": drop > 0,
    }


def _falcon(c: _Config, new_arch_default: bool = False) -> dict:
    # FalconConfig: vocab 65024, hidden 4544 (old key n_embed), 32 layers (n_layer), 71 heads
    # (n_head), num_kv_heads None (old n_head_kv), alibi false, new_decoder_architecture false,
    # multi_query true, parallel_attn true, bias false, ffn_hidden_size None (→ 4·hidden),
    # activation gelu, num_ln_in_parallel_attn None (→ 2 with the new architecture); tied
    hidden = c.integer(("hidden_size", "n_embed"), 4544)
    heads = c.integer(("num_attention_heads", "n_head"), 71)
    old_kv = "n_head_kv" in c.data and "num_kv_heads" not in c.data
    kv_key = "n_head_kv" if old_kv else "num_kv_heads"
    kv_cfg = c.integer(("num_kv_heads", "n_head_kv"), None, nullable=True)
    new_arch = c.flag("new_decoder_architecture", new_arch_default)
    multi_query = c.flag("multi_query", True)
    parallel = c.flag("parallel_attn", True)
    if new_arch:
        kv = kv_cfg or heads
    else:
        kv = 1 if multi_query else heads  # the old decoder ignores num_kv_heads
    n_ln = c.integer("num_ln_in_parallel_attn", None, nullable=True)
    if n_ln is None and new_arch:
        n_ln = 2
    if n_ln not in (None, 1, 2):
        raise InputError("config.json num_ln_in_parallel_attn", n_ln, "1, 2 or null")
    bias = c.flag("bias", False)
    drop = max(c.prob("hidden_dropout", 0.0), c.prob("attention_dropout", 0.0))
    ffn = c.integer("ffn_hidden_size", None, nullable=True)
    return {
        "n_layers": c.integer(("num_hidden_layers", "n_layer"), 32),
        "d_model": hidden,
        **_heads(c, hidden, heads, kv, None, heads_key="num_attention_heads", kv_key=kv_key),
        "ffn_dim": ffn or 4 * hidden,
        "ffn_type": _plain_ffn(c, "activation", "gelu"),
        "vocab_size": c.integer("vocab_size", 65024),
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "position": PositionType.ALIBI if c.flag("alibi", False) else PositionType.ROTARY,
        "norm": NormType.LAYERNORM,
        # sequential block: input + post-attention LayerNorm; parallel block: ln_attn + ln_mlp when
        # num_ln_in_parallel_attn is 2, else a single input LayerNorm shared by both branches
        "norms_per_layer": 2 if (not parallel or n_ln == 2) else 1,
        "parallel_block": new_arch or parallel,
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": bias,
        "dropout": drop > 0,
    }


_FAMILIES: dict[str, tuple[str, Callable[[_Config], dict]]] = {
    "llama": ("LlamaConfig", _llama),
    "mistral": ("MistralConfig", _mistral),
    "mixtral": ("MixtralConfig", _mixtral),
    "qwen2": ("Qwen2Config", _qwen2),
    "qwen2_moe": ("Qwen2MoeConfig", _qwen2_moe),
    "gemma": ("GemmaConfig", _gemma),
    "gpt2": ("GPT2Config", _gpt2),
    "gpt_neox": ("GPTNeoXConfig", _gpt_neox),
    "bert": ("BertConfig", _bert),
    "opt": ("OPTConfig", _opt),
    "falcon": ("FalconConfig", _falcon),
    # Falcon's first Hub configs, before the port into transformers: 7B ("RefinedWebModel") and
    # 40B ("RefinedWeb", always the new decoder architecture)
    "RefinedWebModel": ("FalconConfig", _falcon),
    "RefinedWeb": ("FalconConfig", lambda c: _falcon(c, new_arch_default=True)),
    **RECENT_FAMILIES,
}
