"""torchtitan's ``llama3`` model as the exporter writes it: the flavors torchtitan v0.2.2 ships, its
MLP width rule, the shapes it can express, and the module that registers any other shape as a
flavor (``experimental.custom_import``)."""

from __future__ import annotations

from typing import Any

from trilemma.export.escape import py_docstring_text
from trilemma.export.plan import ExportError
from trilemma.specs import ModelSpec
from trilemma.specs.enums import FfnType, NormType, PositionType

ENGINE = "torchtitan"
FLAVOR_MODULE = "trilemma_flavor"
FLAVOR = "trilemma"

# torchtitan v0.2.2 torchtitan/models/llama3/__init__.py llama3_args: the flavors it ships (vocabulary:
# TransformerModelArgs' default 128,256)
LLAMA3_FLAVORS = {
    "8B": dict(
        dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=1024
    ),
    "70B": dict(
        dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=4096
    ),
    "405B": dict(
        dim=16384, n_layers=126, n_heads=128, n_kv_heads=8, ffn_dim_multiplier=1.2, multiple_of=4096
    ),
}
LLAMA3_VOCAB = 128256


def feed_forward_hidden(dim: int, multiple_of: int, ffn_dim_multiplier: float | None) -> int:
    """torchtitan's SwiGLU width from its arguments (v0.2.2 torchtitan/models/llama3/model/model.py
    FeedForward.__init__, called with hidden_dim = 4·dim): int(2·4·dim/3), times the multiplier,
    rounded up to a multiple of ``multiple_of``."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def ffn_arguments(dim: int, ffn_dim: int) -> tuple[int, float | None]:
    """(multiple_of, ffn_dim_multiplier) that make torchtitan build an MLP of exactly ``ffn_dim``:
    Llama's own rule (multiple of 256, no multiplier) when it gives that width, else ``ffn_dim`` as
    the multiple with the multiplier that brings int(8·dim/3) to at most it."""
    for multiple in (256, ffn_dim):
        if feed_forward_hidden(dim, multiple, None) == ffn_dim:
            return multiple, None
    mult = ffn_dim / int(2 * (4 * dim) / 3)
    if (
        feed_forward_hidden(dim, ffn_dim, mult) != ffn_dim
    ):  # pragma: no cover - the rounding above cannot miss
        raise ExportError(ENGINE, "ffn_dim", ffn_dim, "torchtitan's width rule cannot produce it")
    return ffn_dim, mult


def check_model(m: ModelSpec) -> None:
    """torchtitan's llama3 model: causal, rotary, RMSNorm, SwiGLU, no biases, untied, dense."""
    checks = [
        (not m.causal, "an encoder (non-causal) model", "torchtitan's llama3 is a causal decoder"),
        (
            m.position != PositionType.ROTARY,
            f"position {m.position}",
            "torchtitan's llama3 uses rotary positions",
        ),
        (m.norm != NormType.RMSNORM, f"norm {m.norm}", "torchtitan's llama3 uses RMSNorm"),
        (m.ffn_type != FfnType.SWIGLU, f"ffn {m.ffn_type}", "torchtitan's llama3 MLP is SwiGLU"),
        (
            m.qkv_bias or m.out_bias or m.mlp_bias,
            "linear biases",
            "torchtitan's llama3 has no biases",
        ),
        (
            m.tied_embeddings,
            "tied embeddings",
            "torchtitan's llama3 has a separate output projection",
        ),
        (m.is_moe, f"{m.n_experts} experts", "the exporter writes torchtitan's dense llama3 model"),
        (
            m.is_mla,
            "multi-head latent attention",
            "torchtitan's llama3 attention is multi-head/GQA",
        ),
        (
            m.parallel_block or m.embedding_norm or not m.final_norm,
            "the block layout",
            "torchtitan's llama3 is a pre-norm sequential block with a final norm",
        ),
        (m.dropout, "dropout", "torchtitan's llama3 has no dropout"),
        (
            m.d_head * m.n_heads != m.d_model,
            f"head_dim {m.d_head}",
            "torchtitan's llama3 takes head_dim = dim / n_heads",
        ),
    ]
    for bad, feature, why in checks:
        if bad:
            raise ExportError(ENGINE, "model", f"{m.name} ({feature})", why)


def flavor_of(m: ModelSpec) -> tuple[str, dict[str, Any] | None]:
    """A shipped llama3 flavor with exactly this shape, or (FLAVOR, the arguments to register)."""
    for name, a in LLAMA3_FLAVORS.items():
        if (a["dim"], a["n_layers"], a["n_heads"], a["n_kv_heads"], LLAMA3_VOCAB) == (
            m.d_model,
            m.n_layers,
            m.n_heads,
            m.kv_heads,
            m.vocab_size,
        ) and feed_forward_hidden(a["dim"], a["multiple_of"], a["ffn_dim_multiplier"]) == m.ffn_dim:
            return name, None
    multiple, mult = ffn_arguments(m.d_model, m.ffn_dim)
    args = dict(
        dim=m.d_model,
        n_layers=m.n_layers,
        n_heads=m.n_heads,
        n_kv_heads=m.kv_heads,
        vocab_size=m.vocab_size,
        multiple_of=multiple,
        ffn_dim_multiplier=mult,
    )
    return FLAVOR, args


def flavor_module(m: ModelSpec, args: dict[str, Any]) -> str:
    kw = ",\n    ".join(f"{k}={v!r}" for k, v in args.items())
    return (
        f'"""trilemma export: {py_docstring_text(m.name)} as torchtitan llama3 flavor "{FLAVOR}" (imported through\n'
        f'[experimental] custom_import before the trainer looks the flavor up; torchtitan v0.2.2 train.py)."""\n\n'
        "from torchtitan.models.llama3 import TransformerModelArgs, llama3_args\n\n"
        f'llama3_args["{FLAVOR}"] = TransformerModelArgs(\n    {kw},\n)\n'
    )
