"""NCCL's own cost model of one collective call: NVIDIA/nccl src/graph/tuning.cc at commit 5067397c
(2026-06-11), ``ncclTopoTuneModel`` (a latency and a bandwidth per algorithm × protocol) and
``ncclTopoGetAlgoTime`` (time = latency + bytes / bandwidth). NCCL runs the algorithm and protocol
with the smallest predicted time (enqueue.cc ``topoGetAlgoInfo``), and so does this module.

Algorithms: ring and tree for all-reduce; ring, and PAT for one rank per node, for all-gather and
reduce-scatter. Protocols: LL (8-byte stores with a flag in each: half the wire, lowest latency),
LL128 (120 of every 128 bytes carry data; NVLink only) and Simple (full bandwidth, a fence per
step). Left out: NVLS and CollNet (switch-side reduction), aggregation of calls launched together,
user overrides (NCCL_ALGO, NCCL_PROTO). The constants are presets/constants.toml [latency] (seconds
and bytes/s, the source's µs and GB/s converted); the derivation is docs/derivations.md,
"Collective latency (NCCL's tuning model)". Everything broadcasts over numpy arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

LL, LL128, SIMPLE = 0, 1, 2  # NCCL's protocol order (NCCL_PROTO_LL, _LL128, _SIMPLE)
Triple = tuple[float, float, float]


@dataclass(frozen=True)
class NcclTuning:
    """tuning.cc's constants resolved for one device and its scale-up link. Latencies in seconds,
    per protocol (LL, LL128, Simple); bandwidth ceilings in bytes/s per node count (1, 2, more),
    already times the channel count."""

    base_ring_s: Triple  # baseLat: one call
    base_tree_s: Triple
    base_pat_s: float
    hw_ring_s: Triple  # hwLat of the scale-up link (NVLink or PCI): one ring step
    hw_tree_s: Triple  # one tree hop inside a node
    net_ring_s: Triple  # hwLat NET: one ring step across nodes
    net_tree_s: Triple  # one tree level across nodes; rings use it with one rank per node
    net_overhead_s: Triple  # floor on a ring step inside a node when the ring spans nodes
    pat_per_rank_s: float
    pat_net_divisor: float
    ring_plateau: float  # Simple ring all-reduce across nodes: latency × this
    ll_share: float  # LL: half the wire is flags
    ll128_share: float  # LL128: 120/128, taken as 0.92
    tree_share: float  # tree all-reduce
    tree_ll_share: float
    tree_ll128_share_node: float
    tree_ll128_share_net: float
    pat_share: float
    ll_max_bw: Triple  # llMaxBws
    ring_ll128_max_bw: Triple  # perChMaxRingLL128Bws × channels
    tree_max_bw: Triple  # perChMaxTreeBws × channels
    tree_ll128_max_bw: Triple  # perChMaxTreeLL128Bws × channels
    tree_correction: tuple[tuple[float, ...], ...]  # per protocol, by log2(bytes / 64)
    ll128: bool  # LL128 is enabled (not over PCIe)
    p2p_ll_threshold_bytes: float
    channels: float


#: [latency] keys read as they stand: per-protocol triples, and plain numbers
_TRIPLES = ("base_ring_s", "base_tree_s", "net_ring_s", "net_tree_s")
_SCALARS = (
    "base_pat_s",
    "pat_per_rank_s",
    "pat_net_divisor",
    "ll_share",
    "ll128_share",
    "tree_share",
    "tree_ll_share",
    "tree_ll128_share_node",
    "tree_ll128_share_net",
    "pat_share",
    "p2p_ll_threshold_bytes",
)
#: the per-protocol latencies of NcclTuning
_LATENCIES = (
    "base_ring_s",
    "base_tree_s",
    "hw_ring_s",
    "hw_tree_s",
    "net_ring_s",
    "net_tree_s",
    "net_overhead_s",
)


def _triple(x: Any) -> Triple:
    return (float(x[0]), float(x[1]), float(x[2]))


def nccl_tuning(
    lat: Mapping[str, Any], family: str, intra_bw: float, channels: float
) -> NcclTuning:
    """The constants of [latency] for a device of ``family`` whose scale-up link carries
    ``intra_bw`` bytes/s per direction: the architecture row by family, the link kind by speed (a
    link no faster than PCIe is PCIe: NCCL's LINK_NVL versus PCI, tuning.cc ``intraHw``)."""
    arch = int(lat["nccl_arch"].get(family, lat["nccl_arch_default"]))
    link = "pci" if intra_bw <= lat["pci_max_bw"] else "nvlink"
    cpu = int(lat["ll_max_bw_net_row"])  # across nodes NCCL indexes llMaxBws by CPU vendor
    ll_max = lat["ll_max_bw"]
    over = float(lat["net_overhead_s"])

    def per_channel(key: str) -> Triple:
        return _triple([channels * v for v in lat[key][arch]])

    return NcclTuning(
        **{key: _triple(lat[key]) for key in _TRIPLES},
        **{key: float(lat[key]) for key in _SCALARS},
        hw_ring_s=_triple(lat[f"{link}_ring_s"]),
        hw_tree_s=_triple(lat[f"{link}_tree_s"]),
        net_overhead_s=(over, over, over * lat["net_overhead_simple_factor"]),
        ring_plateau=float(lat["ring_plateau"][arch]),
        ll_max_bw=(float(ll_max[arch][0]), float(ll_max[cpu][1]), float(ll_max[cpu][2])),
        ring_ll128_max_bw=per_channel("ring_ll128_max_bw_per_channel"),
        tree_max_bw=per_channel("tree_max_bw_per_channel"),
        tree_ll128_max_bw=per_channel("tree_ll128_max_bw_per_channel"),
        tree_correction=tuple(tuple(float(v) for v in row) for row in lat["tree_correction"]),
        ll128=link == "nvlink",
        channels=float(channels),
    )


def without_latency(t: NcclTuning) -> NcclTuning:
    """``t`` with every latency zero: the model's bandwidth limit, where the ring at Simple wins
    (the α–β model's β term alone)."""
    zero = (0.0, 0.0, 0.0)
    return replace(t, **{key: zero for key in _LATENCIES}, base_pat_s=0.0, pat_per_rank_s=0.0)


def _nodes_index(k: np.ndarray) -> np.ndarray:
    """NCCL's index2: 0 for one node, 1 for two, 2 for more."""
    return (np.clip(k, 1, 3) - 1).astype(int)


def _at(values: Triple, i: np.ndarray) -> np.ndarray:
    return np.asarray(values)[i]


def _log2i(x: np.ndarray) -> np.ndarray:
    """floor(log2(x)) for x ≥ 1, −1 below (NCCL's log2i)."""
    return np.where(x >= 1, np.floor(np.log2(np.maximum(x, 1.0))), -1.0)


def _ring_latency(t: NcclTuning, p: int, steps, inter_steps, r, k) -> np.ndarray:
    """baseLat + the steps inside nodes × the link's hwLat + the steps across nodes × NET's; a ring
    across nodes still posts a network operation per step (getNetOverhead, x86 Intel: 1 µs, ×3
    for Simple); with one rank per node NCCL uses the tree's NET latency."""
    intra = np.where(k > 1, max(t.hw_ring_s[p], t.net_overhead_s[p]), t.hw_ring_s[p])
    inter = np.where(r <= 1, t.net_tree_s[p], t.net_ring_s[p])
    return t.base_ring_s[p] + (steps - inter_steps) * intra + inter_steps * inter


def _ring_bus_bw(t: NcclTuning, p: int, bus_bw, i2) -> np.ndarray:
    if p == LL:
        return np.minimum(_at(t.ll_max_bw, i2), bus_bw * t.ll_share)
    if p == LL128:
        return np.minimum(bus_bw * t.ll128_share, _at(t.ring_ll128_max_bw, i2))
    return bus_bw


def _tree_bus_bw(t: NcclTuning, p: int, bus_bw, i2, k) -> np.ndarray:
    bw = np.minimum(bus_bw * t.tree_share, _at(t.tree_max_bw, i2))
    if p == LL:
        return np.minimum(bw * t.tree_ll_share, _at(t.ll_max_bw, i2))
    if p == LL128:
        share = np.where(k == 1, t.tree_ll128_share_node, t.tree_ll128_share_net)
        return np.minimum(bw * share, _at(t.tree_ll128_max_bw, i2))
    return bw


def _tree_correction(t: NcclTuning, p: int, nbytes) -> np.ndarray:
    """treeCorrectionFactor: trees fall short of the model at medium sizes. NCCL applies entry
    floor(log2(bytes/64)) for 64 B to 256 MB, 1 above; a step up in that table makes its predicted
    time fall when a message crosses a power of two, so here the factor runs linearly in log2(bytes)
    between NCCL's entries (equal at each power of two; time stays non-decreasing in bytes, since
    no step exceeds ln 2 × the factor), 1 from 512 MB."""
    x = np.log2(np.maximum(np.asarray(nbytes, dtype=float), 1.0) / 64.0)
    row = np.asarray(t.tree_correction[p])
    return np.interp(x, np.arange(24.0), np.append(row[:23], 1.0))


def _protocols(t: NcclTuning) -> tuple[int, ...]:
    return (LL, LL128, SIMPLE) if t.ll128 else (LL, SIMPLE)


def all_reduce_call_s(nbytes, n, r, k, bus_bw, t: NcclTuning) -> np.ndarray:
    """Seconds of one all-reduce of ``nbytes`` over n = r·k ranks (r per node on k nodes) whose
    ring reaches ``bus_bw`` (NCCL's busBw, bytes/s): the fastest ring or tree, by protocol."""
    n, r, k = (np.maximum(np.asarray(x, dtype=float), 1.0) for x in (n, r, k))
    nbytes = np.asarray(nbytes, dtype=float)
    steps, inter_steps = 2 * (n - 1), np.where(k > 1, 2 * (k - 1), 0.0)
    i2, ring_share = _nodes_index(k), n / np.maximum(steps, 1.0)
    best = np.full(np.broadcast(nbytes, n, r, k, bus_bw).shape, np.inf)
    for p in _protocols(t):
        lat = _ring_latency(t, p, steps, inter_steps, r, k)
        if p == SIMPLE:  # "plateau effect of ring" across nodes (ncclTopoGetAlgoTime)
            big = (k > 1) & (nbytes / (t.channels * n) >= 64)
            lat = np.where(big, lat * t.ring_plateau, lat)
        best = np.minimum(best, lat + nbytes / (_ring_bus_bw(t, p, bus_bw, i2) * ring_share))
        lat = t.base_tree_s[p] + 2 * ((r - 1) * t.hw_tree_s[p] + _log2i(k) * t.net_tree_s[p])
        tree_bw = _tree_bus_bw(t, p, bus_bw, i2, k) * 0.5 * _tree_correction(t, p, nbytes)
        best = np.minimum(best, lat + nbytes / tree_bw)
    return np.where(n > 1, best, 0.0)


def all_gather_call_s(nbytes, n, r, k, bus_bw, t: NcclTuning) -> np.ndarray:
    """Seconds of one all-gather whose result is ``nbytes`` (equally a reduce-scatter of that input):
    the fastest ring by protocol, or PAT (Simple) when every rank is on its own node."""
    n, r, k = (np.maximum(np.asarray(x, dtype=float), 1.0) for x in (n, r, k))
    nbytes = np.asarray(nbytes, dtype=float)
    steps, inter_steps = n - 1, np.where(k > 1, k - 1, 0.0)
    i2, ring_share = _nodes_index(k), n / np.maximum(steps, 1.0)
    best = np.full(np.broadcast(nbytes, n, r, k, bus_bw).shape, np.inf)
    for p in _protocols(t):
        lat = _ring_latency(t, p, steps, inter_steps, r, k)
        best = np.minimum(best, lat + nbytes / (_ring_bus_bw(t, p, bus_bw, i2) * ring_share))
    pat_lat = (
        t.base_pat_s + _log2i(k) * t.net_tree_s[SIMPLE] / t.pat_net_divisor + n * t.pat_per_rank_s
    )
    pat = pat_lat + nbytes / (bus_bw * t.pat_share)
    best = np.where((r <= 1) & (k > 1), np.minimum(best, pat), best)
    return np.where(n > 1, best, 0.0)


def p2p_protocol(nbytes, t: NcclTuning) -> np.ndarray:
    """LL for a send of at most NCCL_P2P_LL_THRESHOLD bytes on one channel, else Simple
    (enqueue.cc: ``protoLL &= bytes <= nChannels * P2pLLThreshold``)."""
    return np.where(np.asarray(nbytes) <= t.p2p_ll_threshold_bytes, LL, SIMPLE)


def p2p_hop(t: NcclTuning, proto, crosses) -> tuple[np.ndarray, np.ndarray]:
    """(baseLat, one hop's latency), seconds, of a send of ``proto``: tuning.cc models no send, so
    a send is costed as one ring step of its protocol: baseLat + one hwLat (the scale-up link's, or
    NET's across nodes; an ASSUMPTION, docs/derivations.md "Collective latency")."""
    ll = proto == LL
    base = np.where(ll, t.base_ring_s[LL], t.base_ring_s[SIMPLE])
    hw = np.where(ll, t.hw_ring_s[LL], t.hw_ring_s[SIMPLE])
    net = np.where(ll, t.net_ring_s[LL], t.net_ring_s[SIMPLE])
    return base, np.where(crosses, net, hw)


def p2p_rate(t: NcclTuning, proto, bw, crosses) -> np.ndarray:
    """Bytes/s a send of ``proto`` reaches on a link of ``bw``: Simple all of it, LL half up to
    llMaxBw (one node, or two)."""
    cap = np.where(crosses, t.ll_max_bw[1], t.ll_max_bw[0])
    return np.where(proto == LL, np.minimum(cap, bw * t.ll_share), bw)


__all__ = [
    "LL",
    "LL128",
    "SIMPLE",
    "NcclTuning",
    "all_gather_call_s",
    "all_reduce_call_s",
    "nccl_tuning",
    "p2p_hop",
    "p2p_protocol",
    "p2p_rate",
    "without_latency",
]
