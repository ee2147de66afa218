"""Validated, frozen inputs: model, hardware/cluster, training plan, parallel layout."""

from trilemma.specs.axes import Layout
from trilemma.specs.enums import (
    Dtype,
    FfnType,
    NormType,
    Objective,
    Optimizer,
    PositionType,
    Precision,
    QkNorm,
    Recompute,
    Task,
    ZeroStage,
)
from trilemma.specs.hardware import ClusterSpec, HardwareSpec
from trilemma.specs.model import ModelSpec
from trilemma.specs.plan import DtypeSpec, Stage, TrainingPlan

__all__ = [
    "ClusterSpec",
    "Dtype",
    "DtypeSpec",
    "FfnType",
    "HardwareSpec",
    "Layout",
    "ModelSpec",
    "NormType",
    "Objective",
    "Optimizer",
    "PositionType",
    "Precision",
    "QkNorm",
    "Recompute",
    "Stage",
    "Task",
    "TrainingPlan",
    "ZeroStage",
]
