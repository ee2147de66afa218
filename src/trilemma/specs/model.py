"""ModelSpec: the shape of a Transformer (decoder-only GPT/Llama-style or encoder-only BERT-style).

Only architecture lives here: no parallelism, no hardware, no batch. Published training defaults
(sequence length, global batch) ride along as metadata because presets use them as defaults.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from trilemma.specs.base import Spec
from trilemma.specs.enums import FfnType, NormType, PositionType, QkNorm


class ModelSpec(Spec):
    """A Transformer's shape. Dimensions are element counts; lengths in tokens."""

    name: str = "custom"
    family: str = "custom"
    causal: bool = Field(
        True, description="decoder-only (causal LM) if true, encoder (BERT) if false"
    )

    n_layers: int = Field(gt=0)
    d_model: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    n_kv_heads: int | None = Field(
        None, gt=0, description="key/value heads (GQA/MQA); default n_heads"
    )
    head_dim: int | None = Field(None, gt=0, description="default d_model / n_heads")
    ffn_dim: int = Field(gt=0, description="hidden width of the (dense) MLP")
    ffn_type: FfnType = FfnType.GELU
    vocab_size: int = Field(gt=0)
    tied_embeddings: bool = True

    position: PositionType = PositionType.LEARNED
    max_positions: int = Field(2048, gt=0, description="rows of a learned position table")
    type_vocab_size: int = Field(0, ge=0, description="BERT token-type embeddings (2 for BERT)")

    norm: NormType = NormType.LAYERNORM
    norms_per_layer: int = Field(
        2,
        ge=1,
        le=4,
        description="d-wide norms per layer: 1 shared (parallel block), 2, or 4 (Gemma 2/3: a norm "
        "before and after attention and before and after the MLP)",
    )
    qk_norm: QkNorm = Field(
        QkNorm.NONE,
        description="norm on queries and keys: per head (Qwen3, Gemma 3) or over all heads (OLMo 2)",
    )
    embedding_norm: bool = Field(
        False, description="a norm right after the embeddings (BERT, BLOOM)"
    )
    final_norm: bool = True
    pooler: bool = Field(
        False, description="BERT pooler d×d + d (counted in BertModel's parameters)"
    )
    qkv_bias: bool = True
    out_bias: bool = True
    mlp_bias: bool = True
    parallel_block: bool = Field(
        False, description="attention and MLP read the same input (GPT-J/NeoX)"
    )
    dropout: bool = Field(
        False, description="trained with dropout (adds mask tensors to activations)"
    )

    # Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1; DeepSeek-V3, arXiv 2412.19437 §2.1.1):
    # keys and values are up-projected from a kv_lora_rank-wide latent (the only thing an inference cache
    # keeps, with the decoupled rotary key), queries from a q_lora_rank-wide one (0: a full d×d_qk
    # projection); each head's query and key carry qk_rope_head_dim rotary dimensions on top of head_dim
    # (the non-rotary query/key and value width, DeepSeek-V3's qk_nope_head_dim = v_head_dim = 128)
    kv_lora_rank: int = Field(0, ge=0, description="MLA's key-value latent width; 0 = not MLA")
    q_lora_rank: int = Field(0, ge=0, description="MLA's query latent width; 0 = no query latent")
    qk_rope_head_dim: int = Field(0, ge=0, description="MLA's decoupled rotary width per head")

    # Mixture of experts (Shazeer 2017; Fedus 2021; Jiang 2024 Mixtral)
    n_experts: int = Field(0, ge=0, description="routed experts per MoE layer; 0 = dense")
    top_k: int = Field(0, ge=0, description="experts each token is routed to")
    n_shared_experts: int = Field(0, ge=0)
    shared_expert_gate: bool = Field(
        False, description="a d×1 sigmoid gate on the shared experts (Qwen2-MoE)"
    )
    expert_ffn_dim: int | None = Field(None, gt=0, description="default ffn_dim")
    moe_every: int = Field(1, ge=1, description="every k-th layer is MoE")
    first_dense_layers: int = Field(0, ge=0)

    # published training recipe (defaults for this model; not architecture)
    seq_len: int | None = Field(
        None, gt=0, description="published training sequence length, tokens"
    )
    global_batch_tokens: float | None = Field(
        None, gt=0, description="published global batch, tokens"
    )
    tokens: float | None = Field(None, gt=0, description="published training tokens")
    source: str = ""
    aliases: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        kv = self.kv_heads
        if self.n_heads % kv:
            raise ValueError(f"n_kv_heads={kv}: a divisor of n_heads ({self.n_heads})")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads={self.n_heads}: a divisor of d_model ({self.d_model}), or give head_dim"
            )
        if self.n_experts:
            if not 1 <= self.top_k <= self.n_experts:
                raise ValueError(f"top_k={self.top_k}: between 1 and n_experts ({self.n_experts})")
        if (self.q_lora_rank or self.qk_rope_head_dim) and not self.is_mla:
            raise ValueError("q_lora_rank / qk_rope_head_dim: only with kv_lora_rank > 0 (MLA)")
        if self.is_mla and self.kv_heads != self.n_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads}: MLA decompresses a key per head")
            if self.first_dense_layers >= self.n_layers:
                raise ValueError(
                    f"first_dense_layers={self.first_dense_layers}: fewer than n_layers ({self.n_layers})"
                )
        return self

    # ------------------------------------------------------------ derived dimensions
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def d_attn(self) -> int:
        """Width of the concatenated query heads, n_heads × head_dim."""
        return self.n_heads * self.d_head

    @property
    def d_kv(self) -> int:
        """Width of the concatenated key (or value) heads, n_kv_heads × head_dim."""
        return self.kv_heads * self.d_head

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (kv_lora_rank > 0)."""
        return self.kv_lora_rank > 0

    @property
    def d_qk(self) -> int:
        """Width of the concatenated query (and, decompressed, key) heads: n_heads × (head_dim +
        qk_rope_head_dim); d_attn without MLA."""
        return self.n_heads * (self.d_head + self.qk_rope_head_dim)

    @property
    def attn_core_width(self) -> float:
        """The attention core's mean width: QKᵀ contracts over d_qk, softmax·V over d_attn, so its
        forward is 2·s·(d_qk + d_attn) = 4·s·attn_core_width FLOPs per token and layer."""
        return (self.d_qk + self.d_attn) / 2

    @property
    def kv_cache_width(self) -> int:
        """Elements per token and layer an inference KV cache keeps: K and V (2·d_kv), or MLA's latent
        and decoupled rotary key (kv_lora_rank + qk_rope_head_dim, DeepSeek-V2 §2.1.2)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else 2 * self.d_kv

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def n_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        return len(
            [
                i
                for i in range(self.first_dense_layers, self.n_layers)
                if (i - self.first_dense_layers) % self.moe_every == 0
            ]
        )

    @property
    def n_dense_layers(self) -> int:
        return self.n_layers - self.n_moe_layers

    @property
    def expert_ffn(self) -> int:
        return self.expert_ffn_dim or self.ffn_dim

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices in one MLP: 3 for gated (SwiGLU/GeGLU), 2 otherwise."""
        return 3 if self.ffn_type in (FfnType.SWIGLU, FfnType.GEGLU) else 2
