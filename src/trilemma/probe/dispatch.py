"""The host's cost per eager PyTorch operator on this machine: what a step costs when its kernels are
too small to matter.

Each operator eager PyTorch runs passes through Python, the C++ dispatcher (its dispatch keys:
autograd, then the backend kernel) and the kernel's own setup (output allocation, TensorIterator);
with an input that requires grad, the autograd key also records a node of the graph. Backward, the
autograd engine visits each node and calls its backward formula, which dispatches the ops it needs.
When kernels are small this per-operator overhead, not FLOPs or bytes, sets the step: H. He, "Making
Deep Learning Go Brrrr From First Principles" (2022), section "Overhead" (time spent in the Python
interpreter and the framework rather than in kernels; a workload is "overhead-bound" when its
operators are too small to cover it); E. Z. Yang, "Let's talk about the PyTorch dispatcher" (2020)
for the path an operator takes.

What is timed (the median over ``REPEATS`` repeats of each kind, interleaved so that a neighbour's
burst falls on all of them alike; nothing subtracted):

- the dispatcher floor, on 1-element fp32 tensors so the kernel's arithmetic is nil, per operator of
  a chain of ``CHAIN``: ``op``, ``y = torch.mul(y, c)`` with ``y`` in a graph (Python → dispatcher →
  autograd node → kernel); ``bwd_op``, that chain's ``.backward()`` (one ``MulBackward0`` issuing one
  multiply per operator: the autograd engine); ``nograd_op``, the multiply under ``torch.no_grad()``.
- an eager layer: ``LAYERS`` blocks of the probe's own model (``probe.model.Block``, GPT-2 style:
  LayerNorm, fused-QKV attention through SDPA, GELU MLP) so narrow (``REFERENCE``: d 8, sequence 8)
  that their arithmetic is nil, forward and backward, per block. This is what the planner multiplies:
  its host term counts a layer's operators coarsely (``trilemma.estimate.host.host_ops_per_layer``:
  kernels and ~10 views), so its seconds per operator must carry the Python around each one too —
  nn.Module calls, views, shape arithmetic — which the floor leaves out. ``host_constants`` divides
  the block's seconds by the planner's own count of its operators (``reference_host_ops``).
- the optimizer's host seconds per parameter tensor: ``torch.optim.AdamW`` as the probe trains
  (train_parts.model_and_optimizer's settings; torch's default implementation for the device: one
  tensor at a time on a CPU, foreach on a GPU) stepping ``OPT_TENSORS`` 1-element parameters, then
  ``zero_grad``, per tensor; and the same over ``OPT_TENSORS`` tensors of ``OPT_ELEMENTS`` elements,
  whose excess over the 1-element step is AdamW's arithmetic per parameter element
  (``host_opt_elem_s``). On a CPU the single-tensor loop passes over each tensor eight times
  (torch/optim/adam.py ``_single_tensor_adam`` at torch commit cf30153c, 2.13: ``param.mul_``,
  ``exp_avg.lerp_``, ``exp_avg_sq.mul_`` and ``.addcmul_``, ``sqrt``, the division, ``add_(eps)``,
  ``param.addcdiv_``: 20 fp32 reads and writes, 80 bytes per element), each pass its own kernel;
  the planner's one fused read and write of the states does not describe that, this measurement does.

On a GPU (``device="cuda"``) the same loops run on device tensors between ``torch.cuda.synchronize``
calls: kernels that small finish faster than the host issues them, so the loop's time is the host's
issue rate, launch included.

The records (``HostDispatch``) need no torch: the planner reads them from a saved profile; torch is
imported by the measurement alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from trilemma.units import GIGA, MEGA

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from trilemma.specs import ModelSpec

__all__ = [
    "CHAIN",
    "DISPATCH_METHOD",
    "REFERENCE",
    "REPEATS",
    "DispatchTiming",
    "HostDispatch",
    "host_constants",
    "host_dispatch",
    "reference_host_ops",
]

CHAIN = 1000  # operators per timed repeat of the floor (~2-5 ms on a CPU core)
LAYERS = 8  # blocks per timed repeat of the eager layer
OPT_TENSORS = 64  # parameter tensors the timed optimizer steps
#: elements of each tensor of the optimizer's second timing: a 64 × 256 matrix, the MLP's (d × 4d at
#: d 64); its 64 tensors' weights, gradients and two moments (16 MiB) overflow a core's L2
OPT_ELEMENTS = 16384
REPEATS = 21  # timed repeats of each kind, after one untimed warm-up
#: the reference eager layer: the probe's default model (probe.inputs.probe_model) this narrow
REFERENCE = {"d_model": 8, "heads": 2, "ffn": 32}
REFERENCE_SEQ = 8
#: how ``host_dispatch`` measures; a cached figure measured another way is measured again
DISPATCH_METHOD = (
    f"dispatch/3: median of {REPEATS}; floor: chains of {CHAIN} torch.mul on 1-element fp32 tensors "
    f"(in a graph, backward, no_grad); layer: {LAYERS} probe blocks at d {REFERENCE['d_model']}, "
    f"seq {REFERENCE_SEQ}; optimizer: AdamW over {OPT_TENSORS} tensors of 1 and {OPT_ELEMENTS} "
    "elements; a CPU's attention by head dimension (attention_rate)"
)


@dataclass(frozen=True)
class DispatchTiming:
    """One kind's host seconds over the repeats: median, 10th and 90th percentile."""

    median_s: float
    p10_s: float
    p90_s: float

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how much the repeats disagree."""
        return (self.p90_s - self.p10_s) / self.median_s


_KINDS = ("op", "bwd_op", "nograd_op", "layer_fwd", "layer_bwd", "opt_tensor", "opt_large")


@dataclass(frozen=True)
class HostDispatch:
    """The host's seconds of eager PyTorch on this machine (this module's docstring)."""

    op: DispatchTiming  # floor: a forward operator in a graph (an input requires grad)
    bwd_op: DispatchTiming  # floor: a backward node issuing one operator (the autograd engine)
    nograd_op: DispatchTiming  # floor: an operator under torch.no_grad
    layer_fwd: DispatchTiming  # one reference block's forward
    layer_bwd: DispatchTiming  # one reference block's backward
    opt_tensor: DispatchTiming  # AdamW's step and zero_grad, per parameter tensor
    opt_large: DispatchTiming  # the same per tensor of OPT_ELEMENTS elements
    repeats: int
    method: str  # DISPATCH_METHOD when measured
    # a CPU's attention core, forward and backward, FLOP/s by head dimension (probe.attention_rate:
    # the kernels a CPU's host runs itself); empty on a GPU
    # (lists: the record reads back from JSON equal)
    attention_head_dims: list[int] = field(default_factory=list)
    attention_flop_per_s: list[float] = field(default_factory=list)

    def describe(self) -> str:
        """The medians in microseconds, with the repeats' spread."""

        def us(t: DispatchTiming) -> str:
            return f"{t.median_s * MEGA:.2f} µs (±{t.spread / 2:.0%})"

        return (
            f"per operator forward {us(self.op)}, backward {us(self.bwd_op)}, no-grad "
            f"{us(self.nograd_op)}; an eager layer forward {us(self.layer_fwd)}, backward "
            f"{us(self.layer_bwd)}; AdamW {us(self.opt_tensor)} per tensor, {us(self.opt_large)} per "
            f"tensor of {OPT_ELEMENTS} elements (medians of {self.repeats})"
        )

    @classmethod
    def from_dict(cls, d: dict | None) -> HostDispatch | None:
        """The record; None for none, or for one another method wrote (it lacks a field: measured again)."""
        if d is None or {f.name for f in fields(cls)} - set(d):
            return None
        curve = ("attention_head_dims", "attention_flop_per_s")
        return cls(
            **{k: v for k, v in d.items() if k not in _KINDS + curve},
            **{k: DispatchTiming(**d[k]) for k in _KINDS},
            **{k: list(d[k]) for k in curve},
        )


def reference_spec() -> ModelSpec:
    """The reference eager layer's model: the probe's default, ``REFERENCE`` wide, one layer."""
    from trilemma.probe.inputs import probe_model

    return probe_model(None, layers=1, **REFERENCE)[0]


def reference_host_ops() -> tuple[float, float]:
    """The planner's count of the operators the reference block's host issues (forward, backward):
    its kernels as the probe's prediction times them (FlashAttention, the default stack, eager)
    and the eager views (trilemma.estimate.host.host_ops_per_layer)."""
    from trilemma.estimate.host import host_ops_per_layer, unfused_extra
    from trilemma.estimate.layer_ops import kernels_per_layer
    from trilemma.specs.plan import DEFAULT_STACK
    from trilemma.specs.stack import HostMode

    spec = reference_spec()
    k_f, k_b = kernels_per_layer(spec, True)
    x_f, x_b, _, _ = unfused_extra(
        spec, DEFAULT_STACK, HostMode.EAGER, float(REFERENCE_SEQ), 1, 4.0
    )
    h_f, h_b = host_ops_per_layer(k_f + x_f, k_b + x_b, HostMode.EAGER, 1)
    return float(h_f), float(h_b)


def host_constants(d: HostDispatch | None) -> tuple[dict[str, float], str]:
    """A device's host constants from its measurement, and a note saying so (none when not measured):
    seconds per operator the planner counts, forward ``host_op_s`` and backward ``host_bwd_op_s`` (the
    reference block's seconds over its count, ``reference_host_ops``), AdamW's seconds per
    parameter tensor ``host_opt_tensor_s`` and per parameter element ``host_opt_elem_s`` (what a
    tensor of ``OPT_ELEMENTS`` costs beyond a 1-element one, over its elements; none below 0)."""
    if d is None:
        return {}, ""
    f_ops, b_ops = reference_host_ops()
    out = {
        "host_op_s": d.layer_fwd.median_s / f_ops,
        "host_bwd_op_s": d.layer_bwd.median_s / b_ops,
        "host_opt_tensor_s": d.opt_tensor.median_s,
        "host_opt_elem_s": max(d.opt_large.median_s - d.opt_tensor.median_s, 0.0) / OPT_ELEMENTS,
    }
    said = (
        f"; host (measured): {d.describe()}; per operator the planner counts (a layer's "
        f"{f_ops:.0f} forward, {b_ops:.0f} backward) {out['host_op_s'] * MEGA:.2f} and "
        f"{out['host_bwd_op_s'] * MEGA:.2f} µs; AdamW per parameter element "
        f"{out['host_opt_elem_s'] * GIGA:.2f} ns"
    )
    return out, said


# ------------------------------------------------------------------ the measurement (torch)


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":  # pragma: no cover - GPU only
        torch.cuda.synchronize()


def _timed(torch: Any, device: str, f: Callable[[], Any], n: int) -> tuple[float, Any]:
    """Seconds per item of ``f()``, which does ``n`` items, between device synchronisations."""
    _sync(torch, device)
    t0 = time.perf_counter()
    out = f()
    _sync(torch, device)
    return (time.perf_counter() - t0) / n, out


def _chain(torch: Any, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``CHAIN`` multiplies, each on the last one's result."""
    for _ in range(CHAIN):
        x = torch.mul(x, c)
    return x


def _floor_timers(torch: Any, device: str) -> dict[str, Callable[[], float]]:
    """One repeat of each floor kind, seconds per operator (this module's docstring)."""
    c = torch.full((1,), 1.0001, device=device)  # no gradient: one backward op per node

    def leaf() -> torch.Tensor:
        return torch.ones(1, device=device, requires_grad=True)

    def op() -> float:
        return _timed(torch, device, lambda: _chain(torch, leaf(), c), CHAIN)[0]

    def bwd_op() -> float:
        y = _chain(torch, leaf(), c).sum()
        return _timed(torch, device, y.backward, CHAIN)[0]

    def nograd_op() -> float:
        with torch.no_grad():
            return _timed(
                torch, device, lambda: _chain(torch, torch.ones(1, device=device), c), CHAIN
            )[0]

    return {"op": op, "bwd_op": bwd_op, "nograd_op": nograd_op}


def _layer_timers(torch: Any, device: str) -> dict[str, Callable[[], float]]:
    """One repeat of the reference layer (forward, backward, per block) and of AdamW (per tensor)."""
    from trilemma.probe.model import Block

    spec = reference_spec()
    blocks = [Block(spec, moe=False).to(device) for _ in range(LAYERS)]
    params = [p for b in blocks for p in b.parameters()]
    x = torch.randn(1, REFERENCE_SEQ, spec.d_model, device=device, requires_grad=True)

    def forward() -> torch.Tensor:
        y = x
        for b in blocks:
            y = b(y)
        return y

    def layer_bwd() -> float:
        for p in params:  # as after zero_grad(set_to_none=True): fresh gradients, not accumulated
            p.grad = None
        return _timed(torch, device, forward().sum().backward, LAYERS)[0]

    return {
        "layer_fwd": lambda: _timed(torch, device, forward, LAYERS)[0],
        "layer_bwd": layer_bwd,
        "opt_tensor": _adamw_timer(torch, device, 1),
        "opt_large": _adamw_timer(torch, device, OPT_ELEMENTS),
    }


def _adamw_timer(torch: Any, device: str, elements: int) -> Callable[[], float]:
    """One repeat of AdamW (the probe's settings) and zero_grad over ``OPT_TENSORS`` tensors of
    ``elements`` elements, seconds per tensor."""
    ps = [torch.zeros(elements, device=device, requires_grad=True) for _ in range(OPT_TENSORS)]
    opt = torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)  # the probe's

    def opt_step() -> None:
        opt.step()
        opt.zero_grad(set_to_none=True)

    def timer() -> float:
        for p in ps:
            p.grad = torch.ones_like(p)
        return _timed(torch, device, opt_step, OPT_TENSORS)[0]

    return timer


def _timing(samples: list[float]) -> DispatchTiming:
    """The median of ``samples`` and their 10th and 90th percentiles, seconds."""
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return DispatchTiming(statistics.median(samples), q[0], q[-1])


def host_dispatch(device: str, repeats: int = REPEATS) -> HostDispatch:
    """This machine's host seconds of eager PyTorch: the floor per operator, an eager layer and
    AdamW per tensor (medians over ``repeats`` interleaved repeats; this module's docstring); on a
    CPU, the attention core's rate by head dimension (``attention_rate``)."""
    import torch

    from trilemma.probe.attention_rate import attention_curve

    timers = {**_floor_timers(torch, device), **_layer_timers(torch, device)}
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for (
        f
    ) in timers.values():  # warm-up: the dispatcher's caches, the allocator, the engine's thread
        f()
    for _ in range(repeats):
        for k, f in timers.items():
            samples[k].append(f())
    curve = ([], []) if device == "cuda" else attention_curve(torch)
    return HostDispatch(
        **{k: _timing(v) for k, v in samples.items()},
        repeats=repeats,
        method=DISPATCH_METHOD,
        attention_head_dims=curve[0],
        attention_flop_per_s=curve[1],
    )
