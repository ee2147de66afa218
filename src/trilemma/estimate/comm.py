"""Collective communication times, α–β model with ring algorithms (Thakur, Rabenseifner & Gropp
2005, "Optimization of Collective Communication Operations in MPICH", §4; NCCL's "bus bandwidth"
convention in nccl-tests PERFORMANCE.md).

For M bytes over n ranks with per-rank link bandwidth β (bytes/s, one direction) and per-step
latency α:  all-reduce 2(n−1)·(α + M/(n·β)); reduce-scatter and all-gather (n−1)·(α + M/(n·β));
all-to-all (n−1)·(α + M/(n·β)) with M the bytes each rank sends in total; point-to-point α + M/β.
All functions broadcast over arrays; n = 1 costs nothing.
"""

from __future__ import annotations

import numpy as np

ArrayLike = float | np.ndarray


def all_reduce_s(nbytes: ArrayLike, n: ArrayLike, bw: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, 2 * (n - 1) * (alpha + nbytes / (np.maximum(n, 1) * bw)), 0.0)


def all_gather_s(nbytes: ArrayLike, n: ArrayLike, bw: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    """All-gather whose *result* is nbytes (equally: reduce-scatter of an nbytes input)."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, (n - 1) * (alpha + nbytes / (np.maximum(n, 1) * bw)), 0.0)


reduce_scatter_s = all_gather_s


def all_to_all_s(nbytes: ArrayLike, n: ArrayLike, bw: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    """All-to-all where each rank holds nbytes and keeps 1/n of it locally."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, (n - 1) * (alpha + nbytes / (np.maximum(n, 1) * bw)), 0.0)


def p2p_s(nbytes: ArrayLike, bw: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    return alpha + nbytes / bw


def group_link(stride: ArrayLike, size: ArrayLike, node_size: int, intra_bw: float, inter_bw: float,
               intra_alpha: float, inter_alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth, latency) of a process group of ``size`` ranks spaced ``stride`` apart.

    Ranks are numbered tp fastest, then cp, dp, pp (Megatron-Core's default order), so a group
    stays on the scale-up link exactly when stride × size ≤ devices per node.
    """
    inside = np.asarray(stride) * np.asarray(size) <= node_size
    return np.where(inside, intra_bw, inter_bw), np.where(inside, intra_alpha, inter_alpha)
