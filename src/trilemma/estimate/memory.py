"""Memory per device as an inventory: model states, activations, logits, overheads.

Model states follow ZeRO (Rajbhandari et al. 2020, arXiv 1910.02054 §3, §5): weights, gradients
and optimizer state (fp32 master + Adam moments), sharded over TP × PP first, then over the
data-parallel group by ZeRO stage (1: optimizer, 2: + gradients, 3 / FSDP: + weights).

Activations follow Korthikanti et al. 2022 (arXiv 2205.05198) §4, Table 2, rewritten as an
inventory of the tensors a layer saves for backward so that it generalises to GQA, gated MLPs,
no dropout, MoE and flash attention. For a GPT layer with dropout, fp16 and no parallelism the
inventory sums to the paper's s·b·h·(34 + 5·a·s/h) bytes (checked in tests/test_memory.py).
Pipelines (1F1B) keep up to pp micro-batches in flight on the first stage (§4.2.3).

Outside PyTorch's allocator, each a term of its own (they count in the device total, not in the
allocator's reserved or allocated peaks): the CUDA context (HardwareSpec.cuda_context_bytes), NCCL's
communication buffers per process group (:func:`nccl_buffer_bytes`) and a fitted residual
(memory.framework_residual_bytes: cuBLAS/cuDNN workspaces and what else the two do not cover).

Every function broadcasts over layout arrays (one row per candidate layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from trilemma.estimate.activations import (
    activation_bytes_per_layer,
    finetune_activation_bytes,
    float8_cast_bytes,
)
from trilemma.estimate.finetune import state_bytes, trainable_params
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.pipeline import dualpipe_runs, stage_layers
from trilemma.estimate.trainer_memory import offloaded_layers, trainer_loss_bytes
from trilemma.specs import ModelSpec, Recompute, TrainingPlan
from trilemma.specs.enums import DTYPE_BYTES, Dtype, FinetuneMethod, Offload, Precision, Task


@dataclass(frozen=True)
class MemoryArrays:
    """Bytes per device for each layout row, on the stage that needs the most.

    Holds both ends of the pipeline; ``total`` is cheap (what the solver needs) and the
    breakdown is picked from the larger stage only when asked for.

    ``total`` is what a plan needs: its tensors at their peak (the allocated peak) plus what the
    framework holds outside PyTorch's allocator: the CUDA context, NCCL's buffers and a fitted residual
    (``overhead_bytes``, their sum). The caching allocator reserves more when
    memory is free — ``fragmentation`` of the allocated peak, fitted on reserved peaks — but gives
    cached blocks back before it fails an allocation (PyTorch's allocator frees its cache and retries),
    so the fit verdict does not count it; ``trilemma.validate.predict.memory_quantity`` adds it when a
    published figure is a reserved peak or device memory in use."""

    # weights, grads, optimizer, activations
    first: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    last: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    logits: np.ndarray  # on the last stage
    pp: np.ndarray
    # of the activations: float8 linears' casts at the backward of the largest linear (float8_cast_bytes)
    float8_first: np.ndarray
    float8_last: np.ndarray
    context_bytes: float  # the CUDA context (HardwareSpec.cuda_context_bytes; 0 on a CPU)
    nccl_bytes: np.ndarray  # NCCL's buffers for the layout's process groups (nccl_buffer_bytes)
    # the fitted rest (memory.framework_residual_bytes), or a CPU's measured overhead
    residual_bytes: float
    fragmentation: float
    # offloaded states in host memory per device (host_state_bytes)
    host_bytes: np.ndarray | float = 0.0
    # an RL step's reference model and generation engine, and PPO's reward model and critic (weights,
    # gradients, optimizer states), outside the policy's training states (trilemma.estimate.rl)
    reference_bytes: np.ndarray | float = 0.0
    generation_bytes: np.ndarray | float = 0.0
    reward_bytes: np.ndarray | float = 0.0
    critic_bytes: np.ndarray | float = 0.0
    teacher_bytes: np.ndarray | float = 0.0  # a distillation teacher's weights (estimate.distill)

    @property
    def overhead_bytes(self) -> np.ndarray:
        """Everything outside PyTorch's allocator, bytes: CUDA context + NCCL buffers + residual."""
        return (
            self.context_bytes
            + self.nccl_bytes
            + self.residual_bytes
            + self.reference_bytes
            + self.generation_bytes
            + self.reward_bytes
            + self.critic_bytes
            + self.teacher_bytes
        )

    @cached_property
    def _bases(self) -> tuple[np.ndarray, np.ndarray]:
        return sum(self.first), sum(self.last) + self.logits

    @cached_property
    def total(self) -> np.ndarray:
        b1, b2 = self._bases
        # with pp = 1 there is one stage (the last): in-flight count 1, logits alongside
        base = np.where(self.pp == 1, b2, np.maximum(b1, b2))
        return base + self.overhead_bytes

    @cached_property
    def _use_first(self) -> np.ndarray:
        b1, b2 = self._bases
        return (self.pp > 1) & (b1 >= b2)

    def _pick(self, k: int) -> np.ndarray:
        return np.where(self._use_first, self.first[k], self.last[k])

    weights = property(lambda self: self._pick(0))
    gradients = property(lambda self: self._pick(1))
    optimizer = property(lambda self: self._pick(2))
    activations = property(lambda self: self._pick(3))

    @property
    def float8_casts(self) -> np.ndarray:
        """The part of ``activations`` that float8 linears' casts take (0 without precision fp8)."""
        return np.where(self._use_first, self.float8_first, self.float8_last)

    @property
    def logits_picked(self) -> np.ndarray:
        """Logits and their gradient on the stage picked (0 on the first stage of a pipeline)."""
        return np.where(self._use_first, 0.0, self.logits)

    @property
    def other(self) -> np.ndarray:
        """Logits (last stage) + everything outside the allocator (context, NCCL, residual)."""
        return self.logits_picked + self.overhead_bytes


def nccl_buffer_bytes(L: LayoutArrays, consts: dict) -> np.ndarray:
    """NCCL's communication buffers per device, bytes: one communicator per process group of the layout
    with more than one rank (data: dp, tensor: tp, pipeline: pp, context: cp, expert: ep), each

        channels × peers × (SIMPLE + LL128 + LL buffer bytes)

    NCCL gives every connection to a peer, on every channel, one buffer per protocol (NCCL docs,
    Environment Variables: NCCL_BUFFSIZE "the size of the buffer used by NCCL when communicating data
    between pairs of GPUs", default 4 MiB, the SIMPLE protocol's; the LL and LL128 protocols' buffers are
    NCCL's DEFAULT_LL_BUFFSIZE = 8·512·8·16 and DEFAULT_LL128_BUFFSIZE = 120·640·8·8 bytes, src/init.cc). A ring connects each
    rank to two peers (the previous and the next). The channel count is NCCL's choice for the topology
    (NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS bound it); constants.toml states the one assumed. These buffers
    are cudaMalloc'ed by NCCL, outside PyTorch's caching allocator: they count in the device total only."""
    per_comm = (
        consts["nccl_channels"]
        * consts["nccl_peers"]
        * (
            consts["nccl_buffsize_bytes"]
            + consts["nccl_ll128_buffsize_bytes"]
            + consts["nccl_ll_buffsize_bytes"]
        )
    )
    groups = sum((np.asarray(d) > 1).astype(float) for d in (L.dp, L.tp, L.pp, L.cp, L.ep))
    return groups * per_comm


def model_state_bytes(
    m: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    L: LayoutArrays,
    first: bool,
    consts: dict | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(weights, gradients, optimizer, local parameters) bytes per device on the first or last stage.

    Bytes per parameter come from trilemma.estimate.finetune.state_bytes, by group: the layers (a fine-tune's
    quantised base and adapters) and the ends (embeddings, output layer). Under offload the optimizer state
    lives in host memory (``host_state_bytes``) and the gradients pass through one reduce bucket
    (offload.bucket_params 16-bit gradients, DeepSpeed's reduce_bucket_size); with the weights offloaded
    too, the device holds the two layers being gathered (ZeRO-Infinity's prefetch)."""
    tp, pp, ep = L.tp, L.pp, L.ep
    layers = stage_layers(m.n_layers, pp, L.vp)  # the heaviest rank's (stages may be uneven)
    dense_frac = m.n_dense_layers / m.n_layers
    moe_frac = m.n_moe_layers / m.n_layers
    layer_ne = layers * (dense_frac * pc.per_dense_layer + moe_frac * pc.per_moe_layer_shared) / tp
    expert = layers * moe_frac * m.n_experts * pc.per_expert / (tp * ep)
    # embeddings on the first stage, final norm + LM head on the last (a tied table is copied to
    # the last stage when pp > 1, as Megatron does); with pp = 1 one stage holds both.
    tied_copy = m.vocab_size * m.d_model if m.tied_embeddings else 0
    ends = (
        np.where(
            pp == 1,
            pc.first_stage_extra + pc.last_stage_extra,
            pc.first_stage_extra if first else pc.last_stage_extra + tied_copy,
        )
        / tp
    )
    local = layer_ne + ends + expert

    sb = state_bytes(m, pc, plan)
    shard_ne = L.dims.shard_ranks  # FSDP/ZeRO shard over the data (and context) parallel ranks
    shard_ex = np.maximum(shard_ne // ep, 1)

    def sharded(layer_b: Any, ends_b: float, stage_min: int) -> np.ndarray:
        on = L.zero >= stage_min
        return (layer_ne * layer_b + ends * ends_b) / np.where(
            on, shard_ne, 1
        ) + expert * layer_b / np.where(on, shard_ex, 1)

    weights = sharded(sb.layer_weight, sb.ends_weight, 3)
    # ZeRO-3 gathers whole layers before use: about two layers unsharded at a time (prefetch)
    layer_local = (
        dense_frac * pc.per_dense_layer
        + moe_frac * (pc.per_moe_layer_shared + m.n_experts * pc.per_expert / ep)
    ) / tp
    # (nothing is gathered when the shard group is a single rank)
    weights = weights + np.where(
        L.zero >= 3, 2 * layer_local * sb.layer_weight * (1 - 1 / shard_ne), 0.0
    )
    if (
        sb.streamed
    ):  # ZeRO-Infinity: the weights live on the host; two layers in flight on the device
        weights = 2 * layer_local * sb.layer_weight + 0 * weights
    grads = sharded(sb.layer_grad, sb.ends_grad, 2)
    if plan.offload != Offload.NONE:  # one reduce bucket of 16-bit gradients on its way to the host
        bucket = (consts or {}).get("offload_bucket_params", 0.0)
        train = trainable_params(m, pc, plan.finetune) if plan.finetune is not None else pc.total
        grads = grads + np.minimum(bucket, train / L.dims.weight_shards) * DTYPE_BYTES[Dtype.BF16]
    optim = sharded(sb.layer_optim, sb.ends_optim, 1)
    tr, ft = plan.trainer, plan.finetune
    whole = ft is None or ft.method in (FinetuneMethod.FULL, FinetuneMethod.FREEZE)
    if tr is not None and tr.optimizer_in_backward and whole:
        # the step runs in the backward per parameter and frees its gradient: at most the largest trainable
        # tensor's gradient is whole at once — the output table (full), else a layer's widest matrix (freeze);
        # adapters' gradients are small and kept as they are
        widest = (
            m.ffn_dim if ft is not None and ft.method == FinetuneMethod.FREEZE else m.vocab_size
        )
        grads = np.full(np.shape(grads), widest * m.d_model / tp * plan.dtypes.bytes_of("grad"))
    return weights, grads, optim, local


def host_state_bytes(
    m: ModelSpec, pc: ParamCounts, plan: TrainingPlan, L: LayoutArrays
) -> np.ndarray:
    """Host memory per device for offloaded states, bytes: the local parameters (÷ tp·pp, and ÷ dp·cp: ZeRO
    partitions what it offloads) × state_bytes(...).host. 0 without offload."""
    sb = state_bytes(m, pc, plan)
    if plan.offload == Offload.NONE:
        return np.zeros(np.shape(L.dp), dtype=float)
    return np.asarray(pc.total / L.dims.n_gpus * sb.host, dtype=float)


def memory_per_device(
    m: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    L: LayoutArrays,
    seq: float,
    n_micro: np.ndarray,
    consts: dict,
) -> MemoryArrays:
    """Peak bytes per device: the larger of the first pipeline stage and the last."""
    e = DTYPE_BYTES[plan.dtypes.activation]
    per_layer_kept, per_layer_full, dequant = _layer_activations(m, seq, L, plan, e)
    layers = stage_layers(m.n_layers, L.pp, L.vp)

    # 1F1B: stage i keeps (pp - i) micro-batches in flight, capped by the micro-batch count;
    # interleaving multiplies the first stage's by (1 + (pp-1)/(pp·vp)) (Korthikanti §4.2.3).
    inflight_first = np.minimum(L.pp, n_micro) * np.where(
        L.vp > 1, 1 + (L.pp - 1) / (L.pp * L.vp), 1.0
    )
    dual = dualpipe_runs(plan.stack_features.pp_dualpipe, L.pp)  # arXiv 2412.19437 Table 2: PP + 1
    inflight_first = np.where(dual, np.minimum(L.pp + 1, n_micro), inflight_first)
    # while recomputing (full or op-level), one layer's activations beyond what it kept are live again
    transient = np.where(
        L.recomputes(Recompute.FULL, Recompute.OP),
        np.maximum(per_layer_full - per_layer_kept, 0.0),
        0.0,
    )
    # float8 linears: their casts during one linear's backward (float8_cast_bytes), on top of it
    f8 = np.zeros_like(transient, dtype=float)
    if plan.precision == Precision.FP8:
        f8 = float8_cast_bytes(m, seq, L)
        f8 = np.maximum(f8, float8_cast_bytes(m, seq, L, moe_layer=True)) if m.is_moe else f8
        transient = transient + f8

    logits = _logits_bytes(m, seq, L, plan, consts, e)

    transient = transient + dequant
    # freeze: layers below the trainable ones run without autograd (nothing requires a gradient there) and
    # keep no activations; the last N layers keep theirs
    ft = plan.finetune
    if ft is not None and ft.method == FinetuneMethod.FREEZE:
        layers = np.minimum(layers, ft.trainable_layers)
    layers = offloaded_layers(plan, L, layers)
    act_first = layers * per_layer_kept * inflight_first + transient
    # on the last stage the logits and their gradients are freed once the LM head's backward is done,
    # before the last layer is recomputed: the two never coexist, so the stage holds the larger
    # (the activations carry the recomputation's excess over the logits; measured against PyTorch's
    # MemTracker in benchmarks/memory_vs_torch.py)
    act_last = layers * per_layer_kept + np.maximum(transient - logits, 0.0)

    w1, g1, o1, _ = model_state_bytes(m, pc, plan, L, first=True, consts=consts)
    w2, g2, o2, _ = model_state_bytes(m, pc, plan, L, first=False, consts=consts)
    w1, w2 = (np.where(dual, 2 * w, w) for w in (w1, w2))  # DualPipe's two copies of the weights
    # outside the allocator: the CUDA context and the residual come in ``consts`` (a CPU: no context,
    # no NCCL channels; trilemma.estimate.capacity.outside_allocator); NCCL's buffers follow the layout
    nccl = nccl_buffer_bytes(L, consts)
    return MemoryArrays(
        first=(w1, g1, o1, act_first),
        last=(w2, g2, o2, act_last),
        logits=logits,
        pp=L.pp,
        float8_first=f8,
        float8_last=np.maximum(f8 - np.maximum(logits - (transient - f8), 0.0), 0.0),
        context_bytes=consts["cuda_context_bytes"],
        nccl_bytes=nccl,
        residual_bytes=consts["framework_residual_bytes"],
        fragmentation=consts["fragmentation"],
        host_bytes=host_state_bytes(m, pc, plan, L),
    )


def _layer_activations(
    m: ModelSpec, seq: float, L: LayoutArrays, plan: TrainingPlan, e: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes per layer and micro-batch (dense and MoE layers averaged by their share, with a
    fine-tune's adapter tensors): (kept under the rows' recompute, the whole layer's), and the
    dequantised weights a quantised base adds while one layer runs; ``e`` activation bytes per
    element."""
    flash = plan.flash_attention
    probs = plan.dtypes.bytes_of("attention_probs") or None
    norm_in = plan.dtypes.bytes_of("norm_input") or None
    full_d, kept_d = activation_bytes_per_layer(
        m,
        seq,
        L,
        e,
        flash,
        moe_layer=False,
        compiled=plan.compile,
        probs_bytes=probs,
        norm_bytes=norm_in,
    )
    if m.is_moe:
        full_m, kept_m = activation_bytes_per_layer(
            m,
            seq,
            L,
            e,
            flash,
            moe_layer=True,
            compiled=plan.compile,
            probs_bytes=probs,
            norm_bytes=norm_in,
        )
    else:
        full_m, kept_m = full_d, kept_d
    fd, fm = m.n_dense_layers / m.n_layers, m.n_moe_layers / m.n_layers
    per_layer_kept = fd * kept_d + fm * kept_m
    # a fine-tune's adapter tensors: kept with the layer unless the whole layer is recomputed (then they
    # are live again only while it is, with the rest of the layer's)
    lora_act, dequant = finetune_activation_bytes(m, seq, L, plan, e)
    per_layer_kept = per_layer_kept + np.where(L.recomputes(Recompute.FULL), 0.0, lora_act)
    per_layer_full = np.maximum(full_d, full_m) + lora_act
    return per_layer_kept, per_layer_full, dequant


def _logits_bytes(
    m: ModelSpec, seq: float, L: LayoutArrays, plan: TrainingPlan, consts: dict, e: float
) -> np.ndarray:
    """Bytes of the last stage's logits and what sits beside them (the LM head's input and the
    final norm's), per micro-batch; none for a classifier."""
    # logits on the last stage: s·b·V/tp elements (vocab-parallel), bytes per element at their peak in the
    # loss's backward (constants.toml: a fused kernel; eager PyTorch on one TP rank; eager PyTorch's
    # DTensor loss_parallel across TP ranks)
    s_loc = seq / L.cp
    # a fine-tuning trainer that compiles the whole model compiles its loss too (compiled_logits_bytes_per_element)
    whole_model_compiled = plan.compile and plan.trainer is not None
    per_logit = (
        consts["fused_logits_bytes_per_element"]
        if plan.fused_loss
        else np.where(
            L.tp > 1,
            consts["loss_parallel_logits_bytes_per_element"],
            consts[
                "compiled_logits_bytes_per_element"
                if whole_model_compiled
                else "logits_bytes_per_element"
            ],
        )
    )
    logits = s_loc * L.micro_batch * m.vocab_size / L.tp * per_logit
    logits = trainer_loss_bytes(m, s_loc * L.micro_batch, L.tp, plan, e, logits)
    # beside them, the LM head's input, kept for its weight gradient (whole on every TP rank: the column-
    # parallel head all-gathers the sequence-parallel norm output), and the final norm's input (its
    # sequence shard under SP) — the last layer's output, which no layer's inventory counts
    logits = logits + e * s_loc * L.micro_batch * m.d_model * (1.0 + L.sp_share)
    if (
        plan.task == Task.CLASSIFICATION
    ):  # a few classes from a pooled token: no vocabulary logits, no LM head input
        logits = 0.0 * logits
    return logits
