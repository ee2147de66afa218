"""One solve's result: the optimum, runners-up, pins and frontier, and their JSON documents."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trilemma.errors import InputError
from trilemma.estimate.result import Estimate
from trilemma.estimate.stability import stability_flag
from trilemma.quality.predict import LossPrediction
from trilemma.solve.frontier import Frontier
from trilemma.solve.optimize import Pins
from trilemma.solve.search import ConfigTable

SCHEMA = "trilemma.solve/1"


@dataclass(frozen=True)
class SolveResult:
    """The optimum (re-evaluated through estimate), runners-up, pins and frontier of one solve."""

    SCHEMA: ClassVar[str] = SCHEMA
    optimum: Estimate
    optimum_loss: LossPrediction | None  # None for a fine-tune (no loss corner)
    runners_up: tuple[tuple[str, Estimate, LossPrediction | None], ...]  # (why, Estimate, its loss)
    pins: Pins
    frontier: Frontier | None
    table: ConfigTable
    candidates: int
    seconds: float
    warnings: tuple[str, ...] = field(default=())
    #: --inference-tokens: training and serving dollars of the optimum (Sardana et al. 2023), or None
    lifetime: dict[str, Any] | None = None
    #: the plan of config-table row ``i`` trained on ``tokens`` tokens, realised through estimate as the optimum
    #: is: ``plan_at(i, tokens) -> (Estimate, LossPrediction or None for a fine-tune)`` (a frontier point's plan)
    plan_at: Callable[[int, float], tuple[Estimate, LossPrediction | None]] | None = field(
        default=None, repr=False, compare=False
    )
    #: how plans were ranked: "pessimistic" (the high end of each band) or "point"
    rank: str = "pessimistic"
    #: beside an optimum on an uncalibrated chip family: the best plan on a calibrated one (Estimate, loss)
    calibrated: tuple[Estimate, LossPrediction | None] | None = None

    def frontier_plan(self, point: int) -> Estimate:
        """Frontier point ``point`` (the 0-based row of ``--frontier``'s CSV) as a full estimate."""
        n = 0 if self.frontier is None else int(self.frontier.time_s.size)
        if (
            isinstance(point, bool)
            or not isinstance(point, (int, np.integer))
            or not 0 <= point < n
            or self.plan_at is None
        ):
            raise InputError(
                "point",
                point,
                f"a frontier index from 0 to {n - 1}" if n else "a solve with a frontier",
            )
        return self.plan_at(int(self.frontier.config[point]), float(self.frontier.tokens[point]))[0]

    def change(self, e: Estimate, loss: LossPrediction | None) -> dict[str, Any]:
        """A runner-up against the optimum: Δ time (s), Δ cost ($), Δ loss (nats/token; None for a fine-tune,
        which has no loss corner), and the pins it breaks (``deadline``, ``budget``, ``target loss``; 1% slack,
        as the optimum's own check)."""
        d_loss = (
            None
            if loss is None or self.optimum_loss is None
            else loss.mean - self.optimum_loss.mean
        )
        return {
            "delta": {
                "time_s": e.time.total_s - self.optimum.time.total_s,
                "usd": e.cost.usd - self.optimum.cost.usd,
                "loss": d_loss,
            },
            "breaks": broken_pins(self.pins, e, loss),
        }

    def to_dict(self) -> dict[str, Any]:
        plan = plan_document
        doc: dict[str, Any] = {"optimum": plan(self.optimum, self.optimum_loss)}
        doc["schema"] = self.SCHEMA
        doc["runners_up"] = [
            {"differs_in": why, **self.change(e, loss), **plan(e, loss)}
            for why, e, loss in self.runners_up
        ]
        doc["pins"] = self.pins.as_dict()
        doc["rank"] = self.rank
        hw = self.optimum.cluster.hardware
        doc["price"] = {
            "usd_per_gpu_hour": self.optimum.cluster.price,
            "provider": hw.price_provider or None,
            "market": hw.price_market or None,
            "date": hw.price_date,
            "source": hw.price_source,
        }
        doc["calibrated_alternative"] = None if self.calibrated is None else plan(*self.calibrated)
        if self.frontier is not None:
            f = self.frontier
            doc["frontier"] = {
                "points": int(f.time_s.size),
                "feasible": int(f.feasible.sum()),
                "time_s": [float(f.time_s.min()), float(f.time_s.max())] if f.time_s.size else [],
                "usd": [float(f.usd.min()), float(f.usd.max())] if f.usd.size else [],
                "loss": [float(f.loss.min()), float(f.loss.max())]
                if f.loss.size and self.optimum_loss is not None
                else [],
                # what the frontier keeps (FrontierFilters), and how many points of the frontier
                # over every plan each filter removes
                "filters": {**f.filters.as_dict(), "applied": not f.keep_all},
                "unfiltered_points": f.unfiltered_points,
                "removed": dict(f.removed),
            }
        doc["lifetime"] = self.lifetime
        doc["search"] = {
            "candidates": self.candidates,
            "configurations": len(self.table),
            "seconds": self.seconds,
        }
        doc["warnings"] = list(self.warnings) + list(self.optimum.warnings)
        return doc


def broken_pins(p: Pins, e: Estimate, loss: LossPrediction | None) -> list[str]:
    """The pins a plan misses: deadline, budget (dollars, GPU-hours or energy) by more than 1% (the slack of
    the optimum's own check), target loss by more than 1e-4 (a fine-tune has no loss: never that one)."""
    out = []
    if p.deadline_s is not None and e.time.total_s > p.deadline_s * 1.01:
        out.append("deadline")
    if any(
        limit is not None and got > limit * 1.01
        for got, limit in (
            (e.cost.usd, p.budget_usd),
            (e.time.gpu_hours, p.budget_gpu_hours),
            (e.cost.energy_kwh, p.budget_kwh),
        )
    ):
        out.append("budget")
    if p.max_power_w is not None and e.cost.power_w > p.max_power_w * (1 + 1e-9):
        out.append("power")
    if p.target_loss is not None and loss is not None and loss.mean > p.target_loss + 1e-4:
        out.append("target loss")
    if p.target_score is not None and loss is not None:  # N total, as the search counts it
        from trilemma.solve.optimize import D_MAX, D_MIN
        from trilemma.solve.score import meets

        n, d = e.params.total, e.plan.total_tokens
        if not bool(meets(p.target_score, n, d * (1 + 1e-6), D_MIN, D_MAX)):
            out.append("target score")
    return out


def plan_document(
    e: Estimate, loss: LossPrediction | None, why: str | None = None
) -> dict[str, Any]:
    """One plan of a solve as its JSON document: the estimate's, with the loss of the plan's tokens (None for
    a fine-tune: no from-scratch loss) and, for a runner-up, what it differs in."""
    d = e.to_dict()
    d["loss"] = None if loss is None else loss.to_dict()
    # expected benchmark scores with 80% bands, as estimate prints them (trilemma.quality.attach.scores_of)
    d["quality"] = None if e.benchmarks is None else {"benchmarks": e.benchmarks}
    # a documented training-stability risk of the plan's precision at its size (estimate.stability), or None
    d["stability"] = stability_flag(str(e.plan.precision), e.params.total) or None
    if why:
        d = {"differs_in": why, **d}
    d.pop("schema", None)
    d.pop("warnings", None)
    return d
