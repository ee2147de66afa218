"""Step time: per-GEMM roofline compute + exposed communication + pipeline bubble, as named terms.

``step_time`` adds them up, each a function of its own module, with its source at its formula:

- compute per layer (layer_time.layer_times: GEMMs by roofline.gemm_s, the attention core,
  elementwise kernels by layer_ops, recomputation by class) and the LM head (layer_time.lm_head_s);
- tensor, context and expert parallelism inside a layer (parallel_time.tp_comm_s, cp_comm_s,
  ep_comm_s);
- the pipeline: the slowest rank, its sends and the 1F1B bubble (pipeline.pipeline_s);
- data parallelism and ZeRO (data_parallel.dp_comm_s) and the optimizer step
  (data_parallel.optimizer_s, offloaded: offload_s).

Longer derivations: docs/derivations.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from trilemma.estimate.data_parallel import dp_comm_s, optimizer_s, trained_state
from trilemma.estimate.layer_time import layer_times, lm_head_s
from trilemma.estimate.parallel_time import cp_comm_s, ep_comm_s, tp_comm_s
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.pipeline import pipeline_s
from trilemma.estimate.step_context import step_context
from trilemma.specs import ClusterSpec, ModelSpec, TrainingPlan


@dataclass(frozen=True)
class TimeArrays:
    """Seconds per optimizer step for each layout row, from its parts (derived on access)."""

    n_micro: np.ndarray  # micro-batches per pipeline per step
    compute_mb: np.ndarray  # one micro-batch through the slowest stage: compute (the sum of ops_mb)
    comm_mb: np.ndarray  # … exposed tensor/context/expert-parallel communication
    p2p_mb: np.ndarray  # … point-to-point sends between stages
    bubble_s: np.ndarray
    dp_comm_s: np.ndarray  # exposed data-parallel / ZeRO communication per step + the compute its hidden part slows (collective_interference_s)
    optimizer_s: np.ndarray
    # compute_mb by operation class, seconds per micro-batch on the slowest stage (recomputation
    # included in its class): gemm, attention (the core: QKᵀ, softmax, ·V), elementwise (memory-bound
    # kernels), kernel_launch (the device's fixed cost per kernel), lm_head (logits GEMMs and
    # cross-entropy), host (what the host's issue takes beyond the device: trilemma.estimate.host)
    ops_mb: dict[str, np.ndarray]

    @property
    def ops_s(self) -> dict[str, np.ndarray]:
        """compute_s by operation class, seconds per step (pipeline-busy, bubble excluded)."""
        return {k: self.n_micro * v for k, v in self.ops_mb.items()}

    @cached_property
    def step_s(self) -> np.ndarray:
        return (
            self.n_micro * (self.compute_mb + self.comm_mb + self.p2p_mb)
            + self.bubble_s
            + self.dp_comm_s
            + self.optimizer_s
        )

    compute_s = property(
        lambda self: self.n_micro * self.compute_mb
    )  # pipeline-busy compute, no bubble
    tp_comm_s = property(lambda self: self.n_micro * self.comm_mb)
    pp_comm_s = property(lambda self: self.n_micro * self.p2p_mb)


def step_time(
    m: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    cluster: ClusterSpec,
    L,
    seq: float,
    batch: np.ndarray,
    consts: dict,
) -> TimeArrays:
    """Seconds per optimizer step of ``batch`` sequences of ``seq`` tokens, per layout row ``L``
    (LayoutArrays): the sum of the terms named in the module's docstring."""
    ctx = step_context(m, pc, plan, cluster, L, seq, consts)
    n_micro = batch / (L.dp * L.micro_batch)  # micro-batches per pipeline per step
    lt = layer_times(ctx)
    layer_comm = tp_comm_s(ctx, lt) + cp_comm_s(ctx, lt) + ep_comm_s(ctx, lt)
    head = lm_head_s(ctx, lt.head_gemms)
    pipe = pipeline_s(ctx, lt.per_class, head, layer_comm, lt.host)
    st = trained_state(ctx)
    return TimeArrays(
        n_micro=n_micro,
        compute_mb=pipe.compute_mb,
        comm_mb=pipe.comm_mb,
        p2p_mb=pipe.p2p_mb,
        bubble_s=pipe.bubble_s,
        dp_comm_s=dp_comm_s(ctx, st, n_micro, pipe.layers, lt, pipe.compute_mb),
        optimizer_s=optimizer_s(ctx, st, n_micro, pipe.layers * lt.layer_bwd, pipe.compute_mb),
        ops_mb=pipe.ops_mb,
    )


__all__ = ["TimeArrays", "step_time"]
