"""Reading a Hugging Face config: keys under their renamed aliases with the config class's defaults,
and the pieces every family shares (attention heads, the MLP type, the rotary decoder)."""

from __future__ import annotations

from typing import Any

from trilemma.errors import InputError
from trilemma.specs import FfnType, NormType, PositionType

_MISSING = object()

#: activations of a two-matrix MLP; trilemma counts the same tensors for any pointwise function,
#: so only ReLU (OPT) keeps its own FfnType and the rest are filed as GELU
_RELU_ACTS = {"relu", "relu6", "leaky_relu", "relu2"}
_OTHER_ACTS = {
    "gelu",
    "gelu_new",
    "gelu_fast",
    "gelu_python",
    "gelu_accurate",
    "gelu_pytorch_tanh",
    "gelu_10",
    "quick_gelu",
    "silu",
    "swish",
    "tanh",
    "mish",
}


#: keys a config must give (HF class defaults would silently describe another model)
_REQUIRED = frozenset({"hidden_size", "n_embd", "num_hidden_layers", "n_layer"})
#: the largest value any integer key may take (2^31 − 1: every real config's dimensions and counts are
#: far below; keeps the estimators' arithmetic finite), and tighter ones where the planner loops over it
_MAX_INT = 2**31 - 1
_MAXIMA = {"num_hidden_layers": 100_000, "n_layer": 100_000}


class _Config:
    """Typed reads from a parsed config.json; a bad value raises InputError naming its key."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def _get(self, keys: str | tuple[str, ...]) -> tuple[str, Any]:
        keys = (keys,) if isinstance(keys, str) else keys
        for key in keys:
            if key in self.data:
                return key, self.data[key]
        return keys[0], _MISSING

    def integer(
        self,
        keys: str | tuple[str, ...],
        default: int | None,
        *,
        minimum: int = 1,
        nullable: bool = False,
    ) -> Any:
        """An integer in [minimum, its key's maximum]; absent (or null where the HF default is None) →
        default, except the width and depth, which a config must give."""
        key, value = self._get(keys)
        if value is _MISSING and key in _REQUIRED:
            raise InputError(
                f"config.json {key}",
                None,
                "an integer ≥ 1: the file must give the model's "
                + ("width" if key in ("hidden_size", "n_embd", "d_model") else "depth"),
            )
        if value is _MISSING or (value is None and nullable):
            return default
        top = _MAXIMA.get(key, _MAX_INT)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= top:
            raise InputError(
                f"config.json {key}",
                value,
                f"an integer from {minimum} to {top:,}" + (" or null" if nullable else ""),
            )
        return value

    def flag(self, keys: str | tuple[str, ...], default: bool) -> bool:
        key, value = self._get(keys)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise InputError(f"config.json {key}", value, "true or false")
        return value

    def text(self, keys: str | tuple[str, ...], default: str) -> str:
        key, value = self._get(keys)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise InputError(f"config.json {key}", value, "a string")
        return value

    def prob(self, keys: str | tuple[str, ...], default: float) -> float:
        """A dropout probability in [0, 1]."""
        key, value = self._get(keys)
        if value is _MISSING or value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InputError(f"config.json {key}", value, "a probability between 0 and 1")
        return float(value)

    def int_list(self, key: str, default: list[int]) -> list[int]:
        _, value = self._get(key)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in value
        ):
            raise InputError(f"config.json {key}", value, "a list of layer indices (integers)")
        return value


# ---------------------------------------------------------------- shared pieces
def _heads(
    c: _Config,
    hidden: int,
    heads: int,
    kv: int | None,
    head_dim: int | None,
    heads_key: str = "num_attention_heads",
    kv_key: str = "num_key_value_heads",
) -> dict:
    """Attention head fields, with the divisibility the config class checks named by HF key."""
    kv = kv or heads
    if heads % kv:
        raise InputError(f"config.json {kv_key}", kv, f"a divisor of {heads_key} ({heads})")
    if head_dim is None and hidden % heads:
        raise InputError(
            f"config.json {heads_key}",
            heads,
            f"a divisor of hidden_size ({hidden}), or give head_dim",
        )
    if head_dim == hidden // heads and hidden % heads == 0:
        head_dim = None  # the default; keep the spec minimal
    return {"n_heads": heads, "n_kv_heads": kv if kv != heads else None, "head_dim": head_dim}


def _gated_ffn(c: _Config, keys: str | tuple[str, ...], default: str) -> FfnType:
    act = c.text(keys, default)
    if act in ("silu", "swish"):
        return FfnType.SWIGLU
    if act.startswith("gelu"):
        return FfnType.GEGLU
    key = keys if isinstance(keys, str) else next((k for k in keys if k in c.data), keys[0])
    raise InputError(
        f"config.json {key}",
        act,
        "silu or swish (SwiGLU) or a gelu variant (GeGLU) for this gated MLP",
    )


def _plain_ffn(c: _Config, keys: str | tuple[str, ...], default: str) -> FfnType:
    act = c.text(keys, default)
    if act in _RELU_ACTS:
        return FfnType.RELU
    if act in _OTHER_ACTS or act.startswith("gelu"):
        return FfnType.GELU
    key = keys if isinstance(keys, str) else next((k for k in keys if k in c.data), keys[0])
    raise InputError(
        f"config.json {key}",
        act,
        "an activation Hugging Face knows: " + ", ".join(sorted(_RELU_ACTS | _OTHER_ACTS)),
    )


def _rotary_decoder(
    c: _Config,
    *,
    vocab: int,
    hidden: int,
    inter: int,
    layers: int,
    heads: int,
    kv: int | None,
    head_dim: int | None = None,
    tie: bool,
    act: str,
    act_keys: str | tuple[str, ...] = "hidden_act",
    qkv_bias: bool,
    out_bias: bool,
    mlp_bias: bool,
) -> dict:
    """The Llama-shaped decoder (RMSNorm, gated MLP, rotary) shared by most modern families.

    ``head_dim`` is the class default (None: hidden_size / num_attention_heads); a head_dim key
    in the file is honoured for every family, as the current modeling code does.
    """
    hidden = c.integer("hidden_size", hidden)
    heads = c.integer("num_attention_heads", heads)
    kv = c.integer("num_key_value_heads", kv, nullable=True)
    hd = c.integer("head_dim", head_dim, nullable=True)
    return {
        "n_layers": c.integer("num_hidden_layers", layers),
        "d_model": hidden,
        **_heads(c, hidden, heads, kv, hd),
        "ffn_dim": c.integer("intermediate_size", inter),
        "ffn_type": _gated_ffn(c, act_keys, act),
        "vocab_size": c.integer("vocab_size", vocab),
        "tied_embeddings": c.flag("tie_word_embeddings", tie),
        "position": PositionType.ROTARY,
        "norm": NormType.RMSNORM,
        "qkv_bias": qkv_bias,
        "out_bias": out_bias,
        "mlp_bias": mlp_bias,
        "dropout": c.prob("attention_dropout", 0.0) > 0,
    }


def _routed_experts(
    c: _Config, fields: dict, *, experts: int, top_k: int, moe_ffn: int
) -> dict | None:
    """The routed-expert fields of a Qwen-style MoE config (Qwen2-MoE, Qwen3-MoE); None when no
    layer is sparse. Layer i is sparse when (i + 1) % decoder_sparse_step == 0 and i is not in
    mlp_only_layers; only a leading run of dense layers has a ModelSpec form."""
    layers = fields["n_layers"]
    n = c.integer("num_experts", experts, minimum=0)
    step = c.integer("decoder_sparse_step", 1)
    dense_only = c.int_list("mlp_only_layers", [])
    if n == 0 or step > layers:
        return None
    k = c.integer("num_experts_per_tok", top_k)
    if k > n:
        raise InputError("config.json num_experts_per_tok", k, f"between 1 and num_experts ({n})")
    first_dense = step - 1
    if dense_only:
        leading = sorted(dense_only) == list(range(len(dense_only)))
        if step != 1 or not leading or len(dense_only) >= layers:
            raise InputError(
                "config.json mlp_only_layers",
                dense_only,
                "[] or a leading run [0, 1, …, k-1] shorter than num_hidden_layers "
                "with decoder_sparse_step 1 (other patterns have no ModelSpec form)",
            )
        first_dense = len(dense_only)
    return {
        "n_experts": n,
        "top_k": k,
        "expert_ffn_dim": c.integer("moe_intermediate_size", moe_ffn),
        "moe_every": step,
        "first_dense_layers": first_dense,
    }
