"""The all-reduce that DDP over gloo runs between a CPU's local processes, timed on this machine.

The link a CPU probe measured before this (``bench.loopback_bandwidth``: one bulk TCP stream over
127.0.0.1, 3-4 GB/s on this project's 2-core machine) is not what a collective gets: gloo's ring
all-reduce moves its chunks through its own TCP transport and sums them on the CPU, and each call
waits for both ranks' threads to be scheduled. Timed here with gloo itself: two fresh processes
all-reduce fp32 tensors of ``SIZES`` bytes (``PASSES`` passes of ``REPS`` timed calls each after
``WARMUP``, the median per size), and the times are fitted by t = α + M/β (the α–β model, Hockney 1994,
"The communication challenge for MPP", Parallel Computing 20(3)) in relative least squares, both terms
non-negative. For
two ranks, a ring all-reduce of M bytes moves 2(n−1)/n·M = M per rank (Thakur, Rabenseifner & Gropp
2005, §4), so β is the bus bandwidth (NCCL's busBw convention) and α the latency of the call's
2(n−1) = 2 ring steps. ``trilemma.estimate.comm`` times DP collectives with them on a probe profile
that carries them (``specs.hardware.COLLECTIVE_*_KEY``), instead of NCCL's GPU constants over the
bulk TCP rate.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from trilemma.units import GIGA, KIB, MEGA, MIB

#: how the record is measured: a cached record of another method is measured again
COLLECTIVE_METHOD = (
    "gloo all_reduce, 2 spawned processes, fp32, 64 KiB-16 MiB, medians; t = a + M/b"
)
SIZES = (int(64 * KIB), int(256 * KIB), int(MIB), int(4 * MIB), int(16 * MIB))
WARMUP = 3
REPS = 15  # timed calls per size in one pass
PASSES = 3
#: a size whose median is further than this factor from the fitted line is left out of it (alpha_beta)
OFF_LINE = 2.0
#: seconds the two processes may take in all (start-up, torch import, the timings) before the
#: measurement is given up (the profile then keeps the bulk TCP rate)
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class GlooAllReduce:
    """gloo's all-reduce between two local processes: the timings and their α–β fit."""

    method: str
    threads: int  # intra-op threads per process while timing
    sizes_bytes: list[int]
    seconds: list[float]  # median seconds per call, per size
    latency_s: float  # α, seconds per call (2 ring steps)
    bus_bw_bytes_per_s: float  # β, bytes/s

    def describe(self) -> str:
        return (
            f"gloo all-reduce between 2 local processes: {self.latency_s * MEGA:.0f} µs + M / "
            f"{self.bus_bw_bytes_per_s / GIGA:.2f} GB/s (fitted to {len(self.sizes_bytes)} sizes timed, "
            f"{self.sizes_bytes[0] // int(KIB)} KiB-{self.sizes_bytes[-1] // int(MIB)} MiB)"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> GlooAllReduce | None:
        """The record; None for none or one another method wrote (measured again)."""
        if d is None or {f.name for f in fields(cls)} - set(d) or d["method"] != COLLECTIVE_METHOD:
            return None
        return cls(**{f.name: d[f.name] for f in fields(cls)})


def alpha_beta(sizes: Any, seconds: Any) -> tuple[float, float]:
    """(α s, β bytes/s) of t = α + M/β fitted to the timings in relative least squares (each time
    weighted 1/t, so the small sizes count as much as the large), α ≥ 0 and 1/β ≥ 0 (non-negative least
    squares, Lawson & Hanson 1974); β is infinite only if no time grows with the size. A size more than
    ``OFF_LINE``× off the first line, one way or the other, is left out and the line fitted again (a
    size's calls sometimes settle in a slower mode for a whole measurement: its median is then 5-8×
    its neighbours', seen in 3 of 6 runs on this project's 2-core machine), as long as 3 sizes remain."""
    from scipy.optimize import nnls

    m, t = np.asarray(sizes, float), np.asarray(seconds, float)

    def line(keep: np.ndarray) -> np.ndarray:
        a = np.column_stack([np.ones(keep.sum()), m[keep]]) / t[keep, None]
        return nnls(a, np.ones(keep.sum()))[0]

    keep = np.ones(m.size, bool)
    coef = line(keep)
    ratio = (coef[0] + coef[1] * m) / t
    near = (ratio < OFF_LINE) & (ratio > 1.0 / OFF_LINE)
    if 3 <= near.sum() < m.size:
        coef = line(near)
    return float(coef[0]), (1.0 / coef[1]) if coef[1] > 0 else math.inf


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, port: int, threads: int, out_path: str) -> None:
    """One of the two processes: join gloo, time the all-reduces; rank 0 writes the medians (JSON) to
    ``out_path``."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        times: list[list[float]] = [[] for _ in SIZES]
        xs = [torch.ones(nbytes // 4, dtype=torch.float32) for nbytes in SIZES]
        for x in xs:
            for _ in range(WARMUP):
                dist.all_reduce(x)
        for _ in range(PASSES):  # passes over the sizes: a neighbour's burst lands in one of them
            for x, ts in zip(xs, times):
                for _ in range(REPS):
                    t0 = time.perf_counter()
                    dist.all_reduce(x)
                    ts.append(time.perf_counter() - t0)
        medians = [statistics.median(ts) for ts in times]
        if rank == 0:
            Path(out_path).write_text(json.dumps(medians), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def gloo_all_reduce(threads: int = 1) -> GlooAllReduce | None:
    """Time gloo's all-reduce between two fresh Python processes of ``threads`` threads each (started
    with ``python -c``, so a caller's own script is never re-imported); None when they cannot be run
    (no torch.distributed, a blocked port, a timeout)."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "medians.json"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from trilemma.probe.collective import _rank; "
                    f"_rank({r}, {port}, {int(threads)}, {str(out)!r})",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for r in (0, 1)
        ]
        try:
            for p in procs:
                p.wait(timeout=TIMEOUT_S)
            medians = json.loads(out.read_text(encoding="utf-8"))
        except (subprocess.SubprocessError, OSError, ValueError):  # pragma: no cover - best effort
            return None
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    a, b = alpha_beta(SIZES, medians)
    return GlooAllReduce(
        method=COLLECTIVE_METHOD,
        threads=threads,
        sizes_bytes=list(SIZES),
        seconds=[float(s) for s in medians],
        latency_s=a,
        bus_bw_bytes_per_s=b,
    )
