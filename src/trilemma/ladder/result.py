"""The ladder's typed result (``run_ladder(...) -> LadderResult``) and its JSON document.

``LadderResult.to_dict()`` is the ``--json`` document and ``ladder.json``; ``LadderResult.from_dict``
reads either back. SI units: seconds, joules, FLOPs, USD; losses in nats per byte.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

__all__ = ["HeldOut", "LadderMachine", "LadderResult", "LadderTotals", "RunRow"]


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
class LadderTotals:
    """Sums over the finished runs, and this call's own wall time."""

    runs: int  # planned
    finished: int
    resumed: int  # read back from runs.jsonl
    trained_now: int
    train_s: float
    wall_s_runs: float  # training + evaluation of the finished runs
    energy_j: float
    cost_usd: float
    flop: float  # model FLOPs of the finished runs (PaLM convention)
    wall_s: float  # this call, start to end
    predicted_wall_s: float | None  # the planner's figure for the whole grid


@dataclass(frozen=True)
class LadderMachine:
    """What the ladder ran on and the power and price that turn its wall time into joules and dollars."""

    cores: int
    workers: int
    threads_per_worker: int
    hardware_profile: str | None  # None without a `local` profile
    power_w: float  # the whole machine
    power_source: str
    price_usd_per_hour: float  # the whole machine


@dataclass(frozen=True)
class LadderResult:
    """The whole ladder: every planned run, the fitted law and the held-out check."""

    SCHEMA: ClassVar[str] = "trilemma.ladder.result/1"

    out_dir: str
    files: dict[str, str | None]  # runs, law, result, plot: paths written (None: not written)
    plan: dict[str, Any]  # LadderPlan.to_dict()
    runs: tuple[RunRow, ...]
    fit: dict[str, Any] | None  # trilemma fit's document of the law fitted on the fit runs
    held_out: HeldOut | None
    totals: LadderTotals
    machine: LadderMachine
    data: dict[str, Any]  # the corpus's own description
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
            "totals": asdict(self.totals),
            "fit": self.fit,
            "plan": self.plan,
            "machine": asdict(self.machine),
            "price_usd_per_hour": self.price_usd_per_hour,
            "data": dict(self.data),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LadderResult:
        """Read back ``to_dict()``'s document (``ladder.json`` or ``--json``)."""
        if str(d.get("schema", "")) != cls.SCHEMA:
            raise ValueError(f"not a ladder result: schema {d.get('schema')!r}")
        held = d.get("held_out")
        return cls(
            out_dir=d["out_dir"],
            files=dict(d["files"]),
            plan=d["plan"],
            runs=tuple(RunRow(**r) for r in d["runs"]),
            fit=d["fit"],
            held_out=None if held is None else HeldOut(**held),
            totals=LadderTotals(**d["totals"]),
            machine=LadderMachine(**d["machine"]),
            data=d["data"],
            price_usd_per_hour=d["price_usd_per_hour"],
            complete=d["complete"],
            warnings=tuple(d["warnings"]),
            notes=tuple(d["notes"]),
            schema=d["schema"],
        )
