"""What every term of the step time reads: the plan, the layout rows, the device's constants and
the shape of one micro-batch on one device (trilemma.estimate.time.step_time builds it once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.estimate.comm import Fabric, fabric
from trilemma.estimate.host import effective_host, host_op_s
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.roofline import device_constants, gemm_s
from trilemma.specs import ClusterSpec, ModelSpec, Precision, TrainingPlan
from trilemma.specs.enums import DTYPE_BYTES
from trilemma.specs.stack import HostMode, StackSpec


@dataclass(frozen=True)
class StepContext:
    """One step's inputs and the quantities derived from them once."""

    m: ModelSpec
    pc: ParamCounts
    plan: TrainingPlan
    cluster: ClusterSpec
    L: Any  # LayoutArrays: one layout per row
    seq: float  # tokens per sequence
    consts: dict  # the calibrated constants (presets/constants.toml)
    c: dict  # the device's constants at the plan's precision (roofline.device_constants)
    peak: float  # FLOP/s of the plan's matmuls
    attn_bf16: bool  # fp8 plans run attention in bf16
    attn_peak: float  # FLOP/s of the attention core
    bw: float  # HBM bytes/s
    e: float  # bytes per activation element
    T: np.ndarray  # tokens per device per micro-batch: micro_batch · seq / cp
    fab: Fabric  # the links the collectives use
    stack: StackSpec  # the features the step is timed with (TrainingPlan.stack_features)
    host: HostMode  # how its host issues kernels (host.effective_host)
    host_op_s: float  # host seconds per operator issued (host.host_op_s)
    host_bwd_op_s: float  # … per backward operator, issued by autograd's engine (host.host_op_s)
    async_launch: bool  # the host queues ahead of the device (HardwareSpec.async_launch)

    def gemm(self, M: Any, N: Any, K: Any) -> np.ndarray:
        """Seconds of one forward (M×K)·(K×N) matmul at the plan's precision (roofline.gemm_s)."""
        return gemm_s(M, N, K, self.peak, self.bw, self.e, self.c)

    def hbm_s(self, nbytes: Any) -> Any:
        """Seconds to move ``nbytes`` through HBM at the calibrated share of its bandwidth."""
        return nbytes / (self.bw * self.c["hbm"])

    @property
    def kernel_s(self) -> float:
        """The device's fixed cost per kernel, s: launch latency and the idle gap between
        back-to-back queued kernels; 0 on a device that runs operators on the calling thread (a CPU),
        whose per-operator cost is the host's (host.host_op_s)."""
        return self.c["kernel_s"] if self.async_launch else 0.0


def step_context(
    m: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    cluster: ClusterSpec,
    L: Any,
    seq: float,
    consts: dict,
) -> StepContext:
    """The context of one step of ``plan`` on ``cluster`` for the layout rows ``L``."""
    hw = cluster.hardware
    c = device_constants(consts, hw, plan.precision)
    peak = hw.peak(plan.precision)
    attn_bf16 = plan.precision == Precision.FP8 and Precision.BF16 in hw.peak_flop_per_s
    fab = fabric(cluster, c["link"], consts)
    return StepContext(
        m=m,
        pc=pc,
        plan=plan,
        cluster=cluster,
        L=L,
        seq=seq,
        consts=consts,
        c=c,
        peak=peak,
        attn_bf16=attn_bf16,
        attn_peak=hw.peak(Precision.BF16) if attn_bf16 else peak,
        bw=hw.hbm_bw_bytes_per_s,
        e=DTYPE_BYTES[plan.dtypes.activation],
        T=L.micro_batch * seq / L.cp,
        fab=fab,
        stack=plan.stack_features,
        host=(host := effective_host(plan.stack_features, plan.compile)),
        host_op_s=host_op_s(c, host),
        host_bwd_op_s=host_op_s(c, host, backward=True),
        async_launch=hw.async_launch,
    )


__all__ = ["StepContext", "step_context"]
