"""Multi-head latent attention as a torch module (DeepSeek-V3, arXiv 2412.19437 §2.1.1, Eqs. 1-11), the
tensors trilemma.estimate.params.mla_matmul_params counts: queries from a q_lora_rank latent (or a full
projection), keys and values up-projected from a kv_lora_rank latent, each head's query and key extended by
qk_rope_head_dim rotary dimensions (the key's shared by all heads), values head_dim wide.

The probe does not train it (trilemma.probe.inputs refuses an MLA model: no step time of it is calibrated);
it is built so that the model's parameter count is the planner's (tests/test_probe.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trilemma.probe.norm_rope import apply_rope, make_norm, rope_tables
from trilemma.specs import ModelSpec


class LatentAttention(nn.Module):
    def __init__(self, m: ModelSpec) -> None:
        super().__init__()
        d, h, dh, r = m.d_model, m.n_heads, m.d_head, m.qk_rope_head_dim
        self.h, self.dh, self.r, self.rank = h, dh, r, m.kv_lora_rank
        if m.q_lora_rank:
            self.q = nn.Sequential(
                nn.Linear(d, m.q_lora_rank, bias=False),
                make_norm(m, m.q_lora_rank),
                nn.Linear(m.q_lora_rank, h * (dh + r), bias=False),
            )
        else:
            self.q = nn.Linear(d, h * (dh + r), bias=False)
        self.kv_down = nn.Linear(d, m.kv_lora_rank + r, bias=False)
        self.kv_norm = make_norm(m, m.kv_lora_rank)
        self.kv_up = nn.Linear(m.kv_lora_rank, h * 2 * dh, bias=False)
        self.out = nn.Linear(h * dh, d, bias=False)

    def forward(self, x: torch.Tensor, _rope: object = None) -> torch.Tensor:
        B, S, _ = x.shape
        h, dh, r = self.h, self.dh, self.r
        q_nope, q_rope = self.q(x).view(B, S, h, dh + r).transpose(1, 2).split([dh, r], dim=-1)
        latent, k_rope = self.kv_down(x).split([self.rank, r], dim=-1)
        kv = self.kv_up(self.kv_norm(latent)).view(B, S, h, 2 * dh).transpose(1, 2)
        k_nope, v = kv.split([dh, dh], dim=-1)
        cos, sin = rope_tables(S, r, x.device, x.dtype)
        q_rope = apply_rope(q_rope, cos, sin)
        k_rope = apply_rope(k_rope.view(B, 1, S, r), cos, sin).expand(B, h, S, r)
        q, k = torch.cat([q_nope, q_rope], dim=-1), torch.cat([k_nope, k_rope], dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, S, dh)
        return self.out(y.transpose(1, 2).reshape(B, S, h * dh))


__all__ = ["LatentAttention"]
