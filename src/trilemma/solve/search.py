"""Stage 1 of the solver: the fastest layout that fits, for every (model shape, GPU type,
precision, GPU count). It does not depend on tokens (time and cost are linear in them), so it is
computed once, exhaustively, with the same vectorised estimators `estimate` uses."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from trilemma.estimate.capacity import memory_constants
from trilemma.estimate.evaluate import evaluate
from trilemma.estimate.layouts import legal_mask
from trilemma.estimate.params import param_counts
from trilemma.presets import constants
from trilemma.resolve import make_cluster, make_plan
from trilemma.solve.space import (
    ShapeGrid,
    grid_index,
    layout_at,
    layout_dims,
    layout_grid,
    resolve_axes,
    solve_axes,
    with_dp,
)
from trilemma.specs import HardwareSpec, Layout, ModelSpec, Precision

TOKENS = 1e12  # the plans' tokens: throughput and memory do not depend on them
CHUNK = (
    8  # shapes per vectorised call: keeps the working set in cache (see benchmarks/solve_speed.py)
)


@dataclass(frozen=True)
class ConfigTable:
    """One row per (model, GPU type, precision, GPU count) that can run, with its best layout."""

    models: tuple[ModelSpec, ...]
    gpus: tuple[HardwareSpec, ...]
    precisions: tuple[Precision, ...]
    axes: dict[str, tuple[int, ...]]
    model_idx: np.ndarray
    gpu_idx: np.ndarray
    prec_idx: np.ndarray
    n_gpus: np.ndarray
    batch_tokens: (
        np.ndarray
    )  # the row's global batch, tokens: its model's target rounded by its best layout
    tokens_per_s: np.ndarray  # whole cluster, while training (goodput applied later)
    per_gpu_bytes: np.ndarray
    layout_idx: np.ndarray  # flat index into the layout axes
    candidates: int  # layouts × shapes × counts × GPU types × precisions evaluated

    def __len__(self) -> int:
        return int(self.model_idx.size)

    def take(self, keep: np.ndarray) -> ConfigTable:
        """The rows where ``keep`` is true (a pin that depends on the configuration alone: --max-power)."""
        rows = ("model_idx", "gpu_idx", "prec_idx", "n_gpus", "batch_tokens", "tokens_per_s")
        return replace(
            self,
            **{k: getattr(self, k)[keep] for k in (*rows, "per_gpu_bytes", "layout_idx")},
        )

    def layout(self, i: int) -> Layout:
        return layout_at(self.axes, int(self.layout_idx[i]), int(self.n_gpus[i]))


def _precisions_for(hw: HardwareSpec, wanted: list[Precision]) -> list[Precision]:
    """The asked precisions the chip has; a 16-bit request falls back to the chip's other 16-bit type."""
    out = []
    for p in wanted:
        if p in hw.peak_flop_per_s:
            out.append(p)
        elif p in (Precision.BF16, Precision.FP16):
            alt = Precision.FP16 if p == Precision.BF16 else Precision.BF16
            if alt in hw.peak_flop_per_s:
                out.append(alt)
    return list(dict.fromkeys(out))


def search_configs(
    models: list[ModelSpec],
    gpus: list[HardwareSpec],
    precisions: list[Precision],
    counts: list[int],
    seq_len: int,
    global_batch_tokens: float | list[float],
    pinned: dict | None = None,
    consts: dict | None = None,
    memory_headroom: float | None = None,
    compile: bool | None = None,
    plan_fields: dict | None = None,
    cluster_fields: dict | None = None,
) -> ConfigTable:
    """Best layout per (model, GPU, precision, count); rows that fit nowhere are dropped.
    ``global_batch_tokens``: one batch for every model, or one per model; ``compile``: the plans run
    under torch.compile (TrainingPlan.compile; None: the stack's); ``plan_fields`` more TrainingPlan fields (a fine-tune:
    trilemma.resolve.finetune_fields), ``cluster_fields`` more ClusterSpec fields (host memory)."""
    consts = consts or constants()
    moe = any(m.is_moe for m in models)
    axes = resolve_axes(solve_axes(moe), pinned)
    counts_arr = np.asarray(sorted(set(int(c) for c in counts)), dtype=np.int64)
    rows: dict[str, list] = {k: [] for k in ("m", "g", "p", "n", "b", "thr", "mem", "lay")}
    space = _Space(
        models, _per_model(global_batch_tokens, len(models)), axes, counts_arr, seq_len, consts, moe
    )
    size = 1 if moe else CHUNK
    chunks = [(i, min(i + size, len(models))) for i in range(0, len(models), size)]
    # each chunk's grid, by its first model: legality depends on neither the chip nor the precision
    grids: dict[int, _Grid | None] = {}
    total = 0
    wanted = list(precisions)
    precisions = list(precisions)  # grows when a chip falls back to its other 16-bit type
    for gi, hw in enumerate(gpus):
        for p in _precisions_for(hw, wanted):
            if p not in precisions:
                precisions.append(p)
            pi = precisions.index(p)
            cl = make_cluster(hw, 1, memory_headroom=memory_headroom, **(cluster_fields or {}))
            for start, stop in chunks:
                plan = make_plan(
                    models[start],
                    TOKENS,
                    seq_len,
                    space.batches[start],
                    p,
                    compile=compile,
                    **(plan_fields or {}),
                )
                plan = plan.replace(stages=(plan.stages[0].replace(explicit_batch=False),))
                total += (
                    (stop - start) * counts_arr.size * int(np.prod([len(v) for v in axes.values()]))
                )
                if start not in grids:
                    grids[start] = _legal_grid(space, start, stop, plan.stages[0])
                if grids[start] is not None:
                    _search_chunk(space, grids[start], cl, plan, rows, (start, gi, pi))
    arr = lambda k, dt=float: np.asarray(rows[k], dtype=dt)  # noqa: E731
    return ConfigTable(
        models=tuple(models),
        gpus=tuple(gpus),
        precisions=tuple(precisions),
        axes=axes,
        model_idx=arr("m", np.int64),
        gpu_idx=arr("g", np.int64),
        prec_idx=arr("p", np.int64),
        n_gpus=arr("n", np.int64),
        batch_tokens=arr("b"),
        tokens_per_s=arr("thr"),
        per_gpu_bytes=arr("mem"),
        layout_idx=arr("lay", np.int64),
        candidates=total,
    )


def search_kept(searches: Any, *args: Any, **kwargs: Any) -> ConfigTable:
    """``search_configs(*args, **kwargs)``, kept in ``searches`` (``get(key)`` / ``put(key, table)``:
    trilemma.web's cache of recent searches) under its arguments and the planner's constants, so a
    solve that changes only its pins (deadline, budget, target: the page's sliders) ranks the same
    table; the table's arrays are made read-only, since every later solve shares them. ``searches``
    None: searched every time."""
    if searches is None:
        return search_configs(*args, **kwargs)
    with np.printoptions(threshold=sys.maxsize):  # the whole of any array, not numpy's summary
        key = repr((args, sorted(kwargs.items()), sorted(constants().items())))
    table = searches.get(key)
    if table is None:
        table = search_configs(*args, **kwargs)
        for f in fields(table):
            if isinstance(getattr(table, f.name), np.ndarray):
                getattr(table, f.name).flags.writeable = False
        searches.put(key, table)
    return table


def _per_model(global_batch_tokens: float | list[float], n_models: int) -> list[float]:
    """The global batch (tokens) of each of ``n_models`` models: one for all, or one each."""
    if np.ndim(global_batch_tokens) == 0:
        return [float(global_batch_tokens)] * n_models
    return [float(b) for b in global_batch_tokens]


#: layout axes whose rules rule out most of their joint combinations (virtual stages need pp > 1, ZeRO-2/3
#: no pp: trilemma.specs.axes): the grid lays the run of axes from the first to the last of them along one
#: dimension holding only the combinations some cell passes, about a third of them
JOINT = ("pp", "vp", "zero")


@dataclass(frozen=True)
class _Grid:
    """One chunk of model shapes × GPU counts × layouts, the joint axes pruned (JOINT), for evaluate."""

    model: Any  # ShapeGrid, or one MoE ModelSpec
    L: Any  # LayoutArrays
    C: np.ndarray  # GPU counts along dimension 1
    target: np.ndarray  # each shape's target batch, sequences, along dimension 0
    # legal_mask's (batch, reasons) on this grid, per stage: the same for every chip and precision
    legal: tuple
    lay: np.ndarray  # each layout cell's flat index in the whole grid of the axes (layout_at)
    # each stage's memory by the plan and memory constants it was evaluated with (evaluate's memories)
    memories: dict[str, tuple] = field(default_factory=dict)


@dataclass(frozen=True)
class _Space:
    """What every chunk of a search shares: the models, each one's target batch (tokens), the layout
    axes, the GPU counts, the sequence length and the constants."""

    models: list[ModelSpec]
    batches: list[float]
    axes: dict[str, tuple[int, ...]]
    counts: np.ndarray
    seq_len: int
    consts: dict
    moe: bool  # some model is a mixture of experts: one model per chunk, as a ModelSpec


def _search_chunk(
    space: _Space, g: _Grid, cl: Any, plan: Any, rows: dict[str, list], where: tuple[int, int, int]
) -> None:
    """Evaluate one chunk's grid ``g`` on cluster ``cl`` under ``plan`` and append its best layouts
    to ``rows`` (``where``: the chunk's first model, the GPU type's and the precision's index)."""
    # the bytes per device are the same on every chip with the same memory constants (an RL plan's
    # rollout also reads the device's memory)
    mc = memory_constants(cl, space.consts)
    key = repr((plan, sorted(mc.items()), plan.rl and cl.hardware.hbm_bytes))
    ev = evaluate(
        g.model,
        cl,
        plan,
        g.L,
        space.consts,
        n_gpus=g.C,
        target_batch_seqs=g.target,
        legal=g.legal,
        memories=g.memories.get(key),
    )
    g.memories.setdefault(key, tuple(st.memory for st in ev.stages))
    n_shapes = int(np.size(g.target))
    _keep_best(ev, g, (n_shapes, space.counts), TOKENS, space.seq_len, rows, where)


def _legal_grid(space: _Space, start: int, stop: int, stage: Any) -> _Grid | None:
    """The grid of models ``start:stop`` with the combinations of the JOINT axes that no cell of it
    passes (legal_mask) left out: a cell left out is illegal, so the best layout of each (shape,
    count) is the same; None when no cell passes."""
    chunk, axes, moe = space.models[start:stop], space.axes, space.moe
    tol = space.consts["batch"]["tolerance"]

    def grid(joint: dict[str, np.ndarray] | None) -> tuple[Any, ...]:
        nd = 2 + len(layout_dims(axes, joint))
        C = space.counts.reshape([1, -1] + [1] * (nd - 2))
        model = chunk[0] if moe else ShapeGrid.from_models(chunk, ndim=nd, axis=0)
        target = np.rint(np.array(space.batches[start:stop]) / space.seq_len)
        target = np.maximum(1, target).astype(np.int64).reshape((len(chunk),) + (1,) * (nd - 1))
        L = with_dp(layout_grid(2, axes, joint), C)
        return model, L, C, target, legal_mask(model, L, stage, C, tol, target)

    names = list(axes)
    at = [i for i, k in enumerate(names) if k in JOINT]
    model, L, C, target, legal = grid(None)
    passes = legal[1] == 0
    if not passes.any():
        return None
    if not at:
        return _Grid(model, L, C, target, (legal,), np.arange(passes[0, 0].size))
    run = names[at[0] : at[-1] + 1]
    others = tuple(i for i in range(passes.ndim) if not 2 + at[0] <= i <= 2 + at[-1])
    joint = dict(zip(run, np.nonzero(passes.any(axis=others))))
    model, L, C, target, legal = grid(joint)
    return _Grid(model, L, C, target, (legal,), grid_index(axes, joint))


def _keep_best(
    ev: Any,
    g: _Grid,
    chunk: tuple[int, np.ndarray],
    tokens: float,
    seq_len: int,
    rows: dict[str, list],
    where: tuple[int, int, int],
) -> None:
    """Append to ``rows`` the fastest fitting layout of each (shape, GPU count) of one evaluated
    chunk (``g``: its grid; ``chunk``: its number of shapes and the GPU counts; ``where``: its first
    model's index, the GPU type's and the precision's)."""
    n_shapes, counts_arr = chunk
    start, gi, pi = where
    full = np.broadcast_shapes(
        ev.reasons.shape,
        ev.busy_s.shape,
        ev.per_gpu_bytes.shape,
        g.L.shape,
        (n_shapes, len(counts_arr)) + (1,) * (len(g.L.shape) - 2),
    )
    ok = np.broadcast_to(ev.reasons == 0, full)
    thr = np.broadcast_to(tokens / ev.busy_s, full)
    score = np.where(ok, thr, -np.inf).reshape(full[0], full[1], -1)
    best = np.argmax(score, axis=2)
    # the best cell of each (shape, count), read from the broadcast views (no full-size copies)
    at = tuple(np.indices(best.shape)) + np.unravel_index(best, full[2:])
    s_i, c_i = np.nonzero(ok[at])
    thr_at, mem_at = thr[at], np.broadcast_to(ev.per_gpu_bytes, full)[at]
    # each layout's own batch: the target rounded to a multiple of its dp × micro-batch
    bseq_at = np.broadcast_to(ev.stages[0].batch_seqs, full)[at]
    for s, c in zip(s_i, c_i):
        rows["m"].append(start + s)
        rows["g"].append(gi)
        rows["p"].append(pi)
        rows["n"].append(counts_arr[c])
        rows["b"].append(float(bseq_at[s, c]) * seq_len)
        rows["thr"].append(thr_at[s, c])
        rows["mem"].append(mem_at[s, c])
        rows["lay"].append(g.lay[best[s, c]])


def params_of(table: ConfigTable) -> tuple[np.ndarray, np.ndarray]:
    """(total, non-embedding) parameter counts per row."""
    pcs = [param_counts(m) for m in table.models]
    tot = np.array([p.total for p in pcs], dtype=float)
    non = np.array([p.non_embedding for p in pcs], dtype=float)
    return tot[table.model_idx], non[table.model_idx]
