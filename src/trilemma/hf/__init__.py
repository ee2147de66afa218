"""Models from a Hugging Face ``config.json`` on disk: no network, no ``transformers`` import.

``model_from_hf_config(path)`` reads the file, picks the family from ``model_type`` (or, when that
key is absent, from ``architectures``) and maps the family's keys onto a :class:`ModelSpec`.

A key the file leaves out takes the default of that family's Hugging Face config class, read from
``transformers/models/<family>/configuration_<family>.py``, so a file that relies on a default gives
the model ``from_pretrained`` would build. Keys the config class renames (``attribute_map``, e.g.
GPT-2's ``hidden_size`` → ``n_embd``, Falcon's old ``n_head_kv``) are read under both names. Per
family, the defaults that matter most:

========== ================================================================================
llama      RMSNorm, SwiGLU, rotary; untied; ``attention_bias`` (q, k, v, o) and ``mlp_bias``
           default false; ``num_key_value_heads`` defaults to ``num_attention_heads``.
mistral    as llama but no bias keys (never biases); ``num_key_value_heads`` defaults to 8.
mixtral    as mistral; every layer MoE: ``num_local_experts`` (8), ``num_experts_per_tok`` (2).
qwen2      as llama; q, k, v biased, o_proj not; ``num_key_value_heads`` defaults to 32.
qwen2_moe  as qwen2; routed experts of ``moe_intermediate_size``, one shared expert of
           ``shared_expert_intermediate_size`` (counted as that many routed-expert widths).
gemma      RMSNorm, GeGLU, rotary, ``head_dim`` 256; tied.
gpt2       LayerNorm, GELU, learned positions (``n_positions`` rows); tied; all biases;
           ``n_inner`` null → 4·``n_embd``.
gpt_neox   LayerNorm, GELU, rotary; untied; biases (``attention_bias`` true, MLP always);
           ``use_parallel_residual`` (true) → parallel attention/MLP block.
bert       BertModel: post-LN encoder, learned + token-type embeddings, embedding LayerNorm,
           pooler, no LM head; absolute positions only.
opt        LayerNorm, ReLU, learned positions with 2 extra rows (OPT's offset); tied.
falcon     LayerNorm, GELU, rotary or ALiBi; tied; one LayerNorm per parallel block (7B) or
           two (``new_decoder_architecture``, 40B/180B); multi-query or grouped KV heads.
gemma2     as gemma, four RMSNorms per layer; hidden 2304, 26 layers, 8/4 heads, head_dim 256.
gemma3     ``gemma3_text`` (1B) or ``gemma3`` with ``text_config`` (4B-27B; the vision tower is
           not counted): as gemma2 plus per-head q/k norms; vocab 262208.
qwen3      as llama, per-head q/k norms, ``head_dim`` 128; qwen3_moe: routed experts of
           ``moe_intermediate_size`` (128, 8 per token), no shared expert.
phi3       as llama (fused qkv_proj and gate_up_proj); vocab 32064; Phi-3.5-mini and Phi-4.
olmo2      as llama, norms after attention and MLP, q/k norms over all heads; vocab 50304.
========== ================================================================================

What a ModelSpec cannot hold is refused with an :class:`InputError` rather than guessed (OPT's
``word_embed_proj_dim`` ≠ hidden size, BERT's relative position embeddings, Qwen2-MoE
``mlp_only_layers`` other than a leading run). Qwen2-MoE's ``shared_expert_gate`` (a d×1 weight
per MoE layer) is ModelSpec's ``shared_expert_gate``.

``seq_len`` stays None: ``max_position_embeddings`` is the longest context the model accepts, not a
training default.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from trilemma.errors import InputError
from trilemma.fileio import CONFIG_MAX_BYTES, read_json
from trilemma.hf.config import _Config
from trilemma.hf.families import _FAMILIES
from trilemma.specs import ModelSpec

__all__ = ["SUPPORTED_MODEL_TYPES", "model_from_hf_config"]

#: model_type values model_from_hf_config understands
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(k for k in _FAMILIES if k.islower()))

# class names in ``architectures`` → model_type, used only when model_type is absent
_ARCH_TYPES = {
    "Qwen3Moe": "qwen3_moe",
    "Qwen3": "qwen3",
    "Gemma3": "gemma3_text",
    "Gemma2": "gemma2",
    "Phi3": "phi3",
    "Olmo2": "olmo2",
    "Llama": "llama",
    "Mistral": "mistral",
    "Mixtral": "mixtral",
    "Qwen2Moe": "qwen2_moe",
    "Qwen2": "qwen2",
    "Gemma": "gemma",
    "GPT2": "gpt2",
    "GPTNeoX": "gpt_neox",
    "Bert": "bert",
    "OPT": "opt",
    "Falcon": "falcon",
    "RW": "RefinedWebModel",
}
_ARCH_RE = re.compile(
    "^(" + "|".join(_ARCH_TYPES) + ")"
    r"(For[A-Za-z]+|LMHeadModel|DoubleHeadsModel|Model)$"
)


def _model_type(data: dict[str, Any]) -> str:
    allowed = "one of " + ", ".join(SUPPORTED_MODEL_TYPES)
    if "model_type" in data:
        mt = data["model_type"]
        if not isinstance(mt, str) or mt not in _FAMILIES:
            raise InputError("config.json model_type", mt, allowed)
        return mt
    archs = data.get("architectures")
    if isinstance(archs, list):
        for arch in archs:
            m = _ARCH_RE.match(arch) if isinstance(arch, str) else None
            if m:
                return _ARCH_TYPES[m.group(1)]
    raise InputError(
        "config.json model_type",
        "(missing)",
        allowed + " (or an architectures entry such as LlamaForCausalLM)",
    )


def _name(data: dict[str, Any], path: Path) -> str:
    hub = data.get("_name_or_path")
    local = isinstance(hub, str) and (hub.startswith(("/", ".", "~")) or ":" in hub)
    if isinstance(hub, str) and hub.strip() and not local:
        return hub.strip()
    return path.resolve().parent.name or "hf-model"


def _read(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = path / "config.json"
    if not os.path.exists(path):  # a FIFO or a device: read_json says what it is
        raise InputError(
            "config.json",
            str(path),
            "an existing file: a Hugging Face config.json or the folder holding one",
        )
    data = read_json(path, "config.json", what="config.json file", max_bytes=CONFIG_MAX_BYTES)
    if not isinstance(data, dict):
        raise InputError("config.json", type(data).__name__, "a JSON object of config keys")
    return data


def model_from_hf_config(path: str | Path) -> ModelSpec:
    """The ModelSpec of a Hugging Face ``config.json`` (or of the folder that holds one).

    Raises InputError naming the key, the value and what is allowed when the file is missing or
    not JSON, the family is unknown, a value has the wrong type, or the shape is one ModelSpec
    cannot hold.
    """
    path = Path(path).expanduser()
    data = _read(path)
    file = path / "config.json" if path.is_dir() else path
    model_type = _model_type(data)
    cls, build = _FAMILIES[model_type]
    config = _Config(data)
    config.integer(
        "max_position_embeddings", None, nullable=True
    )  # checked even where positions are rotary
    fields = build(config)
    name = _name(data, file)
    family = "falcon" if model_type.startswith("RefinedWeb") else model_type
    return ModelSpec.build(
        prefix=f"config.json ({name})",
        name=name,
        family=family,
        source=f"Hugging Face config.json ({cls} defaults for absent keys): {file}",
        **fields,
    )
