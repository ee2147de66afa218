"""PyTorch's own accounting of one training step's memory, on fake tensors (no GPU, nothing allocated).

The planner predicts memory per device as an inventory (``trilemma.estimate.memory``). This module
measures the same inventory with PyTorch's memory trackers: it builds the probe model
(``trilemma.probe.model``) under ``FakeTensorMode`` (tensors carry shapes and dtypes, no storage), runs a
warm-up step so AdamW's states exist, then tracks a second step — forward, cross-entropy loss, backward,
AdamW step — with ``torch.distributed._tools.mem_tracker.MemTracker`` (ZeRO-0) or
``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`` (FSDP2 ``fully_shard`` = ZeRO-3, on a fake
process group of ``world`` ranks: ``torch.testing._internal.distributed.fake_pg``). Both trackers see every
tensor storage the dispatcher creates and tag it parameter / gradient / optimizer state / activation /
temporary; we read the tags at the step's peak and at the end of the forward pass.

Conventions of the emulated step (chosen to be the planner's; ``trilemma.specs.plan.DtypeSpec``):

- ``fp32``: fp32 weights, gradients and AdamW moments (4 + 4 + 8 bytes per parameter), fp32 activations.
- ``bf16`` mixed precision (``DtypeSpec.for_precision("bf16")``: 2 + 4 + 12 bytes per parameter,
  Megatron-LM's layout, Narayanan et al. 2021 §5 / Rajbhandari et al. 2020 §3):
  ZeRO-0 — bf16 model weights, bf16 activations; each bf16 gradient is added into a persistent fp32
  "main grad" as soon as autograd has accumulated it and then dropped (Megatron's ``main_grad``); AdamW
  runs on fp32 master copies whose ``.grad`` is that main grad, so master + moments are 4 + 8 bytes.
  FSDP2 — ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` over fp32 parameters: the fp32
  *sharded* parameter is the master copy (reported under optimizer state, as the planner counts it),
  layers are all-gathered in bf16 for compute (reported under weights), gradients are reduce-scattered
  into fp32 shards. FSDP2 keeps no sharded bf16 copy; the planner's ZeRO-3 counts one (ZeRO §5).
- Gradients persist between steps (``zero_grad(set_to_none=False)``, as Megatron's contiguous gradient
  buffer and DDP's bucket views do), so the peak holds weights, gradients and optimizer states together.
- AdamW runs its single-tensor loop (``foreach=False``): the multi-tensor path allocates per-step
  temporaries the size of all gradients, which the planner does not model.
- Loss: ``cross_entropy(logits.float(), targets)``, as in ``trilemma.probe.train``.
- Recompute: ``full`` checkpoints every layer (``torch.utils.checkpoint``, non-reentrant, the probe
  model's own ``recompute`` flag); ``selective`` checkpoints the attention core only (the
  ``scaled_dot_product_attention`` call: Korthikanti et al. 2022 §5).

Fake tensors are CPU tensors here: a CPU-only torch cannot create fake CUDA tensors ("PyTorch is not linked
with support for cuda devices"). The bytes are the same, except that the CUDA caching allocator rounds each
block up to 512 bytes (MemTracker applies that rounding only to CUDA storages: negligible at these sizes)
and that on CPU ``scaled_dot_product_attention`` picks the CPU flash kernel, which like FlashAttention-2 on
GPUs saves the output and an fp32 log-sum-exp per head and row (Dao 2023 §3.1).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trilemma.probe import model as probe_model
from trilemma.probe.fake_step import default_dtype, fake_process_group, gpu_functional
from trilemma.specs import ModelSpec

__all__ = ["TrackedMemory", "track_step"]

log = logging.getLogger(__name__)

# MemTracker / FSDPMemTracker category names (torch.distributed._tools) -> our columns
_WEIGHTS = ("Parameter", "Unsharded Param", "All Gather")
_GRADS = ("Gradient", "Unsharded Grad", "Reduce Scatter")
_OPT = ("Optstate", "OptState")
_ACT = ("Activation",)
_TEMP = ("Temp",)


@dataclass(frozen=True)
class TrackedMemory:
    """Tensor memory of one training step on one rank, bytes, as PyTorch's tracker tags it.

    Peak columns are the tracker's snapshot at the step's highest total (``peak_bytes``). The
    ``forward_*`` figures are taken at the end of the forward pass (loss computed, backward not begun):
    what is saved for backward, the planner's activation inventory."""

    weights_bytes: (
        float  # parameters at peak (FSDP2: gathered layers; bf16 FSDP2 excludes the fp32 shard)
    )
    gradients_bytes: float  # gradients at peak (bf16 ZeRO-0: fp32 main grads + any live bf16 grad)
    optimizer_bytes: float  # AdamW moments (+ fp32 master copy under bf16), at peak
    activations_bytes: float  # tensors saved in forward (and recomputed ones) still live at peak
    temporaries_bytes: float  # backward temporaries at peak: gradients of activations, workspaces
    other_bytes: float  # buffers, inputs and anything untagged, at peak
    peak_bytes: float  # the step's peak total tensor memory
    forward_layers_bytes: (
        float  # activations saved by embeddings + layers, end of the last layer's forward
    )
    forward_bytes: (
        float  # activations saved at the end of forward, incl. the final norm, logits and loss
    )
    phase: str  # "forward", "backward" or "optimizer": where the peak fell
    categories: dict[str, float] = field(default_factory=dict)  # the tracker's raw peak snapshot

    @property
    def model_state_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sum(snap: dict[str, int], names: tuple[str, ...]) -> float:
    return float(sum(snap.get(k, 0) for k in names))


def track_step(
    spec: ModelSpec,
    seq_len: int,
    micro_batch: int,
    precision: str = "bf16",
    recompute: str = "none",
    world: int = 1,
    fsdp: bool = False,
) -> TrackedMemory:
    """Track one training step (forward, backward, AdamW) of ``spec`` on fake tensors; bytes on rank 0.

    ``seq_len`` tokens × ``micro_batch`` sequences per rank; ``precision`` "fp32" or "bf16" (mixed, see the
    module docstring); ``recompute`` "none", "selective" or "full"; ``fsdp`` shards every layer, the
    token embedding and the root (final norm + LM head) with FSDP2 over a fake group of ``world`` ranks
    (ZeRO-3); without it the step is ZeRO-0 on one rank (data parallelism then changes nothing on a rank)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision {precision!r}: fp32 or bf16")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute {recompute!r}: none, selective or full")
    bf16 = precision == "bf16"
    pg = fake_process_group(world) if fsdp else contextlib.nullcontext()
    with (
        pg as mesh,
        FakeTensorMode(allow_non_fake_inputs=False),
        gpu_functional(recompute == "selective"),
    ):
        # bf16 ZeRO-0 builds the model in bf16 (``Module.to`` cannot swap fake parameters)
        with default_dtype(torch.bfloat16 if bf16 and not fsdp else torch.float32):
            model = probe_model.build_model(spec, "cpu", recompute=recompute == "full", init=False)
        model.train()
        if fsdp:
            model, opt, step_hooks = _fsdp_setup(model, mesh, bf16)
        else:
            model, opt, step_hooks = _ddp_setup(model, bf16)
        idx = torch.randint(0, spec.vocab_size, (micro_batch, seq_len))
        tgt = torch.randint(0, spec.vocab_size, (micro_batch, seq_len))

        def step(marks: dict[str, Any] | None) -> None:
            logits = model(idx)  # (B, S, V)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.reshape(-1))
            del logits
            if marks is not None:
                marks["forward"] = tracker.get_tracker_snapshot("current")
                marks["phase_peak"]["forward"] = _total(tracker.get_tracker_snapshot("peak"))
            loss.backward()
            del loss
            step_hooks["before_step"]()
            if marks is not None:
                marks["phase_peak"]["backward"] = _total(tracker.get_tracker_snapshot("peak"))
            opt.step()
            step_hooks["after_step"]()
            opt.zero_grad(set_to_none=False)

        _warm_up(model, opt, step_hooks)
        tracker = _make_tracker(model, opt, step_hooks, fsdp, (idx, tgt))
        marks: dict[str, Any] = {"phase_peak": {}}
        last = model.blocks[-1]
        seen: list[dict] = []
        h = last.register_forward_hook(
            lambda *_: seen.append(tracker.get_tracker_snapshot("current")) if not seen else None
        )
        with tracker, warnings.catch_warnings():
            # the tracker's own post-accumulate hook finds the bf16 gradient already folded into the
            # fp32 main grad (None) and warns; nothing is lost
            warnings.filterwarnings(
                "ignore", message="Expected a tensor or a traceable wrapper-subclass"
            )
            step(marks)
        h.remove()
        peak = tracker.get_tracker_snapshot("peak")
    return _tracked(peak, marks, seen, fsdp, bf16)


def _tracked(
    peak: dict, marks: dict[str, Any], seen: list[dict], fsdp: bool, bf16: bool
) -> TrackedMemory:
    """The tracker's peak snapshot (and the forward and first-layer marks) as bytes per category
    on rank 0, and the phase the peak fell in."""
    snap = _one_device(peak)
    fwd = _one_device(marks["forward"])
    layers = _one_device(seen[0]) if seen else {}
    total = float(snap.get("Total", 0))
    pp = marks["phase_peak"]
    phase = (
        "forward"
        if pp["forward"] >= total
        else "backward"
        if pp["backward"] >= total
        else "optimizer"
    )
    weights = _sum(snap, _WEIGHTS)
    opt_b = _sum(snap, _OPT)
    if fsdp:
        sharded = _sum(snap, ("Sharded Param",))
        if bf16:
            opt_b += sharded  # the fp32 shard is the master copy
        else:
            weights += sharded
    grads = _sum(snap, _GRADS) + _sum(snap, ("Sharded Grad",))
    act, temp = _sum(snap, _ACT), _sum(snap, _TEMP)
    other = total - weights - grads - opt_b - act - temp
    return TrackedMemory(
        weights_bytes=weights,
        gradients_bytes=grads,
        optimizer_bytes=opt_b,
        activations_bytes=act,
        temporaries_bytes=temp,
        other_bytes=other,
        peak_bytes=total,
        forward_layers_bytes=_sum(layers, _ACT),
        forward_bytes=_sum(fwd, _ACT),
        phase=phase,
        categories={str(k): float(v) for k, v in snap.items()},
    )


def _make_tracker(
    model: nn.Module, opt: torch.optim.Optimizer, hooks: dict[str, Any], fsdp: bool, inputs: tuple
) -> Any:
    """torch's FSDP memory tracker (tracking ``inputs``) or its plain one (tracking the model,
    what the hooks name as external, and the optimizer), keeping the global peak only."""
    if fsdp:
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

        tracker = _global_peak_only(FSDPMemTracker)(model, opt)
        tracker.track_inputs(inputs)
        return tracker
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = _global_peak_only(MemTracker)()
    tracker.track_external(model, *hooks["external"], opt)
    return tracker


def _global_peak_only(cls: type) -> type:
    """The tracker, keeping the step's global peak only: the stock ``_update_peak_stats`` also walks
    every module's statistics after every operator (quadratic in depth: minutes for a 32-layer model),
    and we read no per-module figures."""

    def _update_peak_stats(self: Any, peak_state: Any) -> None:
        for dev, dev_snap in self._curr_mem_snap.items():
            if self._peak_mem.get(dev, 0) < dev_snap["Total"]:
                self._peak_mem[dev] = dev_snap["Total"]
                self._peak_mem_snap[dev] = dict(dev_snap)

    return type(cls.__name__ + "GlobalPeak", (cls,), {"_update_peak_stats": _update_peak_stats})


def _warm_up(model: nn.Module, opt: torch.optim.Optimizer, hooks: dict[str, Any]) -> None:
    """AdamW creates its moments on its first step: take one on zero gradients (what a first full
    step would leave behind, without paying for its forward and backward)."""
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
    opt.step()
    hooks["after_step"]()
    opt.zero_grad(set_to_none=False)


def _total(snaps: dict) -> float:
    return float(_one_device(snaps).get("Total", 0))


def _one_device(snaps: dict) -> dict[str, int]:
    """The single device's snapshot (fake CPU tensors all live on ``cpu``), keyed by category name."""
    if not snaps:
        return {}
    if len(snaps) != 1:
        raise RuntimeError(f"expected one device in the tracker's snapshot, got {list(snaps)}")
    (dev_snap,) = snaps.values()
    return {str(getattr(k, "value", k)): v for k, v in dev_snap.items()}


def _ddp_setup(
    model: nn.Module, bf16: bool
) -> tuple[nn.Module, torch.optim.Optimizer, dict[str, Any]]:
    """ZeRO-0 on one rank. fp32: AdamW on the model. bf16: bf16 model, fp32 main grads and masters."""
    noop = {"before_step": lambda: None, "after_step": lambda: None, "external": ()}
    if not bf16:
        return model, torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False), noop
    master = nn.ParameterList(nn.Parameter(p.detach().float()) for p in model.parameters())
    pairs = list(zip(model.parameters(), master))
    for p, mp in pairs:
        mp.grad = torch.zeros_like(mp)  # Megatron's persistent fp32 main grad

        def fold(p: torch.Tensor, mp: nn.Parameter = mp) -> None:
            mp.grad.add_(p.grad)  # fp32 += bf16, then the bf16 gradient is dropped
            p.grad = None

        p.register_post_accumulate_grad_hook(fold)
    opt = torch.optim.AdamW(master.parameters(), lr=1e-4, foreach=False)

    def copy_back() -> None:
        with torch.no_grad():
            for p, mp in pairs:
                p.copy_(mp)  # fp32 master -> bf16 weights
                # file the master copy with the optimizer's state so the tracker tags it optimizer state
                opt.state[mp].setdefault("master", mp)

    hooks = {"before_step": lambda: None, "after_step": copy_back, "external": (master,)}
    return model, opt, hooks


def _fsdp_setup(
    model: nn.Module, mesh: Any, bf16: bool
) -> tuple[nn.Module, torch.optim.Optimizer, dict[str, Any]]:
    """FSDP2 (``fully_shard``) like torchtitan: each layer, the token embedding (when untied) and the root
    (final norm + LM head, and the rest)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16
        else MixedPrecisionPolicy()
    )
    kw = {"mesh": mesh, "mp_policy": mp}
    for block in model.blocks:
        fully_shard(block, **kw)
    if (
        model.head is not None
    ):  # a tied table is read by the root's F.linear: it must stay in the root group
        fully_shard(model.wte, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    noop = {"before_step": lambda: None, "after_step": lambda: None, "external": ()}
    return model, opt, noop
