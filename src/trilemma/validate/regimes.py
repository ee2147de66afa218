"""Subsets of the throughput rows that test one regime on its own.

Small configurations: the step is made of many small kernels and small collectives, so it is set
by launch latency, the host's dispatch and collective latency rather than by GEMM throughput
(trilemma.estimate.host, trilemma.estimate.nccl). A row is one when it runs on one node, trains at
most 2B parameters, and runs micro-batch 1, or tensor parallelism above 1 at d_model ≤ 2,048.
"""

from __future__ import annotations

from typing import Any

from trilemma.estimate.params import param_counts

#: the largest model (total parameters) of a small configuration
SMALL_MAX_PARAMS = 2e9
#: the widest d_model at which tensor parallelism makes a configuration small
SMALL_MAX_TP_WIDTH = 2048


def is_small(case: Any, layout: Any) -> bool:
    """Whether a throughput case (with the layout it ran: the row's, else the one the planner
    picked) is a small configuration."""
    if case.kind != "throughput" or layout is None:
        return False
    one_node = case.n_gpus <= case.hardware.devices_per_node
    small = param_counts(case.model).total <= SMALL_MAX_PARAMS
    latency = layout.micro_batch == 1 or (
        layout.tp > 1 and case.model.d_model <= SMALL_MAX_TP_WIDTH
    )
    return bool(one_node and small and latency)


def small_rows(preds: list[Any]) -> set[tuple[str, int]]:
    """(kind, row) of the small configurations among ``preds`` (predictions with their layouts)."""
    return {(p.case.kind, p.case.row) for p in preds if is_small(p.case, p.layout)}


def small_summary(preds: list[Any], held: dict, stacks: dict) -> dict[str, Any]:
    """The small configurations among throughput ``preds``: their count, sources, and in-sample,
    leave-one-source-out (``held``: prediction by (kind, row)) and leave-one-stack-out (``stacks``)
    errors."""
    from trilemma.validate.fit import summarise
    from trilemma.validate.predict import Prediction

    mine = [p for p in preds if is_small(p.case, p.layout)]

    def out_of(d: dict) -> list[Any]:
        return [
            Prediction(p.case, d.get((p.case.kind, p.case.row)), p.layout, p.fits) for p in mine
        ]

    return {
        "sources": sorted({p.case.group for p in mine}),
        "in_sample": summarise(mine),
        "leave_one_source_out": summarise(out_of(held)),
        "leave_one_stack_out": summarise(out_of(stacks)),
    }


__all__ = ["SMALL_MAX_PARAMS", "SMALL_MAX_TP_WIDTH", "is_small", "small_rows", "small_summary"]
