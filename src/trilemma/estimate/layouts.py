"""Parallel layouts as arrays: the candidate space, its legality masks (with reasons), batch rounding.

One layout is a row; the estimators broadcast over all rows at once (the solver and `estimate`
without a given layout both enumerate here). Illegal rows are masked, each with a reason bit.
"""

from __future__ import annotations

from dataclasses import fields, make_dataclass
from typing import Any

import numpy as np

from trilemma.specs import Layout, ModelSpec, Recompute, Stage
from trilemma.specs.axes import (
    AXES,
    AXIS,
    R_BATCH,
    R_DP_TOO_LARGE,
    R_GPUS,
    R_OOM,
    REASONS,
    reason_text,
)
from trilemma.specs.axis import SearchContext
from trilemma.specs.parallel import ParallelDims, sequence_parallel


class _LayoutArraysBase:
    """Parallel layouts, one per row: an int64 array per axis of ``trilemma.specs.axes.AXES``, named
    as the axis (``sp`` 0/1; ``recompute`` its ``Recompute.code``; ``zero`` the stage)."""

    def __len__(self) -> int:
        return int(np.prod(self.shape))

    @property
    def shape(self) -> tuple[int, ...]:
        """Broadcast shape of the fields: (n,) for a list of layouts; a grid when the solver gives
        each axis its own dimension, so every quantity is computed at its natural size."""
        return np.broadcast_shapes(*(np.shape(getattr(self, f.name)) for f in fields(self)))

    @property
    def dims(self) -> ParallelDims:
        """The parallel degrees of the rows and their products (trilemma.specs.parallel)."""
        return ParallelDims(self.tp, self.cp, self.pp, self.dp, self.ep, self.sp)

    @property
    def n_gpus(self) -> np.ndarray:
        return self.dims.n_gpus

    @property
    def sp_share(self) -> np.ndarray:
        """Share of a d-wide (residual-stream) tensor one tensor-parallel rank holds: 1/tp under sequence
        parallelism, which splits it along the sequence (Korthikanti et al. 2022 §4.2.2), else 1 (replicated)."""
        return np.where(self.dims.sp_on, 1.0 / self.tp, 1.0)

    def recomputes(self, *modes: Recompute) -> np.ndarray:
        """Rows whose recomputation is one of ``modes`` (compared by name: ``Recompute.mask``)."""
        return Recompute.mask(self.recompute, *modes)

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> Any:
        cols = {
            a.name: np.array([a.code(getattr(x, a.name)) for x in layouts], dtype=np.int64)
            for a in AXES
        }
        cols["sp"] = sequence_parallel(cols["sp"], cols["tp"])
        return cls(**cols)

    def row(self, i: int) -> Layout:
        return Layout(**{a.name: a.value(getattr(self, a.name)[i]) for a in AXES})

    def take(self, idx: np.ndarray) -> Any:
        return type(self)(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


LayoutArrays = make_dataclass(
    "LayoutArrays",
    [(a.name, np.ndarray) for a in AXES],
    bases=(_LayoutArraysBase,),
    frozen=True,
    namespace={"__doc__": _LayoutArraysBase.__doc__, "__module__": __name__},
)


def candidate_layouts(
    m: ModelSpec,
    n_gpus: int,
    gpus_per_node: int,
    fixed: dict[str, object] | None = None,
    max_seq: int = 2048,
) -> Any:
    """Enumerate the layouts worth trying for ``n_gpus`` (the cross product, legal or not): each
    axis's ``estimate_values`` (trilemma.specs.axes), dp following from the GPU count. ``fixed``
    pins any axis (by its name) to one value.
    """
    fixed = {k: v for k, v in (fixed or {}).items() if v is not None}
    ctx = SearchContext(m, n_gpus, gpus_per_node, max_seq)
    axes = {a.name: [a.code(v) for v in a.estimate_values(ctx)] for a in AXES if a.name != "dp"}
    for k, v in fixed.items():
        if k in axes:
            axes[k] = [AXIS[k].code(v)]
    grids = np.meshgrid(*[np.asarray(v, dtype=np.int64) for v in axes.values()], indexing="ij")
    flat = {k: g.ravel() for k, g in zip(axes, grids)}
    keep = ParallelDims(flat["tp"], flat["cp"], flat["pp"]).divides(n_gpus)
    flat = {k: v[keep] for k, v in flat.items()}
    dp = ParallelDims.over(n_gpus, flat["tp"], flat["cp"], flat["pp"]).dp
    if "dp" in fixed:
        keep = dp == int(fixed["dp"])
        flat = {k: v[keep] for k, v in flat.items()}
        dp = dp[keep]
    # drop duplicate virtual-stage rows for pp = 1 (unless the user pinned vp: then legal_mask says
    # why it cannot work); sp only with tp
    keep = (flat["pp"] > 1) | (flat["vp"] == 1) | ("vp" in fixed)
    flat = {k: v[keep] for k, v in flat.items()}
    dp = dp[keep]
    flat["sp"] = sequence_parallel(flat["sp"], flat["tp"])
    return LayoutArrays(dp=dp, **flat)


def batch_sequences(stage: Stage) -> int:
    """The stage's target global batch in whole sequences (at least one)."""
    return max(1, int(round(stage.global_batch_tokens / stage.seq_len)))


def legal_mask(
    m: ModelSpec,
    L: Any,
    stage: Stage,
    n_gpus: int | np.ndarray,
    batch_tolerance: float = 0.1,
    target_seqs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(global batch in sequences per row after rounding, reason bits per row; 0 = legal).

    A target batch (a preset's published one) is rounded to the nearest multiple of dp × micro-
    batch; a row whose rounding moves it by more than ``batch_tolerance`` (relative) is illegal,
    so TP/PP absorb GPUs that DP cannot use. An explicit batch must divide exactly.
    ``target_seqs`` replaces the stage's target with one per row (it broadcasts with the rows: the
    solver's grid of model shapes, each with its own batch).
    """
    target = batch_sequences(stage) if target_seqs is None else target_seqs
    unit = L.dp * L.micro_batch
    full = np.broadcast_shapes(L.shape, np.shape(m.n_layers), np.shape(n_gpus), np.shape(target))
    if stage.explicit_batch:
        batch = np.full(full, target, dtype=np.int64)
        bad_batch = (target % unit) != 0
    else:
        batch = np.maximum(unit, np.rint(target / unit).astype(np.int64) * unit)
        bad_batch = np.zeros(full, dtype=bool)
    r = np.zeros(full, dtype=np.int64)
    r |= np.where(L.n_gpus != n_gpus, R_GPUS, 0)
    r |= np.where(bad_batch, R_BATCH, 0)
    r |= np.where(np.abs(batch - target) > batch_tolerance * target, R_DP_TOO_LARGE, 0)
    for axis in AXES:
        for rule in axis.rules:
            r |= np.where(rule.ok(m, L, stage.seq_len), 0, rule.bit)
    return batch, r


__all__ = [
    "LayoutArrays",
    "R_OOM",
    "REASONS",
    "batch_sequences",
    "candidate_layouts",
    "legal_mask",
    "reason_text",
]
