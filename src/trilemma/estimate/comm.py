"""Collective communication times, α–β model (Thakur, Rabenseifner & Gropp 2005, "Optimization
of Collective Communication Operations in MPICH", §4), made hierarchical for groups that span
nodes, as NCCL runs them.

Within one node (scale-up link, per-device bandwidth β_in), ring algorithms over n ranks moving
M bytes: all-reduce 2(n−1)·(α + M/(n·β)); reduce-scatter and all-gather (n−1)·(α + M/(n·β)).

A group of n ranks spanning k nodes with r = n/k ranks on each node runs in two phases: first
within each node over r ranks, then across nodes over k ranks on the 1/r share each rank holds —
the r ranks of a node drive r network cards at once (NCCL's hierarchical rings and trees; NCCL
"bus bandwidth" across nodes approaches the node's aggregate NIC bandwidth, nccl-tests
doc/PERFORMANCE.md). When the group puts one rank per node (stride ≥ devices per node), r = 1
and each rank's own card carries the whole inter-node phase.

Ranks are numbered tp fastest, then cp, dp, pp (Megatron-Core's default order): a group whose
members are ``stride`` apart has r = node_size // stride members per node (at least 1).
All functions broadcast over numpy arrays; a group of one rank costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ArrayLike = float | np.ndarray


@dataclass(frozen=True)
class Fabric:
    """The links a collective can use: per-device, per-direction bandwidths and per-step latencies."""

    node_size: int
    intra_bw: float
    inter_bw: float
    intra_alpha: float
    inter_alpha: float


def _split(stride: ArrayLike, size: ArrayLike, f: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """(ranks per node r, nodes k) of a group of ``size`` ranks ``stride`` apart."""
    size = np.asarray(size, dtype=float)
    per_node = np.maximum(1.0, f.node_size // np.maximum(np.asarray(stride, dtype=float), 1.0))
    r = np.minimum(size, per_node)
    return r, np.maximum(1.0, size / r)


def _ring(
    steps_factor: float, nbytes: ArrayLike, n: np.ndarray, bw: float, alpha: float
) -> np.ndarray:
    return np.where(
        n > 1, steps_factor * (n - 1) * (alpha + nbytes / (np.maximum(n, 1.0) * bw)), 0.0
    )


def all_reduce_s(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
    """All-reduce of nbytes: intra-node ring over r ranks, then inter-node over k on nbytes/r."""
    r, k = _split(stride, size, f)
    return _ring(2.0, nbytes, r, f.intra_bw, f.intra_alpha) + _ring(
        2.0, nbytes / r, k, f.inter_bw, f.inter_alpha
    )


def all_gather_s(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
    """All-gather whose *result* is nbytes (equally: reduce-scatter of an nbytes input)."""
    r, k = _split(stride, size, f)
    return _ring(1.0, nbytes, r, f.intra_bw, f.intra_alpha) + _ring(
        1.0, nbytes / r, k, f.inter_bw, f.inter_alpha
    )


reduce_scatter_s = all_gather_s


def all_to_all_s(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
    """All-to-all where each rank holds nbytes and keeps 1/n: the share bound for ranks on the same
    node crosses the scale-up link, the rest crosses the rank's own network card."""
    n = np.asarray(size, dtype=float)
    r, _ = _split(stride, size, f)
    n1 = np.maximum(n, 1.0)
    t = (
        nbytes * (r - 1) / n1 / f.intra_bw
        + nbytes * (n - r) / n1 / f.inter_bw
        + (r - 1) * f.intra_alpha
        + (n - r) * f.inter_alpha
    )
    return np.where(n > 1, t, 0.0)


def p2p_s(nbytes: ArrayLike, crosses_nodes: np.ndarray, f: Fabric) -> np.ndarray:
    """Point-to-point send between neighbouring ranks, on the scale-up link or the network."""
    return np.where(
        crosses_nodes, f.inter_alpha + nbytes / f.inter_bw, f.intra_alpha + nbytes / f.intra_bw
    )
