"""The ladder's typed result (``run_ladder(...) -> LadderResult``) and its JSON document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCHEMA", "HeldOut", "LadderResult", "RunRow"]

SCHEMA = "trilemma.ladder.result/1"


@dataclass(frozen=True)
class RunRow:
    """One run of the ladder as measured: the triangle (time, energy, dollars) and the loss."""

    key: str
    role: str  # "fit" or "held_out"
    shape: str  # layers x d_model
    n: int  # non-embedding parameters (the law's N)
    params_total: int
    tokens: int  # D
    tokens_per_param: float
    steps: int
    lr: float
    flop: float  # model FLOPs of training (PaLM convention)
    predicted_s: float | None  # the planner's training time on a worker's share of `local`
    status: str  # "done" (this invocation), "resumed" (already in runs.jsonl), "pending"
    loss: float | None = None  # eval loss on the fixed held-out split, nats/byte
    train_loss: float | None = None
    train_s: float | None = None
    wall_s: float | None = None  # training + evaluation
    tokens_per_s: float | None = None
    energy_j: float | None = None
    cost_usd: float | None = None
    law_loss: float | None = None  # the fitted law at this (N, D)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class HeldOut:
    """The check: the fitted law's prediction for the held-out run beside its measurement."""

    key: str
    shape: str
    n: int
    tokens: int
    tokens_per_param: float
    n_over_largest_fitted: float
    predicted: float
    low: float
    high: float
    interval: str
    measured: float | None
    error: float | None  # (predicted - measured) / measured
    within_band: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class LadderResult:
    out_dir: str
    files: dict[str, str | None]
    plan: dict[str, Any]
    runs: tuple[RunRow, ...]
    fit: dict[str, Any] | None  # trilemma fit's document of the law fitted on the fit runs
    held_out: HeldOut | None
    totals: dict[str, Any]
    machine: dict[str, Any]
    data: dict[str, Any]
    price_usd_per_hour: float | None
    complete: bool  # every planned run finished, fitted and checked
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "held_out": None if self.held_out is None else self.held_out.to_dict(),
            "law": None if self.fit is None else self.fit.get("law"),
            "complete": self.complete,
            "out_dir": self.out_dir,
            "files": dict(self.files),
            "runs": [r.to_dict() for r in self.runs],
            "totals": dict(self.totals),
            "fit": self.fit,
            "plan": self.plan,
            "machine": dict(self.machine),
            "price_usd_per_hour": self.price_usd_per_hour,
            "data": dict(self.data),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }
