"""The Python API: one call per verb, over the typed specs and results.

    >>> from trilemma.api import estimate
    >>> est = estimate("llama2-7b", "a100-80gb", n_gpus=64, tokens=2e12)
    >>> est.time.total_s, est.memory.fits
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.estimate.choose import estimate_plan, evaluate_layout
from trilemma.estimate.result import SCHEMA, CostBreakdown, Estimate, MemoryBreakdown, StageResult, TimeBreakdown
from trilemma.specs import HardwareSpec, Layout, ModelSpec, Precision, TrainingPlan
from trilemma.specs.build import grid_intensity, make_cluster, make_plan, resolve_hardware, resolve_model


def estimate(model: str | ModelSpec, hardware: str | HardwareSpec, n_gpus: int, tokens: float | None = None,
             *, seq_len: int | None = None, global_batch_tokens: float | None = None,
             precision: Precision | str = Precision.BF16, layout: Layout | dict | None = None,
             cluster: dict | None = None, plan: TrainingPlan | None = None, law: str | None = None,
             unique_tokens: float | None = None) -> Estimate:
    """Estimate one training plan. ``layout`` pins any axes (a Layout pins them all); the rest are
    searched and the fastest legal layout that fits in memory is returned. The loss corner comes
    from ``law`` (default: trilemma.quality.laws.DEFAULT_LAW), with repetition over ``unique_tokens``."""
    if not isinstance(n_gpus, (int, np.integer)) or n_gpus <= 0:
        raise InputError("gpus", n_gpus, "a positive whole number of devices")
    m, how = resolve_model(model)
    cl = make_cluster(hardware, int(n_gpus), **(cluster or {}))
    pl = plan or make_plan(m, tokens, seq_len, global_batch_tokens, precision)
    cl.hardware.peak(pl.precision)  # clear error if the chip lacks this precision
    return with_loss(estimate_plan(m, cl, pl, layout, how), law, unique_tokens)


def export(plan: Any, engine: str, *, point: int | None = None, finetune: Any = None) -> Any:
    """An Estimate, or a solve result (its optimum, or frontier ``point``), as ``engine``'s config:
    torchtitan, megatron, deepspeed or hf (trilemma.export). ``.to_dict()`` is the document
    ``--export ENGINE --json`` prints; ``.files`` the files ``trilemma export --out`` writes."""
    from trilemma.export import export as export_estimate, export_solve

    if hasattr(plan, "optimum"):
        return export_solve(plan, engine, point, finetune=finetune)
    if point is not None:
        raise InputError("point", point, "a frontier index, with a solve result")
    return export_estimate(plan, engine, finetune=finetune)


def with_loss(est: Estimate, law: str | None = None, unique_tokens: float | None = None) -> Estimate:
    """The estimate with its quality corner: predicted loss with a band (trilemma.quality)."""
    from trilemma.quality.predict import predict_loss_block

    pred = predict_loss_block(est.model, est.plan.total_tokens, law=law, unique_tokens=unique_tokens,
                              precision=str(est.plan.precision))
    return replace(est, loss=pred, warnings=est.warnings + tuple(pred.warnings))


__all__ = ["SCHEMA", "CostBreakdown", "Estimate", "MemoryBreakdown", "StageResult", "TimeBreakdown", "estimate",
           "estimate_plan", "evaluate_layout", "export", "grid_intensity", "make_cluster", "make_plan", "resolve_hardware",
           "resolve_model", "with_loss"]
