"""How fast is the planner? Single-plan estimates, vectorised layout evaluation, pinned layouts.

    python benchmarks/estimate_speed.py [--repeats 5] [--rows 1000000]

Prints one table: (a) `trilemma.api.estimate` with the automatic layout search, (b) layouts per
second through one vectorised `evaluate` over `candidate_layouts` (and over the candidates tiled
to ~1e6 rows), (c) estimates per second with a fully pinned layout (`estimate` with a Layout,
and `evaluate_layout` on prebuilt specs). Best of a few repeats, time.perf_counter.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import fields

import numpy as np

from trilemma import api
from trilemma.estimate.evaluate import best_row, evaluate
from trilemma.estimate.layouts import LayoutArrays, candidate_layouts
from trilemma.presets import constants
from trilemma.specs import Layout

MODEL, GPU, N_GPUS, TOKENS = "llama2-7b", "a100-80gb", 512, 2e12


def bench(fn: Callable[[], object], repeats: int, min_time: float = 0.2) -> tuple[float, int]:
    """Best seconds per call over ``repeats`` rounds, each of enough calls to last ``min_time``."""
    fn()  # warm up (imports, preset caches)
    n, t = 1, 0.0
    while True:  # calibrate calls per round
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time or n >= 1 << 20:
            break
        n *= 2
    best = t / n
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best, n


def tile(L: LayoutArrays, rows: int) -> LayoutArrays:
    reps = max(1, -(-rows // len(L)))
    return LayoutArrays(**{f.name: np.tile(getattr(L, f.name), reps)[:rows] for f in fields(L)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the tiled layout array")
    args = ap.parse_args(argv)

    m, _ = api.resolve_model(MODEL)
    cl = api.make_cluster(GPU, N_GPUS)
    consts = constants()
    pl = api.make_plan(m, TOKENS)
    cands = candidate_layouts(m, cl.n_gpus, cl.node_size, None, max(s.seq_len for s in pl.stages))
    big = tile(cands, args.rows)
    auto = api.estimate(MODEL, GPU, N_GPUS, TOKENS)
    pinned = auto.layout
    assert isinstance(pinned, Layout)

    rows: list[
        tuple[str, int, float, int]
    ] = []  # (what, layouts per call, s per call, calls per round)

    def add(what: str, n_layouts: int, fn: Callable[[], object]) -> None:
        s, n = bench(fn, args.repeats)
        rows.append((what, n_layouts, s, n))

    add(
        "(a) estimate(), automatic layout search",
        len(cands),
        lambda: api.estimate(MODEL, GPU, N_GPUS, TOKENS),
    )
    add(
        "(a') estimate_plan() on prebuilt specs, search",
        len(cands),
        lambda: api.estimate_plan(m, cl, pl),
    )
    add(
        "(b0) candidate_layouts() enumeration",
        len(cands),
        lambda: candidate_layouts(
            m, cl.n_gpus, cl.node_size, None, max(s.seq_len for s in pl.stages)
        ),
    )
    add(
        "(b) evaluate() over candidate_layouts",
        len(cands),
        lambda: evaluate(m, cl, pl, cands, consts),
    )
    add(
        "(b') evaluate() + best_row over candidates",
        len(cands),
        lambda: best_row(evaluate(m, cl, pl, cands, consts)),
    )
    add(
        f"(b'') evaluate() over candidates tiled to {len(big):,}",
        len(big),
        lambda: evaluate(m, cl, pl, big, consts),
    )
    add(
        "(c) estimate(), fully pinned Layout",
        1,
        lambda: api.estimate(MODEL, GPU, N_GPUS, TOKENS, layout=pinned),
    )
    add(
        "(c') evaluate_layout() on prebuilt specs",
        1,
        lambda: api.evaluate_layout(m, cl, pl, pinned),
    )
    one = LayoutArrays.from_layouts([pinned])
    add("(c'') evaluate() over one row", 1, lambda: evaluate(m, cl, pl, one, consts))

    print(
        f"trilemma planner speed: {MODEL} on {N_GPUS}x {GPU}, {TOKENS:.0e} tokens; "
        f"chosen layout tp={pinned.tp} pp={pinned.pp} dp={pinned.dp} zero={pinned.zero} "
        f"recompute={pinned.recompute} micro_batch={pinned.micro_batch}"
    )
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"best of {args.repeats} rounds\n"
    )
    w = max(len(r[0]) for r in rows)
    print(
        f"{'what':<{w}}  {'layouts/call':>12}  {'ms/call':>10}  {'calls/s':>10}  {'layouts/s':>12}"
    )
    print("-" * (w + 52))
    for what, n_layouts, s, _n in rows:
        print(
            f"{what:<{w}}  {n_layouts:>12,}  {s * 1e3:>10.3f}  {1 / s:>10,.1f}  {n_layouts / s:>12,.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
