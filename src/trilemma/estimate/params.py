"""Parameter counts as an inventory of tensors (llm.c style): one line per tensor, with its shape.

Counts are exact for the architectures described by ModelSpec; they are checked against the
released models' own counts in ``tests/test_params.py`` (Llama-2-7B 6,738,415,616; GPT-2
124,439,808; BERT-base-uncased 109,482,240; Mixtral-8x7B 46,702,792,704 total).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from trilemma.specs import ModelSpec, NormType, PositionType, QkNorm


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (elements, not bytes)."""

    total: int
    active: int  # used per token: MoE counts top_k routed + shared experts
    embedding: (
        int  # token (+ position, + type) embeddings, and the LM head when untied (Kaplan 2020 §2.1)
    )
    non_embedding: int
    per_dense_layer: int
    per_moe_layer_shared: (
        int  # MoE layer minus its routed experts (attention, norms, router, shared experts)
    )
    per_expert: int  # one routed expert's MLP
    first_stage_extra: int  # embeddings (+ embedding norm) held by the first pipeline stage
    last_stage_extra: int  # final norm, LM head (a copy when tied and PP > 1), pooler
    matmul_active: int  # weights of matmuls a token goes through, LM head included (for FLOPs)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _norm(m: ModelSpec) -> int:
    # LayerNorm: weight + bias (2d); RMSNorm: weight (d)
    return 2 * m.d_model if m.norm == NormType.LAYERNORM else m.d_model


def mlp_params(m: ModelSpec, f: int) -> int:
    """One MLP of hidden width f: gated → gate, up (d×f) and down (f×d); else up and down."""
    d, k = m.d_model, m.ffn_matrices
    weights = k * d * f
    biases = ((k - 1) * f + d) if m.mlp_bias else 0
    return weights + biases


def attention_params(m: ModelSpec) -> int:
    """Q: d×d_attn, K and V: d×d_kv each, O: d_attn×d, plus biases and relative-position weights; MLA's
    projections (mla_matmul_params) and its two latent RMSNorms."""
    d = m.d_model
    if m.is_mla:
        return mla_matmul_params(m) + m.q_lora_rank + m.kv_lora_rank
    w = d * m.d_attn + 2 * d * m.d_kv + m.d_attn * d
    b = (m.d_attn + 2 * m.d_kv if m.qkv_bias else 0) + (d if m.out_bias else 0)
    # Transformer-XL relative encoding (Dai et al. 2019 §3.3), as in Gopher/Chinchilla:
    # a position projection W_R (d×d_attn) and the u, v biases (d_attn each) per layer.
    rel = d * m.d_attn + 2 * m.d_attn if m.position == PositionType.RELATIVE else 0
    return w + b + rel + qk_norm_params(m)


def qk_norm_params(m: ModelSpec) -> int:
    """Weights of the query and key norms in one layer: 2·head_dim per head-wise pair (one weight
    shared by every head), d_attn + d_kv over all heads; with LayerNorm, a bias as long again."""
    per = {QkNorm.NONE: 0, QkNorm.HEAD: 2 * m.d_head, QkNorm.FULL: m.d_attn + m.d_kv}[m.qk_norm]
    return per * (2 if m.norm == NormType.LAYERNORM else 1)


def attention_matmul_params(m: ModelSpec) -> int:
    """Weights of the attention matmuls (Q, K, V, O), which every token multiplies through."""
    if m.is_mla:
        return mla_matmul_params(m)
    return 2 * m.d_model * m.d_attn + 2 * m.d_model * m.d_kv


def mla_matmul_params(m: ModelSpec) -> int:
    """Multi-head latent attention's weights (DeepSeek-V3, arXiv 2412.19437 §2.1.1, Eqs. 1-11): the query
    down- and up-projections d×q_lora and q_lora×d_qk (or d×d_qk without a query latent), the joint key-value
    down-projection with the decoupled rotary key d×(kv_lora + rope), the key and value up-projections
    kv_lora×(n_heads·head_dim) each, and the output projection d_attn×d."""
    d, q = m.d_model, m.q_lora_rank
    query = d * q + q * m.d_qk if q else d * m.d_qk
    kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * 2 * m.d_attn
    return query + kv + m.d_attn * d


def param_counts(m: ModelSpec) -> ParamCounts:
    d, V = m.d_model, m.vocab_size
    norms = m.norms_per_layer * _norm(m)
    attn = attention_params(m)
    dense_layer = attn + norms + mlp_params(m, m.ffn_dim)

    per_expert = mlp_params(m, m.expert_ffn) if m.is_moe else 0
    router = d * m.n_experts  # gate: d × n_experts, no bias (Mixtral, Switch)
    gate = d if m.shared_expert_gate else 0  # Qwen2-MoE: Linear(d, 1) scaling the shared experts
    moe_shared = attn + norms + router + gate + m.n_shared_experts * per_expert if m.is_moe else 0
    n_moe, n_dense = m.n_moe_layers, m.n_dense_layers

    tok = V * d  # token embedding table
    pos = m.max_positions * d if m.position == PositionType.LEARNED else 0
    typ = m.type_vocab_size * d
    emb_norm = _norm(m) if m.embedding_norm else 0
    head = 0 if m.tied_embeddings else V * d
    final = _norm(m) if m.final_norm else 0
    pooler = d * d + d if m.pooler else 0

    layers_total = n_dense * dense_layer + n_moe * (moe_shared + m.n_experts * per_expert)
    layers_active = n_dense * dense_layer + n_moe * (moe_shared + m.top_k * per_expert)
    outer = tok + pos + typ + emb_norm + head + final + pooler
    embedding = tok + pos + typ + head

    # matmuls per token: attention projections, MLPs actually used, router, LM head (tied or not:
    # a tied head still costs a V×d matmul — torchtitan flops comment), pooler
    mlp_dense = m.ffn_matrices * d * m.ffn_dim
    mlp_expert = m.ffn_matrices * d * m.expert_ffn
    matmul = (
        m.n_layers * attention_matmul_params(m)
        + n_dense * mlp_dense
        + n_moe * (router + (m.top_k + m.n_shared_experts) * mlp_expert)
        + V * d
        + (d * d if m.pooler else 0)
    )
    if m.position == PositionType.RELATIVE:
        matmul += m.n_layers * d * m.d_attn

    return ParamCounts(
        total=layers_total + outer,
        active=layers_active + outer,
        embedding=embedding,
        non_embedding=layers_total + outer - embedding,
        per_dense_layer=dense_layer,
        per_moe_layer_shared=moe_shared,
        per_expert=per_expert,
        first_stage_extra=tok + pos + typ + emb_norm,
        last_stage_extra=final + pooler + V * d * (0 if m.tied_embeddings else 1),
        matmul_active=matmul,
    )
