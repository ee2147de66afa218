"""A real PyTorch Transformer built from a :class:`~trilemma.specs.ModelSpec`.

The planner counts parameters as an inventory (``trilemma.estimate.params``); this module builds
the same inventory as tensors, so ``sum(p.numel())`` equals ``param_counts(spec).total`` for
every preset (checked on the ``meta`` device in ``tests/test_probe.py``). One module covers what
ModelSpec can describe:

- decoder-only, pre-norm: GPT-2 (learned positions, LayerNorm, GELU; Radford 2019), Llama
  (RoPE, RMSNorm, SwiGLU, GQA; Touvron 2023), parallel attention/MLP blocks with one or two
  norms (GPT-J, NeoX, Falcon), ALiBi (Press 2022; BLOOM), Transformer-XL relative positions
  (Dai 2019 §3.3; Gopher, Chinchilla), mixture of experts (Mixtral; Qwen2-MoE's shared experts
  and their sigmoid gate);
- encoder-only, post-norm: BERT (Devlin 2019: token-type embeddings, embedding LayerNorm,
  pooler, MLM decoder tied to the word embeddings). ModelSpec has no pre/post-norm field:
  ``causal=False`` is read as BERT's post-norm encoder.

Attention runs through ``torch.nn.functional.scaled_dot_product_attention``; ALiBi and relative
positions enter it as an additive float mask. MoE experts run as a plain loop over experts.

Tensors per layer (d = d_model, a = n_heads·head_dim, k = n_kv_heads·head_dim, f = ffn_dim):
  norm1, norm2        (d,) weight [+ (d,) bias for LayerNorm]; one shared norm if norms_per_layer == 1
  post_attn, post_mlp (d,) each when norms_per_layer == 4 (Gemma 2/3 sandwich norms)
  attn.q_norm, k_norm (head_dim,) each, or (a,) and (k,) over all heads, when the spec has qk_norm
  attn.qkv            (a + 2k, d) [+ bias]       Q, K and V fused in one GEMM
  attn.out            (d, a) [+ bias]
  attn.w_r, u, v      (a, d), (h, head_dim) × 2   relative positions only
  mlp.up              (2f, d) gated (gate and up fused) or (f, d) [+ bias]
  mlp.down            (d, f) [+ bias]
  moe.router          (E, d); experts E × MLP(expert_ffn); shared experts; shared gate (1, d)
Outside the layers: wte (V, d); wpe (max_positions, d) for learned positions; wtt (types, d);
embedding norm; final norm; head (V, d) unless tied; pooler (d, d) + (d,).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trilemma.probe.norm_rope import apply_rope, make_norm, rope_tables
from trilemma.specs import FfnType, ModelSpec, PositionType, QkNorm

__all__ = ["Transformer", "build_model", "init_weights", "is_moe_layer"]

_DROPOUT = 0.1  # residual and embedding dropout when the spec says the model trained with dropout


def is_moe_layer(m: ModelSpec, i: int) -> bool:
    """Same rule as ModelSpec.n_moe_layers: every moe_every-th layer after the leading dense ones."""
    return m.is_moe and i >= m.first_dense_layers and (i - m.first_dense_layers) % m.moe_every == 0


# ------------------------------------------------------------------ positions


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head slopes of Press et al. 2022 (geometric, interpolated when n_heads is not a power of 2)."""

    def pow2(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        s = pow2(n_heads)
    else:
        c = 2 ** math.floor(math.log2(n_heads))
        s = pow2(c) + pow2(2 * c)[0::2][: n_heads - c]
    return torch.tensor(s)


def sinusoid(positions: torch.Tensor, d: int) -> torch.Tensor:
    """Vaswani 2017 sinusoids for (possibly negative) relative distances: (n,) -> (n, d)."""
    inv = 1.0 / (
        10000.0 ** (torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d)
    )
    ang = torch.outer(positions.float(), inv)
    return torch.cat([ang.sin(), ang.cos()], dim=-1)[:, :d]


# ------------------------------------------------------------------ blocks


class Attention(nn.Module):
    def __init__(self, m: ModelSpec) -> None:
        super().__init__()
        self.h, self.h_kv, self.dh = m.n_heads, m.kv_heads, m.d_head
        self.d_attn, self.d_kv = m.d_attn, m.d_kv
        self.causal, self.position = m.causal, m.position
        self.qkv = nn.Linear(m.d_model, m.d_attn + 2 * m.d_kv, bias=m.qkv_bias)
        self.out = nn.Linear(m.d_attn, m.d_model, bias=m.out_bias)
        self.qk_norm = m.qk_norm
        if m.qk_norm != QkNorm.NONE:  # Qwen3 / Gemma 3: over head_dim; OLMo 2: over all heads
            head = m.qk_norm == QkNorm.HEAD
            self.q_norm = make_norm(m, m.d_head if head else m.d_attn)
            self.k_norm = make_norm(m, m.d_head if head else m.d_kv)
        if m.position == PositionType.RELATIVE:
            # Transformer-XL (Dai 2019 §3.3): W_R projects sinusoids of the distance; u, v are the
            # content and position biases shared across positions.
            self.w_r = nn.Linear(m.d_model, m.d_attn, bias=False)
            self.u = nn.Parameter(torch.zeros(m.n_heads, m.d_head))
            self.v = nn.Parameter(torch.zeros(m.n_heads, m.d_head))
        if m.position == PositionType.ALIBI:
            self.register_buffer("slopes", alibi_slopes(m.n_heads), persistent=False)

    def _mask(self, S: int, device: torch.device) -> torch.Tensor:
        """(S, S) additive mask: 0 where a query may look, -inf where the causal mask forbids."""
        allowed = torch.ones(S, S, dtype=torch.bool, device=device)
        if self.causal:
            allowed = allowed.tril()
        return torch.zeros(S, S, device=device).masked_fill(~allowed, float("-inf"))

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None
    ) -> torch.Tensor:
        B, S, _ = x.shape
        q, k, v = self.qkv(x).split([self.d_attn, self.d_kv, self.d_kv], dim=-1)
        if self.qk_norm == QkNorm.FULL:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, S, self.h, self.dh).transpose(1, 2)  # (B, H, S, Dh)
        k = k.view(B, S, self.h_kv, self.dh).transpose(1, 2)  # (B, Hkv, S, Dh)
        v = v.view(B, S, self.h_kv, self.dh).transpose(1, 2)  # (B, Hkv, S, Dh)
        if self.qk_norm == QkNorm.HEAD:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if self.h_kv != self.h:  # GQA / MQA: each K, V head serves h / h_kv query heads
            k = k.repeat_interleave(self.h // self.h_kv, dim=1)  # (B, H, S, Dh)
            v = v.repeat_interleave(self.h // self.h_kv, dim=1)
        bias = None
        if self.position == PositionType.ALIBI:
            i = torch.arange(S, device=x.device)
            dist = (i[:, None] - i[None, :]).abs().float()  # (S, S)
            bias = (-self.slopes.to(x.device)[:, None, None] * dist + self._mask(S, x.device)).to(
                q.dtype
            )  # (H, S, S)
        elif self.position == PositionType.RELATIVE:
            i = torch.arange(S, device=x.device)
            rel = torch.arange(
                S - 1, -S, -1, device=x.device
            )  # distances i - j from S-1 down to -(S-1)
            r = self.w_r(sinusoid(rel, self.w_r.in_features).to(x.dtype))  # (2S-1, a)
            r = r.view(2 * S - 1, self.h, self.dh).transpose(0, 1)  # (H, 2S-1, Dh)
            bd = torch.einsum(
                "bhid,hrd->bhir", q + self.v[:, None, :].to(q.dtype), r
            )  # (B, H, S, 2S-1)
            idx = (S - 1) - (i[:, None] - i[None, :])  # column of distance i - j in rel
            bd = bd.gather(-1, idx.expand(B, self.h, S, S))  # (B, H, S, S)
            bias = (bd / math.sqrt(self.dh) + self._mask(S, x.device)).to(q.dtype)
            q = q + self.u[:, None, :].to(q.dtype)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, is_causal=self.causal and bias is None
        )
        y = y.transpose(1, 2).reshape(B, S, self.d_attn)  # (B, S, a)
        return self.out(y)


class MLP(nn.Module):
    def __init__(self, m: ModelSpec, f: int) -> None:
        super().__init__()
        self.gated = m.ffn_matrices == 3
        self.kind = m.ffn_type
        self.up = nn.Linear(
            m.d_model, (2 if self.gated else 1) * f, bias=m.mlp_bias
        )  # gate and up fused
        self.down = nn.Linear(f, m.d_model, bias=m.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)  # (..., f) or (..., 2f)
        if self.gated:
            g, u = h.chunk(2, dim=-1)
            h = (F.silu(g) if self.kind == FfnType.SWIGLU else F.gelu(g, approximate="tanh")) * u
        else:
            h = F.relu(h) if self.kind == FfnType.RELU else F.gelu(h, approximate="tanh")
        return self.down(h)


class MoE(nn.Module):
    """Top-k routed experts (Shazeer 2017; Mixtral: softmax over the top-k logits), plus shared
    experts (DeepSeek/Qwen2-MoE) with an optional sigmoid gate. A loop over experts: simple, and
    each expert's GEMM sees only its tokens, as in the planner's time model."""

    def __init__(self, m: ModelSpec) -> None:
        super().__init__()
        self.top_k = m.top_k
        self.router = nn.Linear(m.d_model, m.n_experts, bias=False)
        self.experts = nn.ModuleList(MLP(m, m.expert_ffn) for _ in range(m.n_experts))
        self.shared = nn.ModuleList(MLP(m, m.expert_ffn) for _ in range(m.n_shared_experts))
        self.shared_gate = nn.Linear(m.d_model, 1, bias=False) if m.shared_expert_gate else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (T, d)
        w, idx = self.router(flat).topk(self.top_k, dim=-1)  # (T, k)
        w = w.float().softmax(dim=-1).type_as(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * w[rows, slot, None])
        if len(self.shared):
            s = sum(mlp(flat) for mlp in self.shared)
            out = out + (
                s * torch.sigmoid(self.shared_gate(flat)) if self.shared_gate is not None else s
            )
        return out.view(shape)


class Block(nn.Module):
    def __init__(self, m: ModelSpec, moe: bool) -> None:
        super().__init__()
        self.norm1 = make_norm(m)
        self.norm2 = make_norm(m) if m.norms_per_layer >= 2 else None
        sandwich = m.norms_per_layer == 4  # Gemma 2/3: each sub-block's output normed too
        self.post_attn = make_norm(m) if sandwich else nn.Identity()
        self.post_mlp = make_norm(m) if sandwich else nn.Identity()
        if (
            m.is_mla
        ):  # DeepSeek-V3's latent attention (its own module: it imports this one's helpers)
            from trilemma.probe.mla import LatentAttention

            self.attn: nn.Module = LatentAttention(m)
        else:
            self.attn = Attention(m)
        self.mlp = MoE(m) if moe else MLP(m, m.ffn_dim)
        self.post_norm = not m.causal  # BERT
        self.parallel = m.parallel_block
        self.drop = nn.Dropout(_DROPOUT) if m.dropout else nn.Identity()

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        if self.post_norm:  # x = LN(x + attn(x)); x = LN(x + mlp(x))   (Devlin 2019; Vaswani 2017)
            x = self.norm1(x + self.drop(self.attn(x, rope)))
            y = x + self.drop(self.mlp(x))
            return self.norm2(y) if self.norm2 is not None else y
        if self.parallel:  # x + attn(n1(x)) + mlp(n2(x)), one shared norm when norms_per_layer == 1
            h1 = self.norm1(x)
            h2 = self.norm2(x) if self.norm2 is not None else h1
            return x + self.drop(self.attn(h1, rope)) + self.drop(self.mlp(h2))
        x = x + self.drop(self.post_attn(self.attn(self.norm1(x), rope)))
        h = self.norm2(x) if self.norm2 is not None else x
        return x + self.drop(self.post_mlp(self.mlp(h)))


class Transformer(nn.Module):
    """Token ids (B, S) -> logits (B, S, V). ``recompute`` checkpoints every layer (full recompute)."""

    def __init__(self, m: ModelSpec, recompute: bool = False) -> None:
        super().__init__()
        self.spec, self.recompute = m, recompute
        d = m.d_model
        self.wte = nn.Embedding(m.vocab_size, d)
        self.wpe = nn.Embedding(m.max_positions, d) if m.position == PositionType.LEARNED else None
        self.wtt = nn.Embedding(m.type_vocab_size, d) if m.type_vocab_size else None
        self.emb_norm = make_norm(m) if m.embedding_norm else None
        self.drop = nn.Dropout(_DROPOUT) if m.dropout else nn.Identity()
        self.blocks = nn.ModuleList(Block(m, is_moe_layer(m, i)) for i in range(m.n_layers))
        self.final_norm = make_norm(m) if m.final_norm else None
        self.head = None if m.tied_embeddings else nn.Linear(d, m.vocab_size, bias=False)
        self.pooler = (
            nn.Linear(d, d) if m.pooler else None
        )  # BertModel's pooler: counted, not in the loss

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        _B, S = idx.shape
        x = self.wte(idx)  # (B, S, d)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(S, device=idx.device))
        if self.wtt is not None:  # one segment: every token is type 0
            x = x + self.wtt.weight[0]
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        x = self.drop(x)
        rope = (
            rope_tables(S, self.spec.d_head, idx.device, x.dtype)
            if self.spec.position == PositionType.ROTARY
            else None
        )
        for block in self.blocks:
            if self.recompute and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, rope, use_reentrant=False)
            else:
                x = block(x, rope)
        if self.final_norm is not None:
            x = self.final_norm(x)
        w = self.wte.weight if self.head is None else self.head.weight
        return F.linear(x, w)  # (B, S, V)


def init_weights(model: Transformer) -> None:
    """GPT-2 initialisation (Radford 2019 §2.3): N(0, 0.02), residual projections scaled by
    1/sqrt(2·layers); zero biases; norm weights (the only 1-D weights) at one."""
    std = 0.02
    resid = std / math.sqrt(2 * model.spec.n_layers)
    for name, p in model.named_parameters():
        if p.dim() < 2:
            (nn.init.ones_ if name.endswith("weight") else nn.init.zeros_)(p)
        elif name.endswith(("attn.out.weight", "down.weight")):
            nn.init.normal_(p, 0.0, resid)
        else:
            nn.init.normal_(p, 0.0, std)


def build_model(
    m: ModelSpec, device: str | torch.device = "cpu", recompute: bool = False, init: bool = True
) -> Transformer:
    """The model on ``device``. On ``meta`` nothing is allocated (used to count parameters)."""
    with torch.device(device):
        model = Transformer(m, recompute=recompute)
    if init and str(device) != "meta":
        with torch.no_grad():
            init_weights(model)
    return model
