"""The probe model's norms and rotary positions, shared by its attention (trilemma.probe.model) and its
multi-head latent attention (trilemma.probe.mla)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trilemma.specs import ModelSpec, NormType

_ROPE_THETA = 10000.0  # Su et al. 2021; Llama 1/2 and NeoX use this base


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): a weight, no bias, no centring."""

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(F, "rms_norm"):  # torch >= 2.4
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(
            x
        ) * self.weight


def make_norm(m: ModelSpec, width: int | None = None) -> nn.Module:
    """The spec's norm over ``width`` elements (default d_model)."""
    w = width or m.d_model
    return nn.LayerNorm(w) if m.norm == NormType.LAYERNORM else RMSNorm(w)


def rope_tables(
    seq: int, d_head: int, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (seq, d_head) for rotate-half RoPE (the Llama / NeoX layout)."""
    inv = 1.0 / (
        _ROPE_THETA ** (torch.arange(0, d_head, 2, device=device, dtype=torch.float32) / d_head)
    )
    ang = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)  # (seq, d_head/2)
    ang = torch.cat([ang, ang], dim=-1)  # (seq, d_head)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, S, Dh) rotated by position."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


__all__ = ["RMSNorm", "apply_rope", "make_norm", "rope_tables"]
