"""A backtest row being mapped to a plan (trilemma.validate.cases): the row with its assumptions,
the reason a row is skipped, and the row's hardware and model."""

from __future__ import annotations

from typing import Any

from trilemma.errors import TrilemmaError
from trilemma.presets import get_hardware, get_model
from trilemma.specs import (
    HardwareSpec,
    ModelSpec,
    PositionType,
)
from trilemma.units import GIB, GIGA
from trilemma.validate import Kind
from trilemma.validate.columns import ASSUMPTION_SEP
from trilemma.validate.schema import (
    Row,
    RowError,
)

_DIMS = {
    "n_layers": "n_layers",
    "d_model": "d_model",
    "n_heads": "n_heads",
    "n_kv_heads": "n_kv_heads",
    "head_dim": "head_dim",
    "ffn_dim": "ffn_dim",
    "vocab": "vocab_size",
    "max_positions": "max_positions",
}
_ARCH_FIELDS = (
    "family",
    "causal",
    "ffn_type",
    "tied_embeddings",
    "position",
    "norm",
    "norms_per_layer",
    "embedding_norm",
    "final_norm",
    "pooler",
    "type_vocab_size",
    "qkv_bias",
    "out_bias",
    "mlp_bias",
    "parallel_block",
    "dropout",
)
_BLOCK = ("family", "ffn_type", "position", "norm", "tied_embeddings")


class Skip(Exception):
    """A row trilemma cannot evaluate (not bad input); the message is the Skipped reason."""


class RowMapping:
    """One row being mapped: its cells, where it comes from, and the assumptions collected."""

    def __init__(self, kind: Kind, row: Row, where: str) -> None:
        self.kind, self.row, self.where = kind, row, where
        self.assumptions: list[str] = [
            a.strip() for a in row.get("assumptions", "").split(ASSUMPTION_SEP.strip()) if a.strip()
        ]

    def get(self, name: str, default: Any = None) -> Any:
        return self.row.get(name, default)

    def note(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)

    def error(self, column: str, allowed: str, value: Any = None) -> RowError:
        v = self.get(column) if value is None else value
        return RowError(self.where, self.row.index + 1, column, v, allowed)


def row_hardware(m: RowMapping) -> HardwareSpec:
    try:
        hw = get_hardware(m.get("gpu"))
    except TrilemmaError:
        raise m.error(
            "gpu", "a hardware preset name (`trilemma presets hardware` lists them)"
        ) from None
    changes: dict[str, float] = {}
    if m.get("gpu_hbm_gib"):
        changes["hbm_bytes"] = float(m.get("gpu_hbm_gib") * GIB)
    if m.get("gpu_power_w"):
        changes["board_power_w"] = float(m.get("gpu_power_w"))
    if m.get("gpu_inter_node_gb_s"):
        changes["inter_node_bw_bytes_per_s"] = float(m.get("gpu_inter_node_gb_s") * GIGA)
    if not changes:
        return hw
    return hw.replace(name=f"{hw.name} ({m.get('gpu_type') or 'as stated'})", **changes)


def row_model(m: RowMapping, seq: int) -> ModelSpec:
    dims = {field: m.get(col) for col, field in _DIMS.items() if m.get(col) is not None}
    block: dict[str, Any] = {k: m.get(k) for k in _BLOCK if m.get(k) is not None}
    if m.get("bias") is not None:
        block.update(qkv_bias=m.get("bias"), out_bias=m.get("bias"), mlp_bias=m.get("bias"))
    if m.get("model_preset"):
        try:
            p = get_model(m.get("model_preset"))
        except TrilemmaError:
            raise m.error(
                "model_preset", "a model preset name (`trilemma presets models` lists them)"
            ) from None
        given = dict(block, **dims, seq_len=seq)
        changes = {
            k: v
            for k, v in given.items()
            if v != (p.kv_heads if k == "n_kv_heads" else getattr(p, k))
        }
        return p.replace(**changes) if changes else p
    arch: dict[str, Any] = {}
    if m.get("arch"):
        try:
            t = get_model(m.get("arch"))
        except TrilemmaError:
            raise m.error(
                "arch", "a model preset name whose block architecture the dimensions use"
            ) from None
        arch = {k: getattr(t, k) for k in _ARCH_FIELDS}
    for col in ("n_layers", "d_model", "n_heads", "ffn_dim", "vocab"):
        if m.get(col) is None:
            raise m.error(col, "a whole number ≥ 1 (or a model_preset)")
    arch.update(block)
    if (
        arch.get("position", PositionType.LEARNED) == PositionType.LEARNED
        and "max_positions" not in dims
    ):
        dims["max_positions"] = seq
    return ModelSpec.build(
        prefix="model",
        **arch,
        **dims,
        name=f"{m.row.label} (row dims)",
        seq_len=seq,
        source=f"trilemma.validate.cases from {m.where} row {m.row.index}: {m.get('source', '')}",
    )
