"""Collective latency: NCCL's tuning model (trilemma.estimate.nccl, comm) against published
nccl-tests tables, and the properties a time per call must keep.

Published checks (all_reduce_perf, float sum, the out-of-place time; the fabric is the estimator's
own: the preset's links × the calibrated ``link`` share, NCCL's constants for its chip):
- DGX H100, 8 GPUs on one node: NVIDIA/dgxc-benchmarking nccl/README.md at commit 46e42015 (the
  recipe's sample output): 8 B 13.67 µs, 64 KB 19.54, 1 MB 27.37, 2 MB 42.21.
- 2 nodes × 8 A100-SXM 80 GB, 8 InfiniBand cards each (Crusoe): dstackai/dstack
  examples/clusters/crusoe/README.md at commit 107fefef (2026-02-12): 8 B 27.70 µs, 64 KB 49.43,
  1 MB 81.71, 2 MB 113.03.
The model gives 15.0, 15.8, 28.0, 41.0 µs (one node) and 25.2, 31.3, 76.0, 103.6 µs (two nodes).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trilemma.estimate.comm import (
    Fabric,
    all_gather_s,
    all_reduce_s,
    all_to_all_s,
    bus_bw,
    fabric,
    p2p_s,
)
from trilemma.estimate.nccl import without_latency
from trilemma.presets import constants
from trilemma.resolve import make_cluster

US = 1e-6


def _fabric(gpu: str, n_gpus: int) -> Fabric:
    consts = constants()
    return fabric(make_cluster(gpu, n_gpus), consts["efficiency"]["link"], consts)


# Tolerance ±25%: NCCL's constants are set to rank algorithms, not to predict times (tuning.cc
# corrects its own tree bandwidth by up to 2.5× at medium sizes); one table's in-place and
# out-of-place times differ by up to 8% at these sizes (Crusoe 1 MB: 81.71 and 88.58 µs); the
# links are the presets' (DGX-class), the hosts' CPUs and NCCL versions unknown.
PUBLISHED = [
    # (GPU preset, GPUs, bytes, measured µs, source)
    ("h100-sxm", 8, 8, 13.67, "dgxc-benchmarking nccl/README.md"),
    ("h100-sxm", 8, 1048576, 27.37, "dgxc-benchmarking nccl/README.md"),
    ("h100-sxm", 8, 2097152, 42.21, "dgxc-benchmarking nccl/README.md"),
    ("a100-80gb", 16, 8, 27.70, "dstack examples/clusters/crusoe/README.md"),
    ("a100-80gb", 16, 1048576, 81.71, "dstack examples/clusters/crusoe/README.md"),
    ("a100-80gb", 16, 2097152, 113.03, "dstack examples/clusters/crusoe/README.md"),
]


@pytest.mark.parametrize(("gpu", "n", "nbytes", "measured_us", "source"), PUBLISHED)
def test_all_reduce_call_matches_published_nccl_tests(gpu, n, nbytes, measured_us, source):
    t = float(all_reduce_s(float(nbytes), 1, n, _fabric(gpu, n)))
    assert t == pytest.approx(measured_us * US, rel=0.25), source


def test_medium_all_reduce_falls_below_published_known_gap():
    """At 64 KB the model (tuning.cc's choice and its own estimate) runs below nccl-tests: 0.81× on
    one H100 node, 0.63× on two A100 nodes (the tree LL its correction table favours there). Pinned
    so that a change which closes or widens the gap is seen (docs/derivations.md)."""
    one = float(all_reduce_s(65536.0, 1, 8, _fabric("h100-sxm", 8))) / (19.54 * US)
    two = float(all_reduce_s(65536.0, 1, 16, _fabric("a100-80gb", 16))) / (49.43 * US)
    assert 0.7 < one < 1.0 and 0.55 < two < 0.75


def test_small_calls_cost_latency_not_bytes():
    """8 B and 8 KB on one A100 node differ by less than 1 µs: LL's per-call and per-step latency
    (6.6 + 14 × 0.6 µs) is what a small all-reduce costs, not its bytes."""
    f = _fabric("a100-80gb", 8)
    small = all_reduce_s(np.array([8.0, 8192.0]), 1, 8, f)
    assert small[0] == pytest.approx(15.0 * US, rel=0.01) and small[1] - small[0] < 1 * US


def test_pcie_links_are_slower_per_step_and_have_no_ll128():
    """The same chip on PCIe pays PCI's hwLat (1.0 µs LL per step against NVLink's 0.6)."""
    nvl = float(all_reduce_s(8.0, 1, 8, _fabric("h100-sxm", 8)))
    pci = float(all_reduce_s(8.0, 1, 8, _fabric("h100-pcie", 8)))
    assert pci - nvl == pytest.approx(14 * (1.0 - 0.6) * US, rel=0.05)
    assert _fabric("h100-sxm", 8).nccl.ll128 and not _fabric("h100-pcie", 8).nccl.ll128


SHAPES = [(1, 8), (1, 16), (1, 64), (8, 8), (1, 4), (2, 4)]  # (stride, size)


@pytest.mark.parametrize("gpu", ["a100-80gb", "h100-sxm", "h100-pcie"])
def test_call_time_never_falls_as_bytes_grow(gpu):
    f = _fabric(gpu, 64)
    nbytes = np.unique(np.round(np.logspace(0, 11, 3000)))
    for stride, size in SHAPES:
        for fn in (all_reduce_s, all_gather_s, all_to_all_s):
            t = fn(nbytes, stride, size, f)
            assert np.all(np.diff(t) >= -1e-15), (fn.__name__, stride, size)
    for crosses in (False, True):
        assert np.all(np.diff(p2p_s(nbytes, np.array(crosses), f)) >= 0)


@pytest.mark.parametrize(("stride", "size"), SHAPES)
def test_large_messages_approach_the_bandwidth_bound(stride, size):
    """At 100 GB the latencies vanish against the bytes: the ring at Simple, on the bus bandwidth."""
    f = _fabric("a100-80gb", 64)
    z = Fabric(f.node_size, f.intra_bw, f.inter_bw, without_latency(f.nccl))
    for fn in (all_reduce_s, all_gather_s, all_to_all_s):
        assert float(fn(1e11, stride, size, f)) == pytest.approx(
            float(fn(1e11, stride, size, z)), rel=1e-3
        )
    n = np.asarray(float(size))
    r = np.minimum(n, max(1.0, f.node_size // stride))
    ring = 2 * (n - 1) / n * 1e11 / bus_bw(r, n / r, f)
    assert float(all_reduce_s(1e11, stride, size, z)) == pytest.approx(float(ring), rel=1e-9)


def test_a_group_of_one_costs_nothing():
    f = _fabric("a100-80gb", 8)
    for fn in (all_reduce_s, all_gather_s, all_to_all_s):
        assert np.all(fn(np.array([0.0, 8.0, 1e9]), 1, 1, f) == 0.0)


@settings(max_examples=50, deadline=None)
@given(
    nbytes=st.floats(1.0, 1e10),
    stride=st.sampled_from([1, 2, 8, 16]),
    size=st.sampled_from([1, 2, 4, 8, 16, 64, 512]),
)
def test_scalar_and_vectorised_calls_agree(nbytes, stride, size):
    f = _fabric("h100-sxm", 512)
    for fn in (all_reduce_s, all_gather_s, all_to_all_s):
        many = fn(np.array([nbytes, 2 * nbytes]), np.array([stride, stride]), size, f)
        assert float(fn(nbytes, stride, size, f)) == pytest.approx(float(many[0]), rel=1e-12)
