"""The host's side of a step: the kernels a stack launches per layer, the operators its host issues,
and what each costs. When kernels are small, a step is set by the host, not the device.

- Kernels per layer: the fused count (layer_ops.kernels_per_layer) plus what a stack leaves unfused
  (an eager RMSNorm, SwiGLU or rotary embedding is a chain of pointwise kernels), each extra kernel a
  read and a write of its tensor (``unfused_extra``).
- Host operators: every kernel, plus the views and reshapes an eager forward dispatches (and their
  autograd nodes backward), plus the collectives it calls (``host_ops_per_layer``).
- Host seconds per operator by the stack's host mode (constants.toml [host]; a probe profile's
  measured ``host_op_s`` for eager): Python + PyTorch's dispatcher + the launch (eager), Inductor's
  generated launcher (compile), ~0 per kernel replayed from a CUDA graph, the launch alone (native).
- A device that queues kernels (``HardwareSpec.async_launch``, a GPU stream) runs the larger of its
  kernels and the host's issue; a CPU runs both on one thread, so they add (``issue_bound_s``).
- A synchronisation (``.item()``, a blocking receive) drains the queue: the host's lead is lost and
  the device waits a round trip and the first operator's issue (``sync_s``).

docs/derivations.md, section "Host dispatch", has the counts and their sources.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.specs import ModelSpec
from trilemma.specs.stack import HostMode, StackSpec

#: extra kernels (forward, backward) of one op when the stack does not fuse it. RMSNorm as eager
#: PyTorch writes it (Hugging Face LlamaRMSNorm: to(fp32), pow, mean, add, rsqrt, mul, mul(weight),
#: to(dtype): 8 forward) against 1 fused (Apex/Transformer Engine/Triton), backward the autograd of
#: each (≈ 10 against 2). LayerNorm is one kernel either way (torch.native_layer_norm).
UNFUSED_RMSNORM = (7, 8)
#: SwiGLU eager: silu, mul (2) against 1; backward silu_backward and two muls (3) against 1.
#: Bias + GeLU eager: add, gelu (2) against 1 (Megatron-LM's bias_gelu_impl); backward 2 against 1.
UNFUSED_ACT = (1, 2)
#: rotary eager (Hugging Face apply_rotary_pos_emb on q and k: mul, rotate_half = neg + cat, mul, add:
#: 5 each) against 1 fused kernel for both; backward the same chain.
UNFUSED_ROTARY = (9, 9)
#: views, reshapes, transposes and splits an eager layer dispatches (no kernel): q, k, v split, view
#: and transpose (7), the output's transpose and reshape (2), the MLP's chunk (1); each has an autograd
#: node backward.
EAGER_VIEWS_PER_LAYER = 10
#: collectives a layer calls with tensor parallelism: two all-reduces forward, two backward
#: (Shoeybi et al. 2019 §3, the f and g operators), each a host call.
TP_CALLS_PER_LAYER = (2, 2)


#: host operators of one parameter tensor's AdamW update in PyTorch's single-tensor loop (torch.optim
#: adamw _single_tensor_adamw: weight decay mul, two lerp/mul-add for the moments, bias corrections,
#: sqrt, div, add, addcdiv, and zero_grad): the default on a CPU, where foreach is off
OPT_OPS_PER_TENSOR = 10


def param_tensors(m: ModelSpec) -> float:
    """Parameter tensors the optimizer visits, per layer × layers plus the embeddings, final norm and
    head: a layer's four linears (fused QKV, output, the MLP's input projection(s) and its output, as
    Megatron-LM and the probe's model lay them out), their biases, and each norm's weight (and bias)."""
    per_norm = 2 if m.norm.value == "layernorm" else 1
    layer = 4 + m.qkv_bias + m.out_bias + 2 * m.mlp_bias + m.norms_per_layer * per_norm
    return m.n_layers * layer + 2 + per_norm + (0 if m.tied_embeddings else 1)


def optimizer_host_s(c: dict, n_tensors: Any, async_launch: bool, host: HostMode) -> Any:
    """The host's seconds of one optimizer step over ``n_tensors`` local parameter tensors: where the
    device queues kernels (a GPU) a multi-tensor optimizer (PyTorch's foreach default on CUDA, Apex's
    FusedAdam) launches a few kernels per list and the host keeps ahead: 0; on a CPU PyTorch's AdamW
    runs its single-tensor loop, ``host_opt_tensor_s`` per tensor where the probe measured it, else
    OPT_OPS_PER_TENSOR operators each."""
    if async_launch:
        return 0.0 * n_tensors
    per = c.get("host_opt_tensor_s", OPT_OPS_PER_TENSOR * host_op_s(c, host))
    return n_tensors * float(per)


def optimizer_elements_s(c: dict, n_elements: Any, async_launch: bool, memory_s: Any) -> Any:
    """Seconds of the optimizer's arithmetic over ``n_elements`` local parameter elements: on a host
    that runs its kernels itself (a CPU: ``async_launch`` false) where the probe measured AdamW per
    element (``host_opt_elem_s``, trilemma.probe.dispatch: its single-tensor loop passes over each
    tensor eight times), that figure per element; else ``memory_s``, the fused update's one read
    and write of the states."""
    if async_launch or "host_opt_elem_s" not in c:
        return memory_s
    return n_elements * float(c["host_opt_elem_s"])


def effective_host(stack: StackSpec, compile_flag: bool) -> HostMode:
    """The host mode a plan runs: torch.compile's where the plan compiles (``TrainingPlan.compile``,
    the stack's own unless a flag said otherwise), eager where a compiling stack's plan does not,
    else the stack's (CUDA graphs, a native loop)."""
    if compile_flag:
        return HostMode.COMPILE
    return HostMode.EAGER if stack.host == HostMode.COMPILE else stack.host


def fuses_pointwise(stack: StackSpec, host: HostMode) -> tuple[bool, bool, bool]:
    """(norm, activation, rotary) fused: by the stack's own kernels, or by torch.compile (Inductor
    fuses a pointwise chain into one kernel; an XLA stack's presets state its fusions as features)."""
    compiled = host == HostMode.COMPILE
    return (
        stack.fused_norm or compiled,
        stack.fused_act or compiled,
        stack.fused_rotary or compiled,
    )


def unfused_extra(
    m: ModelSpec, stack: StackSpec, host: HostMode, T: Any, tp: Any, e: float
) -> tuple[Any, Any, Any, Any]:
    """(forward kernels, backward kernels, forward bytes, backward bytes) one layer adds for what the
    stack leaves unfused; each extra kernel reads and writes its tensor once: a norm's fp32 copy of
    the residual stream (4 bytes per element), the MLP's hidden tensor, q and k."""
    norm, act, rot = fuses_pointwise(stack, host)
    kf = kb = 0
    bf = bb = 0.0
    if not norm and m.norm.value == "rmsnorm":
        n = m.norms_per_layer
        kf, kb = kf + n * UNFUSED_RMSNORM[0], kb + n * UNFUSED_RMSNORM[1]
        t = 2 * 4.0 * T * m.d_model
        bf, bb = bf + n * UNFUSED_RMSNORM[0] * t, bb + n * UNFUSED_RMSNORM[1] * t
    if not act and (m.ffn_matrices == 3 or m.mlp_bias):
        frac = m.n_dense_layers / m.n_layers + (
            m.n_moe_layers / m.n_layers * m.top_k * m.expert_ffn / max(m.ffn_dim, 1)
            if m.is_moe
            else 0.0
        )
        t = 2 * e * T * m.ffn_dim / tp * frac
        kf, kb = kf + UNFUSED_ACT[0], kb + UNFUSED_ACT[1]
        bf, bb = bf + UNFUSED_ACT[0] * t, bb + UNFUSED_ACT[1] * t
    if not rot and m.position.value == "rotary":
        t = (
            2 * e * T * (m.d_attn + m.d_kv) / tp / 2
        )  # q and k, one of the pair per kernel on average
        kf, kb = kf + UNFUSED_ROTARY[0], kb + UNFUSED_ROTARY[1]
        bf, bb = bf + UNFUSED_ROTARY[0] * t, bb + UNFUSED_ROTARY[1] * t
    return kf, kb, bf, bb


def host_ops_per_layer(k_f: Any, k_b: Any, host: HostMode, tp: Any) -> tuple[Any, Any]:
    """(forward, backward) operators the host issues for one layer: its kernels, the views an eager
    forward dispatches (and their autograd nodes), the tensor-parallel collectives it calls."""
    views = EAGER_VIEWS_PER_LAYER if host == HostMode.EAGER else 0
    tp_f = np.where(np.asarray(tp) > 1, TP_CALLS_PER_LAYER[0], 0)
    tp_b = np.where(np.asarray(tp) > 1, TP_CALLS_PER_LAYER[1], 0)
    return k_f + views + tp_f, k_b + views + tp_b


def async_tp_ops(stack: StackSpec, async_tp: Any, tp: Any) -> Any:
    """Host operators per layer (forward and backward) that a stack's asynchronous TP linears issue
    from Python beyond their kernels and TP_CALLS_PER_LAYER (``StackSpec.async_tp_host_ops``: the
    buffers, shard views, per-shard matmuls, collectives and waits of its autograd Functions), where
    asynchronous TP runs (``async_tp``: asked for, with sequence parallelism) on more than one rank."""
    return np.where(np.asarray(async_tp) & (np.asarray(tp) > 1), stack.async_tp_host_ops, 0)


def host_op_s(c: dict, host: HostMode, backward: bool = False) -> float:
    """Host seconds per operator issued in ``host`` mode (constants.toml [host]); an eager host uses
    the device profile's measured ``host_op_s`` (``backward``: ``host_bwd_op_s``, autograd's engine
    issuing from C++) where the probe measured one."""
    if host == HostMode.EAGER:
        fwd = float(c.get("host_op_s", c["host_eager_op_s"]))
        return float(c.get("host_bwd_op_s", fwd)) if backward else fwd
    return float(c[f"host_{host.value.replace('-', '_')}_op_s"])


def issue_bound_s(device_s: Any, host_s: Any, async_launch: bool) -> Any:
    """Seconds of a stretch of work between synchronisations: the larger of the device's kernels and
    the host's issue when the host queues ahead (a GPU stream), their sum when it does not (a CPU)."""
    return np.maximum(device_s, host_s) if async_launch else device_s + host_s


def sync_s(c: dict, host: HostMode) -> float:
    """Seconds one synchronisation costs the device: a device-to-host round trip (constants.toml
    [host] sync_round_trip_s) and the first operator the host then issues while the device idles."""
    return float(c["sync_round_trip_s"]) + host_op_s(c, host)


__all__ = [
    "async_tp_ops",
    "effective_host",
    "fuses_pointwise",
    "host_op_s",
    "host_ops_per_layer",
    "issue_bound_s",
    "optimizer_elements_s",
    "optimizer_host_s",
    "param_tensors",
    "sync_s",
    "unfused_extra",
]
