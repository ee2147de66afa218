"""The solver's candidate space as broadcastable numpy axes.

Each decision variable gets its own array dimension — model shape, GPU count, then the layout
axes the registry marks as searched by the solver (trilemma.specs.axes) — so the estimators in ``trilemma.estimate``
compute every quantity at its natural size (a GEMM time depends on shape, tp and micro-batch,
not on the GPU count) and only the final sums touch the whole grid. A run of layout axes whose
rules exclude most of their combinations may share one dimension holding only the combinations
that can pass (``layout_grid``'s ``joint``). The grid does not depend on the pins: pins only
filter and rank what it yields.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trilemma.estimate.layouts import LayoutArrays
from trilemma.specs import Layout, ModelSpec
from trilemma.specs.axes import AXES, AXIS
from trilemma.specs.parallel import ParallelDims, sequence_parallel

# the numeric ModelSpec fields a shape grid varies; every other field comes from the template
VARYING = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size")


def solve_axes(moe: bool = False) -> dict[str, tuple[int, ...]]:
    """The layout axes the solver searches, as codes: each axis's ``solve_values`` (a trimmed set
    of estimate's, trilemma.specs.axes: the solver multiplies them by model shapes, GPU types and
    counts, so it keeps what wins in practice). ``moe``: some searched model is a mixture of experts."""
    out = {}
    for a in AXES:
        vals = a.solve_values(moe) if a.solve_values is not None else None
        if vals is not None:
            out[a.name] = tuple(a.code(v) for v in vals)
    return out


@dataclass(frozen=True)
class ShapeGrid:
    """Dense model shapes as arrays (one per shape, laid along ``axis``) that quack like a
    ModelSpec for the estimators: numeric fields vary, categorical ones come from ``template``."""

    template: ModelSpec
    n_layers: np.ndarray
    d_model: np.ndarray
    n_heads: np.ndarray
    n_kv_heads: np.ndarray
    head_dim: np.ndarray
    ffn_dim: np.ndarray
    vocab_size: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def from_models(cls, models: list[ModelSpec], ndim: int, axis: int = 0) -> ShapeGrid:
        """Stack dense models of one family (same categorical fields) along ``axis`` of ``ndim``."""
        t = models[0]
        for m in models:
            if m.is_moe:
                raise ValueError("a shape grid holds dense models only")
        shape = [1] * ndim
        shape[axis] = len(models)
        col = {
            f: np.array([getattr(m, f) or 0 for m in models], dtype=np.int64).reshape(shape)
            for f in VARYING
        }
        col["n_kv_heads"] = np.array([m.kv_heads for m in models], dtype=np.int64).reshape(shape)
        col["head_dim"] = np.array([m.d_head for m in models], dtype=np.int64).reshape(shape)
        return cls(template=t, names=tuple(m.name for m in models), **col)

    def __getattr__(self, name: str) -> Any:  # categorical fields: the template's
        return getattr(self.template, name)

    def __len__(self) -> int:
        return int(self.n_layers.size)

    def model(self, i: int) -> ModelSpec:
        """The i-th shape as a real ModelSpec."""
        vals = {f: int(getattr(self, f).ravel()[i]) for f in VARYING}
        return self.template.replace(name=self.names[i], **vals)

    # the derived dimensions ModelSpec provides, as arrays
    kv_heads = property(lambda self: self.n_kv_heads)
    d_head = property(lambda self: self.head_dim)
    d_attn = property(lambda self: self.n_heads * self.head_dim)
    d_kv = property(lambda self: self.n_kv_heads * self.head_dim)
    is_moe = property(lambda self: False)
    is_mla = property(lambda self: False)
    d_qk = property(lambda self: self.n_heads * self.head_dim)
    attn_core_width = property(lambda self: self.n_heads * self.head_dim)
    kv_cache_width = property(lambda self: 2 * self.n_kv_heads * self.head_dim)
    n_moe_layers = property(lambda self: 0)
    n_dense_layers = property(lambda self: self.n_layers)
    expert_ffn = property(lambda self: self.ffn_dim)
    ffn_matrices = property(lambda self: self.template.ffn_matrices)


def resolve_axes(
    axes: dict[str, tuple[int, ...]] | None = None, pinned: dict | None = None
) -> dict[str, tuple[int, ...]]:
    """The layout axes with the pinned ones (by axis name) reduced to one value."""
    ax = dict(axes or solve_axes())
    for k, v in (pinned or {}).items():
        if v is None or k not in ax:
            continue
        ax[k] = (AXIS[k].code(v),)
    return ax


def layout_dims(
    ax: dict[str, tuple[int, ...]], joint: dict[str, np.ndarray] | None = None
) -> list[tuple[str, ...]]:
    """The names on each layout dimension of the grid: one axis of ``ax`` each, in order, except the
    axes of ``joint`` (a contiguous run of them), which share one dimension at their place."""
    dims: list[tuple[str, ...]] = []
    for k in ax:
        if joint is None or k not in joint:
            dims.append((k,))
        elif not dims or k not in dims[-1]:
            dims.append(tuple(j for j in ax if j in joint))
    return dims


def _laid_out(
    ndim_before: int, columns: dict[str, Any], dims: list[tuple[str, ...]]
) -> dict[str, np.ndarray]:
    """Each column (a sequence of ints) along its dimension of ``dims``, after ``ndim_before``."""
    nd = ndim_before + len(dims)
    out = {}
    for j, group in enumerate(dims):
        for k in group:
            shape = [1] * nd
            shape[ndim_before + j] = len(columns[k])
            out[k] = np.asarray(columns[k], dtype=np.int64).reshape(shape)
    return out


def layout_grid(
    ndim_before: int, ax: dict[str, tuple[int, ...]], joint: dict[str, np.ndarray] | None = None
) -> LayoutArrays:
    """Layout axes as broadcastable arrays after ``ndim_before`` leading (shape, count) dims; the
    axes not searched sit at their default. dp is left as a placeholder: the caller derives it
    from the GPU count (``with_dp``); sp follows tp. ``joint``: only some combinations of a
    contiguous run of axes (each axis's positions in ``ax``, one per combination), laid along one
    dimension (``layout_dims``)."""
    codes = {k: np.asarray(ax[k], dtype=np.int64)[pos] for k, pos in (joint or {}).items()}
    dims = layout_dims(ax, joint)
    arrays = _laid_out(ndim_before, {**ax, **codes}, dims)
    nd = ndim_before + len(dims)
    for a in AXES:
        if a.name not in arrays:
            arrays[a.name] = np.full([1] * nd, a.code(a.default), dtype=np.int64)
    arrays["sp"] = sequence_parallel(arrays["sp"], arrays["tp"])
    return LayoutArrays(**arrays)


def grid_index(ax: dict[str, tuple[int, ...]], joint: dict[str, np.ndarray]) -> np.ndarray:
    """For each cell of the layout grid of ``ax`` with ``joint`` (C order), its flat index in the
    grid of ``ax`` without it (what ``layout_at`` reads); in increasing order, as the joint run is
    contiguous and its combinations sorted."""
    where = {k: range(len(v)) for k, v in ax.items()}
    pos = _laid_out(0, {**where, **joint}, layout_dims(ax, joint))
    shape = np.broadcast_shapes(*(p.shape for p in pos.values()))
    cells = tuple(np.broadcast_to(pos[k], shape) for k in ax)
    return np.ravel_multi_index(cells, [len(v) for v in ax.values()]).ravel()


def layout_at(ax: dict[str, tuple[int, ...]], flat_index: int, n_gpus: int) -> Layout:
    """The Layout at ``flat_index`` of the grid of ``ax`` (as ``layout_grid`` lays it) on ``n_gpus``."""
    names = list(ax)
    idx = np.unravel_index(int(flat_index), [len(ax[k]) for k in names])
    v = {a.name: a.default for a in AXES}
    v.update({k: AXIS[k].value(ax[k][j]) for k, j in zip(names, idx)})
    v["dp"] = ParallelDims.over(n_gpus, v["tp"], v["cp"], v["pp"]).dp
    v["sp"] = sequence_parallel(v["sp"], v["tp"])
    return Layout(**v)


def with_dp(L: LayoutArrays, n_gpus: np.ndarray) -> LayoutArrays:
    """dp = GPUs / (tp · cp · pp) (floor; legal_mask flags the rows where it does not divide)."""
    return replace(L, dp=np.maximum(ParallelDims.over(n_gpus, L.tp, L.cp, L.pp).dp, 1))


def grid_size(L: LayoutArrays, *others: np.ndarray) -> int:
    return int(np.prod(np.broadcast_shapes(L.shape, *(np.shape(o) for o in others))))


__all__ = [
    "ShapeGrid",
    "grid_index",
    "grid_size",
    "layout_at",
    "layout_dims",
    "layout_grid",
    "resolve_axes",
    "solve_axes",
    "with_dp",
]
