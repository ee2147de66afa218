"""The stand-ins under which the memory tracker runs a training step on one CPU: CUDA's fused
RMSNorm and attention as their saved tensors would be, the default dtype, and a fake process
group for FSDP over many ranks (trilemma.probe.memtrack)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from trilemma.probe import model as probe_model
from trilemma.probe import norm_rope


class _FusedRMSNorm(torch.autograd.Function):
    """RMSNorm over the last dimension saving what CUDA's fused ``aten._fused_rms_norm`` saves for
    backward: the input (activation dtype) and one fp32 rstd per row (derivatives.yaml,
    ``_fused_rms_norm``). Arithmetic in fp32, as the kernel does."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)  # (..., 1) fp32
        y = (xf * rstd).to(x.dtype)
        ctx.save_for_backward(x, weight, rstd)
        return y * weight if weight is not None else y

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, None]:
        x, weight, rstd = ctx.saved_tensors
        xhat = x.float() * rstd
        gw = (
            (gy.float() * xhat).sum(dim=tuple(range(gy.dim() - 1))).to(weight.dtype)
            if weight is not None
            else None
        )
        g = gy.float() * weight.float() if weight is not None else gy.float()
        gx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
        return gx.to(x.dtype), gw, None


class _GpuFunctional:
    """Stands in for ``torch.nn.functional`` inside the probe model while tracking: the same functions,
    routed the way a CUDA device runs them.

    - ``rms_norm`` calls the fused kernel ``aten._fused_rms_norm``, which ``torch.rms_norm`` picks on CUDA
      (it saves the bf16 input and an fp32 rstd per row); on CPU ``torch.rms_norm`` decomposes into fp32
      element-wise ops that save two fp32 copies of the input, which no GPU run keeps.
    - with ``selective``, ``scaled_dot_product_attention`` runs under ``torch.utils.checkpoint``
      (Korthikanti et al. 2022 §5: recompute the attention core only)."""

    def __init__(self, selective: bool) -> None:
        self._selective = selective

    def __getattr__(self, name: str) -> Any:
        return getattr(F, name)

    @staticmethod
    def rms_norm(
        x: torch.Tensor,
        normalized_shape: Any,
        weight: torch.Tensor | None = None,
        eps: float | None = None,
    ) -> torch.Tensor:
        return _FusedRMSNorm.apply(x, weight, 1e-6 if eps is None else eps)

    def scaled_dot_product_attention(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if not self._selective:
            return F.scaled_dot_product_attention(*args, **kwargs)
        from torch.utils.checkpoint import checkpoint

        return checkpoint(F.scaled_dot_product_attention, *args, use_reentrant=False, **kwargs)


@contextlib.contextmanager
def gpu_functional(selective: bool) -> Iterator[None]:
    """The probe model's functional calls (its layers' and its norms', trilemma.probe.norm_rope) as a
    GPU runs them, for the duration."""
    mods = (probe_model, norm_rope)
    saved = [m.F for m in mods]
    for m in mods:
        m.F = _GpuFunctional(selective)  # type: ignore[assignment]
    try:
        yield
    finally:
        for m, f in zip(mods, saved):
            m.F = f  # type: ignore[assignment]


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


@contextlib.contextmanager
def fake_process_group(world: int) -> Iterator[Any]:
    """A fake process group of ``world`` ranks (this process is rank 0) and a 1-D CPU device mesh."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    try:
        yield init_device_mesh("cpu", (world,))
    finally:
        dist.destroy_process_group()
