"""Megatron-LM's flags for the layers beyond a Llama-shaped block: multi-head latent attention and
mixture-of-experts. Names: NVIDIA/Megatron-LM commit d98e8a64 (megatron/training/arguments.py, the MLA
fields from megatron-core's MLATransformerConfig: q_lora_rank, kv_lora_rank, qk_head_dim,
qk_pos_emb_head_dim, v_head_dim; tests/data/megatron_lm_args.tsv)."""

from __future__ import annotations

from typing import Any

from trilemma.export.plan import ExportError
from trilemma.specs import ModelSpec

ENGINE = "megatron"
Arg = tuple[str, Any]  # (flag, value); value None for a switch


def mla_args(m: ModelSpec) -> list[Arg]:
    """Multi-head latent attention: the latent ranks (no --q-lora-rank: a full query projection, as
    megatron-core reads q_lora_rank None), the non-rotary query/key and value head widths and the
    decoupled rotary width (qk_head_dim + qk_pos_emb_head_dim is the query's head width)."""
    if not m.is_mla:
        return []
    a: list[Arg] = [
        ("--multi-latent-attention", None),
        ("--kv-lora-rank", m.kv_lora_rank),
        ("--qk-head-dim", m.d_head),
        ("--qk-pos-emb-head-dim", m.qk_rope_head_dim),
        ("--v-head-dim", m.d_head),
    ]
    return a + ([("--q-lora-rank", m.q_lora_rank)] if m.q_lora_rank else [])


def moe_args(m: ModelSpec) -> list[Arg]:
    """Experts, top-k and expert width, every layer an MoE layer (with shared experts)."""
    if not m.is_moe:
        return []
    if m.moe_every != 1 or m.first_dense_layers or m.shared_expert_gate:
        raise ExportError(
            ENGINE,
            "MoE layout",
            m.name,
            "the exporter writes every layer as MoE without a "
            "shared-expert gate (--moe-layer-freq patterns are not exported)",
        )
    a: list[Arg] = [
        ("--num-experts", m.n_experts),
        ("--moe-router-topk", m.top_k),
        ("--moe-ffn-hidden-size", m.expert_ffn),
    ]
    if m.n_shared_experts:
        a.append(("--moe-shared-expert-intermediate-size", m.n_shared_experts * m.expert_ffn))
    return a


__all__ = ["mla_args", "moe_args"]
