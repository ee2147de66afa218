"""Pipeline placement and the pipeline's time: how many layers each pipeline rank holds, which
rank is the slowest, its sends and the 1F1B bubble.

Stages may be uneven when pp·vp does not divide the layers (Dubey et al. 2024, arXiv 2407.21783
§3.3.2: Llama 3.1 405B ran 126 layers on pp = 16). The derivation of both counts is in
docs/derivations.md, section "Pipeline placement".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from trilemma.estimate.comm import p2p_s
from trilemma.estimate.host import issue_bound_s, sync_s

if TYPE_CHECKING:
    from trilemma.estimate.step_context import StepContext


def stage_layers(n_layers: Any, pp: Any, vp: Any = 1) -> Any:
    """Layers on the most loaded pipeline rank (ints or broadcastable arrays).

    The step waits for the heaviest rank, so time and memory use its layer count. The pp·vp chunks
    hold ⌈n_layers / (pp·vp)⌉ = per layers less a deficit D cut at the two ends, A = ⌈D/2⌉ from the
    first chunks, B = ⌊D/2⌋ from the last (docs/derivations.md, "Pipeline placement"):
    per·vp − ⌊A/pp⌋ − ⌊B/pp⌋, one fewer where (A mod pp) + (B mod pp) ≥ pp."""
    chunks = pp * vp
    per = -(-n_layers // chunks)
    deficit = chunks * per - n_layers
    a, b = -(-deficit // 2), deficit // 2
    return per * vp - a // pp - b // pp - ((a % pp) + (b % pp) >= pp)


def last_stage_layers(n_layers: Any, pp: Any, vp: Any = 1) -> Any:
    """Layers on the last pipeline rank, the one that also holds the final norm, the LM head and the
    loss: per·vp − ⌈⌊D/2⌋ / pp⌉ − ⌊⌈D/2⌉ / pp⌋, torchtitan's stage split (docs/derivations.md,
    "Pipeline placement"). Equal to ``stage_layers`` when the chunks divide the layers."""
    chunks = pp * vp
    per = -(-n_layers // chunks)
    deficit = chunks * per - n_layers
    lost = -(-(deficit // 2) // pp) + (-(-deficit // 2)) // pp
    return per * vp - lost


def cost_split(n_layers: int, pp: int, head_units: float) -> tuple[int, int]:
    """(most layers on a rank without the LM head, layers on the head's rank) when the stages are split
    by block cost, a layer 1 unit and the head ``head_units``: nanotron's greedy placement (huggingface/
    nanotron src/nanotron/models/base.py@2025-02-19, build_model: each block goes to the current rank,
    which moves on once the cumulative cost passes rank·total/pp; the head after the last layer)."""
    total, rank, cum = n_layers + head_units, 0, 0.0
    per = [0] * pp
    for _ in range(n_layers):
        per[rank] += 1
        cum += 1.0
        if cum > total * (rank + 1) / pp and rank < pp - 1:
            rank += 1
    others = [n for r, n in enumerate(per) if r != rank]
    return max(others, default=0), per[rank]


def split_layers(ctx: StepContext, layer_s: Any, head: Any) -> tuple[Any, Any, Any]:
    """(layers on the heaviest rank, layers on the slowest rank, whether the slowest holds the head):
    an even split (stage_layers, last_stage_layers), or the stack's cost split
    (``StackSpec.pp_cost_split``, without interleaving) with nanotron's block costs (models/llama.py
    get_block_compute_costs: a layer 4·d·d_attn + (FFN matrices)·d_ff·d, the head vocab·d)."""
    m, L = ctx.m, ctx.L
    pp, vp = L.pp, L.vp
    layers = stage_layers(m.n_layers, pp, vp)
    last = last_stage_layers(m.n_layers, pp, vp)
    head_rank = last * layer_s + head >= layers * layer_s
    n_l = np.where(head_rank, last, layers)
    if not ctx.stack.pp_cost_split:
        return layers, n_l, head_rank
    unit = 4 * m.d_model * m.d_attn + m.ffn_matrices * m.ffn_dim * m.d_model
    split = {
        int(p): cost_split(m.n_layers, int(p), m.vocab_size * m.d_model / unit)
        for p in np.unique(pp)
    }
    other = np.vectorize(lambda p: split[int(p)][0])(pp)
    with_head = np.vectorize(lambda p: split[int(p)][1])(pp)
    c_head = with_head * layer_s + head >= other * layer_s
    c_l = np.where(c_head, with_head, other)
    even = np.asarray(vp) > 1
    return (
        np.where(even, layers, np.maximum(other, with_head)),
        np.where(even, n_l, c_l),
        np.where(even, head_rank, c_head),
    )


@dataclass(frozen=True)
class PipelineTimes:
    """One micro-batch through the slowest pipeline rank, seconds, and the step's bubble."""

    layers: Any  # layers on the heaviest rank
    ops_mb: dict[str, np.ndarray]  # compute by operation class (and the LM head on its rank)
    compute_mb: np.ndarray  # the sum of ops_mb
    comm_mb: np.ndarray  # exposed tensor/context/expert-parallel communication
    p2p_mb: np.ndarray  # point-to-point sends between stages
    bubble_s: np.ndarray  # per step


#: DualPipe's bubble in stage-times (F + B): F&B + B − 3W with F&B = F + B (the paired chunks' compute
#: runs back to back on the SMs; only their communication overlaps), and the stage-time split by matmul
#: FLOPs — the backward twice the forward (Kaplan et al. 2020, arXiv 2001.08361 §2.1), half of it the
#: weight-gradient GEMMs (W): F = 1/3, B = 2/3, W = 1/3, so 1/3 + 2/3 + 2/3 − 1 = 2/3
DUALPIPE_STAGES = 2.0 / 3.0


def dualpipe_runs(dualpipe: bool, pp: Any) -> np.ndarray:
    """Where DualPipe's schedule runs: the stack's feature at an even pipeline degree (it feeds
    micro-batches from both ends, PP/2 stages each way; arXiv 2412.19437 §3.2.1)."""
    pp = np.asarray(pp)
    return np.asarray(bool(dualpipe)) & (np.mod(pp, 2) == 0) & (pp > 1)


def bubble_s(pp: Any, vp: Any, stage_mb: Any, dualpipe: bool) -> np.ndarray:
    """The pipeline bubble per step, s, from one micro-batch's stage-time (forward and backward):
    1F1B's (pp − 1)/vp stage-times (Narayanan et al. 2021 §2.2, interleaved /v); DualPipe's
    (pp/2 − 1)(F&B + B − 3W) at an even pp (DeepSeek-V3 report, arXiv 2412.19437 §3.2.1 Table 2),
    (pp/2 − 1)·DUALPIPE_STAGES stage-times."""
    pp = np.asarray(pp, dtype=float)
    one_f_one_b = (pp - 1) / vp * stage_mb
    if not dualpipe:
        return one_f_one_b
    dual = np.maximum(pp / 2 - 1, 0.0) * DUALPIPE_STAGES * stage_mb
    return np.where(dualpipe_runs(dualpipe, pp), dual, one_f_one_b)


#: the host operators of the embeddings, final norm, LM head and loss, forward and backward, as eager
#: PyTorch issues them (token and position lookups and their add; the norm; the head matmul; the fp32
#: cast, log-softmax and NLL; their backwards, the head's two GEMMs and the embeddings' dense backward)
HEAD_HOST_OPS = 20


def pipeline_s(
    ctx: StepContext,
    per_class: dict[str, np.ndarray],
    head: np.ndarray,
    layer_comm: np.ndarray,
    host_layer: np.ndarray,
) -> PipelineTimes:
    """The slowest rank, the heaviest one or the last one (the head's) when its fewer layers plus
    the head take longer; its sends, one activation each way per virtual stage; and the bubble
    (``bubble_s``: 1F1B's, or DualPipe's where the stack runs it). The host issues
    a micro-batch's operators (``host_layer`` per layer) while the device runs them: what the host
    takes beyond the device is the ``host`` class (host.issue_bound_s). Blocking sends and receives
    synchronise the host each time (Megatron-LM's p2p_communication calls torch.cuda.synchronize()
    after batch_isend_irecv) unless the stack overlaps them (StackSpec.pp_overlap)."""
    m, L = ctx.m, ctx.L
    pp, vp = L.pp, L.vp
    layer_s = sum(per_class.values())
    layers, n_l, head_rank = split_layers(ctx, layer_s, head)
    ops_mb = {k: n_l * v for k, v in per_class.items()}
    ops_mb["lm_head"] = np.where(head_rank, head, 0.0)
    compute_mb = sum(ops_mb.values())
    ops_mb = {k: np.broadcast_to(v, np.shape(compute_mb)) for k, v in ops_mb.items()}
    comm_mb = layers * layer_comm
    host_mb = n_l * host_layer + np.where(
        head_rank, (head > 0) * HEAD_HOST_OPS * ctx.host_op_s, 0.0
    )
    device_mb = compute_mb + comm_mb
    ops_mb["host"] = issue_bound_s(device_mb, host_mb, ctx.async_launch) - device_mb
    compute_mb = compute_mb + ops_mb["host"]
    ops_mb = {k: np.broadcast_to(v, np.shape(compute_mb)) for k, v in ops_mb.items()}
    act_msg = ctx.e * ctx.T * m.d_model * L.sp_share
    crosses = L.n_gpus > ctx.cluster.node_size
    sends = 0.0 if ctx.stack.pp_overlap else 1.0
    p2p_mb = np.where(
        pp > 1, 2 * vp * sends * (p2p_s(act_msg, crosses, ctx.fab) + sync_s(ctx.c, ctx.host)), 0.0
    )
    stage_mb = compute_mb + comm_mb + p2p_mb
    bubble = bubble_s(pp, vp, stage_mb, ctx.stack.pp_dualpipe)
    return PipelineTimes(layers, ops_mb, compute_mb, comm_mb, p2p_mb, bubble)


__all__ = [
    "DUALPIPE_STAGES",
    "PipelineTimes",
    "bubble_s",
    "dualpipe_runs",
    "cost_split",
    "last_stage_layers",
    "pipeline_s",
    "split_layers",
    "stage_layers",
]
