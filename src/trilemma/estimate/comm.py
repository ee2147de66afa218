"""Collective communication times: NCCL's own cost model per call (trilemma.estimate.nccl, from
NVIDIA/nccl src/graph/tuning.cc) over the bandwidth of a hierarchical ring (Thakur, Rabenseifner &
Gropp 2005, "Optimization of Collective Communication Operations in MPICH", §4).

Bandwidth. Within one node (scale-up link, per-device bandwidth β_in), a ring over n ranks moving M
bytes takes 2(n−1)/n·M/β (all-reduce) or (n−1)/n·M/β (reduce-scatter, all-gather). A group of n
ranks spanning k nodes with r = n/k on each runs its bytes in two phases: within each node over r
ranks, then across nodes over k ranks on the 1/r share each rank holds — the r ranks of a node drive
r network cards at once (NCCL "bus bandwidth" across nodes approaches the node's aggregate NIC
bandwidth, nccl-tests doc/PERFORMANCE.md). When the group puts one rank per node (stride ≥ devices
per node), r = 1 and each rank's own card carries the inter-node phase. The two phases in series
are one bus bandwidth (``bus_bw_s``), NCCL's busBw, which its protocols share out.

Latency. Each call costs NCCL's baseLat plus a hardware latency per ring step or tree level, by
protocol and link (NVLink, PCIe, network); NCCL runs the algorithm and protocol with the smallest
latency + bytes / bandwidth, and so does this model (docs/derivations.md, "Collective latency").

On a probe profile that measured its collective (gloo between a CPU's local processes,
``trilemma.probe.collective``), all-reduce and all-gather take that α–β line instead of NCCL's model.

Ranks are numbered tp fastest, then cp, dp, pp (Megatron-Core's default order): a group whose
members are ``stride`` apart has r = node_size // stride members per node (at least 1).
All functions broadcast over numpy arrays; a group of one rank costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import TYPE_CHECKING, Any

import numpy as np

from trilemma.estimate.nccl import (
    NcclTuning,
    all_gather_call_s,
    all_reduce_call_s,
    nccl_tuning,
    p2p_hop,
    p2p_protocol,
    p2p_rate,
)
from trilemma.specs.hardware import COLLECTIVE_BUS_BW_KEY, COLLECTIVE_LATENCY_KEY

if TYPE_CHECKING:
    from trilemma.specs import ClusterSpec

ArrayLike = float | np.ndarray


@dataclass(frozen=True)
class Fabric:
    """The links a collective can use: per-device, per-direction bandwidths (times the share a ring
    reaches) and NCCL's latency constants for this device and link (nccl.nccl_tuning)."""

    node_size: int
    intra_bw: float
    inter_bw: float
    nccl: NcclTuning
    #: a probe profile's measured all-reduce (latency s a call of 2 ring steps, bus bytes/s): gloo
    #: between a CPU's local processes (trilemma.probe.collective); None: NCCL's model
    measured: tuple[float, float] | None = None


def fabric(cluster: ClusterSpec, link: float, consts: Mapping[str, Mapping[str, Any]]) -> Fabric:
    """The fabric of ``cluster``: its links at the share ``link`` a ring reaches, NCCL's constants
    (constants.toml [latency]) for its chip family and scale-up link, [memory] nccl_channels."""
    channels = consts["memory"]["nccl_channels"]
    own = cluster.hardware.efficiency
    measured = None
    if COLLECTIVE_LATENCY_KEY in own and COLLECTIVE_BUS_BW_KEY in own:
        measured = (own[COLLECTIVE_LATENCY_KEY], own[COLLECTIVE_BUS_BW_KEY])
    return Fabric(
        node_size=cluster.node_size,
        intra_bw=cluster.intra_bw * link,
        inter_bw=cluster.inter_bw * link,
        nccl=nccl_tuning(consts["latency"], cluster.hardware.family, cluster.intra_bw, channels),
        measured=measured,
    )


def _measured_s(
    nbytes: ArrayLike, size: ArrayLike, steps: float, measured: tuple[float, float]
) -> np.ndarray:
    """A ring collective on a measured α–β fabric (``Fabric.measured`` = (α s, bus bytes/s)): ``steps``
    × (n−1) ring steps of α/2 each (α was timed on two ranks' 2 steps), and steps·(n−1)/n·M bytes per
    rank at the bus bandwidth (Thakur, Rabenseifner & Gropp 2005 §4: an all-reduce is 2 such passes,
    an all-gather 1)."""
    alpha, bus = measured
    n = np.asarray(size, dtype=float)
    per_rank = steps * (n - 1) / np.maximum(n, 1.0) * np.asarray(nbytes, dtype=float)
    return np.where(n > 1, steps * (n - 1) * alpha / 2 + per_rank / bus, 0.0)


def _split(stride: ArrayLike, size: ArrayLike, f: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """(ranks per node r, nodes k) of a group of ``size`` ranks ``stride`` apart."""
    size = np.asarray(size, dtype=float)
    per_node = np.maximum(1.0, f.node_size // np.maximum(np.asarray(stride, dtype=float), 1.0))
    r = np.minimum(size, per_node)
    return r, np.maximum(1.0, size / r)


def bus_bw(r: np.ndarray, k: np.ndarray, f: Fabric) -> np.ndarray:
    """Bytes/s of a ring over r ranks per node on k nodes, as NCCL's busBw: the two phases in
    series, ((n−1)/n) / ((r−1)/r/β_in + (k−1)/k/(r·β_inter)); β_in on one node, β_inter with one
    rank per node. Undefined (nan) for a group of one."""
    n = r * k
    with np.errstate(divide="ignore", invalid="ignore"):
        per_byte = (r - 1) / r / f.intra_bw + (k - 1) / k / (r * f.inter_bw)
        return ((n - 1) / n) / per_byte


#: a call whose inputs hold at most this many values each is kept (_remembered); the solver's grids
#: pass larger arrays, which are computed every time
_SMALL = 8


def _remembered(collective: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``collective`` (nbytes, stride, size, fabric), remembering the seconds of small calls: a fit
    re-times the same rows' collectives hundreds of times with constants they do not depend on (the
    time constants' refit: 260,000 calls of a few hundred kinds, 36 of its 83 s). Every input is made
    float first, as the collectives do, so a remembered call returns what computing it would."""

    @lru_cache(maxsize=1 << 16)
    def small(key: tuple, f: Fabric) -> np.ndarray:
        args = (np.frombuffer(b).reshape(shape) for shape, b in key)
        out = np.asarray(collective(*args, f))
        out.flags.writeable = False
        return out

    @wraps(collective)
    def call(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
        args = [np.asarray(x, dtype=float) for x in (nbytes, stride, size)]
        if max(a.size for a in args) > _SMALL:
            return collective(*args, f)
        return small(tuple((a.shape, a.tobytes()) for a in args), f).copy()

    return call


@_remembered
def all_reduce_s(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
    """All-reduce of nbytes over ``size`` ranks ``stride`` apart, the fastest of NCCL's ring and
    tree by protocol (nccl.all_reduce_call_s)."""
    if f.measured is not None:
        return _measured_s(nbytes, size, 2.0, f.measured)
    r, k = _split(stride, size, f)
    return all_reduce_call_s(nbytes, r * k, r, k, _bus(r, k, f), f.nccl)


@_remembered
def all_gather_s(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
    """All-gather whose *result* is nbytes (equally: reduce-scatter of an nbytes input)."""
    if f.measured is not None:
        return _measured_s(nbytes, size, 1.0, f.measured)
    r, k = _split(stride, size, f)
    return all_gather_call_s(nbytes, r * k, r, k, _bus(r, k, f), f.nccl)


reduce_scatter_s = all_gather_s


def _bus(r: np.ndarray, k: np.ndarray, f: Fabric) -> np.ndarray:
    """bus_bw with a finite stand-in for a group of one (whose time is zero anyway)."""
    return np.where(r * k > 1, bus_bw(np.maximum(r, 1.0), k, f), f.intra_bw)


def _a2a_s(
    peer_bytes: ArrayLike,
    links: tuple[ArrayLike, ArrayLike],
    peers: tuple[ArrayLike, ArrayLike],
    overlapped: bool,
    f: Fabric,
) -> np.ndarray:
    """One all-to-all call's seconds: one baseLat, one hop per peer of its link (nccl.p2p_hop), by
    the protocol a send of ``peer_bytes`` takes (nccl.p2p_protocol); ``links`` = (bytes on the
    scale-up link, bytes on the rank's network card), ``peers`` = (peers on each); the two links in
    series, or at once where ``overlapped``."""
    t = f.nccl
    proto = p2p_protocol(np.asarray(peer_bytes, dtype=float), t)
    base, hop_in = p2p_hop(t, proto, False)
    _, hop_out = p2p_hop(t, proto, True)
    t_in = links[0] / p2p_rate(t, proto, f.intra_bw, False)
    t_out = links[1] / p2p_rate(t, proto, f.inter_bw, True)
    wire = np.maximum(t_in, t_out) if overlapped else t_in + t_out
    return base + peers[0] * hop_in + peers[1] * hop_out + wire


def all_to_all_s(nbytes: ArrayLike, stride: ArrayLike, size: ArrayLike, f: Fabric) -> np.ndarray:
    """All-to-all where each rank holds nbytes and keeps 1/n, as NCCL runs it: one send and receive
    per peer in a group. The share bound for ranks on the same node crosses the scale-up link, the
    rest crosses the rank's own network card, one link after the other (_a2a_s)."""
    n = np.asarray(size, dtype=float)
    r, _ = _split(stride, size, f)
    n1 = np.maximum(n, 1.0)
    links = (nbytes * (r - 1) / n1, nbytes * (n - r) / n1)
    s = _a2a_s(np.asarray(nbytes, dtype=float) / n1, links, (r - 1, n - r), False, f)
    return np.where(n > 1, s, 0.0)


def node_limited_all_to_all_s(
    copy_bytes: ArrayLike,
    copies: float,
    max_nodes: int,
    stride: ArrayLike,
    size: ArrayLike,
    f: Fabric,
) -> np.ndarray:
    """Expert-parallel dispatch (or combine) of ``copies`` routed copies of each token, ``copy_bytes``
    one copy of a rank's tokens, when routing sends a token to at most ``max_nodes`` nodes
    (DeepSeek-V3, arXiv 2412.19437 §3.2.2): a token crosses the network once per remote target node,
    to the GPU of its own in-node index, then the scale-up link forwards it to its experts there, the
    two links at once. Of k nodes, M = min(max_nodes, k) drawn evenly, M·(k−1)/k are remote (at most
    the copies·(n−r)/n that cross without the limit); the scale-up link carries each copy not for
    its own GPU, (r−1)/r of the remote ones again (docs/derivations.md, "Node-limited all-to-all")."""
    n = np.asarray(size, dtype=float)
    r, k = _split(stride, size, f)
    n1 = np.maximum(n, 1.0)
    remote = np.minimum(copies * (n - r) / n1, np.minimum(max_nodes, k) * (k - 1) / k)
    nvlink = copies * (r - 1) / n1 + copies * (n - r) / n1 * (r - 1) / r
    links = (copy_bytes * nvlink, copy_bytes * remote)
    s = _a2a_s(copy_bytes * copies / n1, links, (r - 1, k - 1), True, f)
    return np.where(n > 1, s, 0.0)


def p2p_s(nbytes: ArrayLike, crosses_nodes: np.ndarray, f: Fabric) -> np.ndarray:
    """Point-to-point send between neighbouring ranks, on the scale-up link or the network: one
    baseLat and one hop of the send's protocol (nccl.p2p_hop), its bytes at that protocol's rate."""
    t = f.nccl
    proto = p2p_protocol(nbytes, t)
    base, hop = p2p_hop(t, proto, crosses_nodes)
    bw = np.where(crosses_nodes, f.inter_bw, f.intra_bw)
    return base + hop + nbytes / p2p_rate(t, proto, bw, crosses_nodes)
