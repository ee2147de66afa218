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

What is timed, on 1-element fp32 tensors so the kernel's arithmetic is nil (the median over
``REPEATS`` repeats of a chain of ``CHAIN`` operators, each repeat divided by ``CHAIN``; the repeats
of the three kinds interleaved so that a neighbour's burst falls on all of them alike):

- ``op``: ``y = torch.mul(y, c)`` with ``y`` in a graph (its leaf requires grad): Python → dispatcher
  → autograd node recorded → CPU kernel. What a forward operator of a training step costs.
- ``bwd_op``: ``.backward()`` of that chain: the engine runs one ``MulBackward0`` per operator, each
  issuing one multiply (``c`` needs no gradient). What a backward node with one operator costs.
- ``nograd_op``: the same multiply under ``torch.no_grad()`` (no node): what an operator of the
  optimizer's step costs (``torch.optim`` steps run without grad).

On a GPU (``device="cuda"``) the same loops run on device tensors between ``torch.cuda.synchronize``
calls: kernels that small finish faster than the host issues them, so the loop's time is the host's
issue rate, launch included. Nothing is subtracted (the Python ``for`` loop's own ~20 ns per turn is
part of what a model's Python pays too).

The records (``HostDispatch``) need no torch: the planner reads them from a saved profile; torch is
imported by the measurement alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trilemma.units import MEGA

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "CHAIN",
    "DISPATCH_METHOD",
    "REPEATS",
    "DispatchTiming",
    "HostDispatch",
    "host_constants",
    "host_dispatch",
]

CHAIN = 1000  # operators per timed repeat (~2-5 ms on a CPU core)
REPEATS = 21  # timed repeats of each kind, after one untimed warm-up
#: how ``host_dispatch`` measures; a cached figure measured another way is measured again
DISPATCH_METHOD = (
    f"dispatch/1: median of {REPEATS} chains of {CHAIN} torch.mul on 1-element fp32 tensors "
    "(forward in a graph, its backward, under no_grad)"
)


@dataclass(frozen=True)
class DispatchTiming:
    """One kind of operator's host seconds over the repeats: median, 10th and 90th percentile."""

    median_s: float
    p10_s: float
    p90_s: float

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how much the repeats disagree."""
        return (self.p90_s - self.p10_s) / self.median_s


@dataclass(frozen=True)
class HostDispatch:
    """Host seconds per eager PyTorch operator on tiny tensors (``trilemma.probe.dispatch``)."""

    op: DispatchTiming  # a forward operator in a graph (an input requires grad)
    bwd_op: DispatchTiming  # a backward node issuing one operator (the autograd engine)
    nograd_op: DispatchTiming  # an operator under torch.no_grad (an optimizer's step)
    repeats: int
    chain: int  # operators per repeat
    method: str  # trilemma.probe.dispatch.DISPATCH_METHOD when measured

    def describe(self) -> str:
        """The three medians in microseconds, with the repeats' spread."""
        return (
            ", ".join(
                f"{name} {t.median_s * MEGA:.2f} µs (±{t.spread / 2:.0%})"
                for name, t in (
                    ("forward", self.op),
                    ("backward", self.bwd_op),
                    ("no-grad", self.nograd_op),
                )
            )
            + f" per eager operator (median of {self.repeats})"
        )

    @classmethod
    def from_dict(cls, d: dict | None) -> HostDispatch | None:
        if d is None:
            return None
        kinds = ("op", "bwd_op", "nograd_op")
        return cls(
            **{k: v for k, v in d.items() if k not in kinds},
            **{k: DispatchTiming(**d[k]) for k in kinds},
        )


def host_constants(d: HostDispatch | None) -> tuple[dict[str, float], str]:
    """The measured host seconds per eager operator as a device's efficiency constants (forward
    ``host_op_s``, backward ``host_bwd_op_s``) and a note saying so; none when not measured."""
    if d is None:
        return {}, ""
    said = f"; host dispatch (measured): {d.describe()}"
    return {"host_op_s": d.op.median_s, "host_bwd_op_s": d.bwd_op.median_s}, said


# ------------------------------------------------------------------ the measurement (torch)


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":  # pragma: no cover - GPU only
        torch.cuda.synchronize()


def _forward(
    torch: Any, x: torch.Tensor, c: torch.Tensor, device: str
) -> tuple[float, torch.Tensor]:
    """Seconds per operator of a ``CHAIN``-long chain of multiplies, and the chain's end."""
    y = x
    _sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(CHAIN):
        y = torch.mul(y, c)
    _sync(torch, device)
    return (time.perf_counter() - t0) / CHAIN, y


def _timers(torch: Any, device: str) -> dict[str, Callable[[], float]]:
    """One repeat of each kind, seconds per operator (this module's docstring)."""
    c = torch.full((1,), 1.0001, device=device)  # no gradient: one backward op per node

    def op() -> float:
        return _forward(torch, torch.ones(1, device=device, requires_grad=True), c, device)[0]

    def bwd_op() -> float:
        _, y = _forward(torch, torch.ones(1, device=device, requires_grad=True), c, device)
        y = y.sum()
        _sync(torch, device)
        t0 = time.perf_counter()
        y.backward()
        _sync(torch, device)
        return (time.perf_counter() - t0) / CHAIN

    def nograd_op() -> float:
        with torch.no_grad():
            return _forward(torch, torch.ones(1, device=device), c, device)[0]

    return {"op": op, "bwd_op": bwd_op, "nograd_op": nograd_op}


def _timing(samples: list[float]) -> DispatchTiming:
    """The median of ``samples`` and their 10th and 90th percentiles, seconds."""
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return DispatchTiming(statistics.median(samples), q[0], q[-1])


def host_dispatch(device: str, repeats: int = REPEATS) -> HostDispatch:
    """This machine's host seconds per eager operator: forward in a graph, backward, without grad
    (the median over ``repeats`` interleaved repeats; this module's docstring says what is timed)."""
    import torch

    timers = _timers(torch, device)
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for (
        f
    ) in timers.values():  # warm-up: the dispatcher's caches, the allocator, the engine's thread
        f()
    for _ in range(repeats):
        for k, f in timers.items():
            samples[k].append(f())
    return HostDispatch(
        op=_timing(samples["op"]),
        bwd_op=_timing(samples["bwd_op"]),
        nograd_op=_timing(samples["nograd_op"]),
        repeats=repeats,
        chain=CHAIN,
        method=DISPATCH_METHOD,
    )
