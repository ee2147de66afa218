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

from trilemma.estimate.finetune import module_shapes, state_bytes, trainable_params
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.pipeline import stage_layers
from trilemma.specs import ModelSpec, PositionType, Recompute, TrainingPlan
from trilemma.specs.enums import (
    DTYPE_BYTES,
    BasePrecision,
    Dtype,
    FinetuneMethod,
    Offload,
    Precision,
    Task,
)


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
    so the fit verdict does not count it; ``trilemma.validate.fit.memory_quantity`` adds it when a
    published figure is a reserved peak or device memory in use."""

    first: tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray
    ]  # weights, grads, optimizer, activations
    last: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    logits: np.ndarray  # on the last stage
    pp: np.ndarray
    # of the activations: float8 linears' casts at the backward of the largest linear (float8_cast_bytes)
    float8_first: np.ndarray
    float8_last: np.ndarray
    context_bytes: float  # the CUDA context (HardwareSpec.cuda_context_bytes; 0 on a CPU)
    nccl_bytes: np.ndarray  # NCCL's buffers for the layout's process groups (nccl_buffer_bytes)
    residual_bytes: (
        float  # the fitted rest (memory.framework_residual_bytes), or a CPU's measured overhead
    )
    fragmentation: float
    host_bytes: np.ndarray | float = (
        0.0  # offloaded states in host memory per device (host_state_bytes)
    )

    @property
    def overhead_bytes(self) -> np.ndarray:
        """Everything outside PyTorch's allocator, bytes: CUDA context + NCCL buffers + residual."""
        return self.context_bytes + self.nccl_bytes + self.residual_bytes

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


def activation_bytes_per_layer(
    m: ModelSpec,
    seq: float,
    L: LayoutArrays,
    act_bytes: float,
    flash: bool,
    moe_layer: bool = False,
    compiled: bool = False,
    probs_bytes: float | None = None,
    norm_bytes: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes one layer saves for backward for one micro-batch, without and with the rows' recompute.

    Returns (no-recompute bytes, bytes under the row's recompute mode). Tensor inventory
    (Korthikanti 2022 §4.1; e = activation bytes, s the local sequence s/cp, b micro-batch,
    r = 1/tp when sequence-parallel else 1 for the tensors TP does not split):
      attention:  norm input n·sbd·r (n = ``norm_bytes``, default e; 4 where an eager norm upcasts to fp32:
                  DtypeSpec.norm_input); QKV input e·sbd·r; Q e·sb·d_attn/tp; K, V e·sb·d_kv/tp each;
                  rotary: rotated Q and K e·sb·(d_attn + d_kv)/tp besides the QKV output;
                  without flash: softmax output e·h·s·S·b/tp (+ dropout mask h·s·S·b/tp and dropout
                  output e·h·s·S·b/tp) — with ``probs_bytes`` p > e (torch.autocast: softmax autocasts
                  to float32, PyTorch AMP docs "CUDA Ops that can autocast to float32"), the fp32 softmax
                  output p (its backward saves it), the mask and the e-byte copy autocast makes for the
                  P·V matmul, which saves it: (p + drop + e)·h·s·S·b/tp; with flash: log-sum-exp
                  4·sb·h/tp (FlashAttention-2 saves only O and LSE); output-projection input e·sb·d_attn/tp;
                  dropout mask sbd·r.
      MLP:        norm input n·sbd·r (not for a parallel block); MLP input e·sbd·r;
                  hidden tensors (2 for GELU/ReLU: pre- and post-activation; 4 for gated in eager
                  PyTorch: gate, up, act(gate), product) e·sb·f/tp each; dropout mask sbd·r.
      MoE:        router input + top_k copies of dispatched tokens e·sbd, top_k × expert hidden
                  tensors, router logits 4·sb·E; plus shared experts as dense MLPs.
    ``compiled`` (torch.compile, TrainingPlan.compile): a gated MLP saves 3 hidden tensors, not 4 — see
    :data:`COMPILED_GATED_HIDDEN`.
    """
    tp, cp, mb = L.tp, L.cp, L.micro_batch
    s = seq / cp  # local sequence length under context parallelism
    S = seq  # keys attended to (CP gathers K, V)
    e = act_bytes
    drop = 1.0 if m.dropout else 0.0
    r = L.sp_share
    sbd = s * mb * m.d_model
    sb = s * mb
    n_in = (
        e if norm_bytes is None else norm_bytes
    )  # bytes per element of what a norm saves of its input

    shared_norm = m.norms_per_layer == 1
    # rotary positions: attention saves the rotated Q and K, new tensors, while the fused QKV GEMM's
    # output stays alive because V is a view of it (Megatron-LM's and the probe model's fused QKV;
    # Su et al. 2021 rotation applied out of place). Korthikanti's inventory predates RoPE.
    rope = e * sb * (m.d_attn + m.d_kv) / tp if m.position == PositionType.ROTARY else 0.0
    attn_keep = (
        (n_in + (0 if shared_norm else e)) * sbd * r  # norm input (+ norm output into QKV)
        + e * sb * (m.d_attn + 2 * m.d_kv) / tp  # Q, K, V
        + rope  # rotated Q, K
        + e * sb * m.d_attn / tp  # output-projection input (= attention output O)
        + drop * sbd * r
    )  # attention-output dropout mask (1 byte)
    if flash:
        scores = 4.0 * sb * m.n_heads / tp  # log-sum-exp, fp32
    else:
        p = e if probs_bytes is None else probs_bytes
        per_score = e + drop * (1 + e) if p <= e else p + drop + e
        scores = per_score * m.n_heads * s * S * mb / tp
    if shared_norm:
        mlp_in = e * sbd * r * 0  # the shared norm output is already counted
    elif m.parallel_block:
        mlp_in = e * sbd * r  # second norm's output (its input is the layer input, counted)
    else:
        mlp_in = (n_in + e) * sbd * r  # norm input + MLP input
    # hidden tensors saved per token: GELU/ReLU 2 (pre- and post-activation, Korthikanti §4.1); gated 4
    # in eager PyTorch — the gate, up, act(gate) and their product (torchtitan's FeedForward,
    # w2(silu(w1 x) · w3 x): SiLU saves its input, the product saves both factors, w2 saves the
    # product). A fused SwiGLU kernel that recomputes act(gate) (Megatron-LM's bias_swiglu) saves 3.
    k_f = (COMPILED_GATED_HIDDEN if compiled else 4) if m.ffn_matrices == 3 else 2
    if moe_layer:
        routed = m.top_k * (e * sbd / tp + k_f * e * sb * m.expert_ffn / tp)
        shared = m.n_shared_experts * k_f * e * sb * m.expert_ffn / tp
        mlp = mlp_in + routed + shared + 4.0 * sb * m.n_experts + drop * sbd * r
    else:
        mlp = mlp_in + k_f * e * sb * m.ffn_dim / tp + drop * sbd * r

    full = attn_keep + scores + mlp
    # op-level (torchtitan's selective_ac_option = "op"): the layer input, the outputs of the odd
    # matmuls in call order — Q (1st), V (3rd), the MLP's first (5th: gate, or up when not gated) and,
    # gated, the down projection (7th) — and attention's output with its log-sum-exp (flash); the rest
    # is recomputed (trilemma.estimate.flops.op_recompute_matmul_flop_fwd)
    f_op = m.expert_ffn * (m.top_k + m.n_shared_experts) if moe_layer else m.ffn_dim
    op_keep = (
        e * sbd * r
        + e * sb * (m.d_attn + m.d_kv) / tp
        + e * sb * m.d_attn / tp
        + (4.0 * sb * m.n_heads / tp if flash else 0.0)
        + e * sb * f_op / tp
        + (e * sbd * r if m.ffn_matrices == 3 else 0.0)
    )
    kept = np.where(
        L.recomputes(Recompute.FULL),
        e * sbd * r,  # full: the layer input only (§4.1, "2sbh", /t with SP)
        np.where(
            L.recomputes(Recompute.SELECTIVE),
            attn_keep + (scores if flash else 0.0) + mlp,
            np.where(L.recomputes(Recompute.OP), op_keep, full),
        ),
    )
    return full, kept


#: Hidden tensors per token a gated MLP saves under torch.compile (inductor), f wide each: the gate and up
#: projections' outputs and their product; act(gate) is recomputed. Inductor's partitioner
#: (torch/_functorch/partitioners.py, min_cut_rematerialization_partition) recomputes a pointwise op in
#: the backward when every backward user of its output fuses with it (act(gate) is used only by the
#: product's backward, a pointwise kernel) and bans recomputing one whose output a non-fusible op
#: consumes in the backward ("ban_recompute_materialized_backward"; is_materialized_backwards): the
#: product is the down projection's input, read by its weight-gradient matmul, so it stays saved. The
#: other tensors of the inventory are matmul or attention inputs and stay saved too (the norm outputs,
#: the rotated Q and K), and GELU's pre- and post-activation likewise (2). Measured on this machine with
#: the probe's Llama block in fp32 under torch.compile(backend="aot_eager_decomp_partition") (inductor's
#: partitioner without its code generation; tests/test_memory_terms.py): the hidden tensors saved go from
#: 4·f to 3·f per token (the gate/up output 2·f and the product f), the rotated Q, K and the norm outputs
#: stay. (Eager PyTorch's composite CPU rms_norm also saves its normalised input, which compile
#: recomputes; the inventory counts norms as fused kernels that save input and statistics only.)
COMPILED_GATED_HIDDEN = 3


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


def float8_cast_bytes(
    m: ModelSpec, seq: float, L: LayoutArrays, moe_layer: bool = False
) -> np.ndarray:
    """Transient bytes of float8 linears (torchao Float8Linear, dynamic tensorwise scaling: torchtitan's
    --model.converters float8, trilemma's precision fp8) at the backward of the largest linear.

    torchao saves the high-precision input and weight for backward and casts again there
    (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args.forward:
    ``ctx.save_for_backward(input_hp, weight_hp_t)``), so the saved activations, the bf16 weights and
    the fp32 master copy are those of bf16 training. What float8 adds is the casts alive during one
    linear's backward, 1 byte per element (e4m3 / e5m2): the weight (d_in × d_out local), the input
    (s·b × d_in) for the weight gradient and the output gradient twice (s·b × d_out, one layout for
    each of the two matmuls). The largest linear is the MLP's up/gate projection (d → f/tp) or its
    down projection (f/tp → d)."""
    s = seq / L.cp
    sb = s * L.micro_batch
    f = (m.expert_ffn if moe_layer else m.ffn_dim) / L.tp
    d = m.d_model
    up = sb * d + 2 * sb * f + d * f  # d → f: input, 2 × grad_output, weight
    down = sb * f + 2 * sb * d + d * f  # f → d
    return np.maximum(up, down) * DTYPE_BYTES[Dtype.FP8]


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


def finetune_activation_bytes(
    m: ModelSpec, seq: float, L: LayoutArrays, plan: TrainingPlan, e: float
) -> tuple[np.ndarray, np.ndarray]:
    """A LoRA/QLoRA fine-tune's change to one layer's saved activations for one micro-batch, and its
    transient bytes: (per-layer change, transient).

    Added: each adapted module saves its B's input A·x (r wide) and, with lora_dropout > 0, the dropout's
    output (d_in wide) and its 1-byte mask (PEFT's LoRA Linear: ``lora_B(lora_A(dropout(x)))``; with dropout
    0 PEFT uses nn.Identity and x is a tensor saved already).
    Taken away: a frozen linear keeps no input for backward — autograd saves a matmul's input only for its
    weight gradient (PyTorch derivatives.yaml, mm: ``mat2: self.mH() @ grad``; the codegen saves ``self``
    only when ``mat2`` requires a gradient) — so a tensor that only frozen, unadapted linears read is not
    kept: the attention norm's output when none of q, k, v is adapted; the attention output's copy that
    o_proj reads (FlashAttention keeps its own output) when o_proj is not; the MLP norm's output when
    neither gate nor up is; the MLP's hidden product (or GELU's output) that down_proj reads when down_proj
    is not. Measured against the bytes autograd saves for PEFT models (tests/test_finetune.py). Not modelled:
    the first layer, whose input needs no gradient, saves nothing before its first adapted module (at most
    1/L of the activations; a 4-layer model adapted on down_proj alone saves 17% less than predicted).
    Transient: a quantised base (int8, nf4) is dequantised to a 16-bit copy of one weight at a time before
    its matmul (bitsandbytes MatMul4Bit / MatMul8bitLt): the largest linear."""
    ft = plan.finetune
    zero = np.zeros(np.shape(L.tp), dtype=float)
    if ft is None or not ft.adapters:
        return zero, zero
    sb_tok = seq / L.cp * L.micro_batch
    r = L.sp_share  # d-wide tensors under sequence parallelism
    t = set(ft.targets)
    per = 0.0
    for name, (d_in, _d_out) in module_shapes(m).items():
        if name in t:
            per = (
                per
                + e * sb_tok * ft.lora_rank
                + (ft.lora_dropout > 0) * sb_tok * d_in * (e + 1) / L.tp
            )
    skip = (
        e * sb_tok * m.d_model * r * (not t & {"q_proj", "k_proj", "v_proj"})
        + e * sb_tok * m.d_attn / L.tp * ("o_proj" not in t and plan.flash_attention)
        + e * sb_tok * m.d_model * r * (not t & {"gate_proj", "up_proj"} and m.norms_per_layer > 1)
        + e * sb_tok * m.ffn_dim / L.tp * ("down_proj" not in t)
    )
    transient = zero
    if ft.base_precision in (BasePrecision.NF4, BasePrecision.INT8):
        transient = zero + DTYPE_BYTES[Dtype.BF16] * m.d_model * max(m.ffn_dim, m.d_attn) / L.tp
    return zero + per - skip, transient


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
    layers = stage_layers(m.n_layers, L.pp, L.vp)

    # 1F1B: stage i keeps (pp - i) micro-batches in flight, capped by the micro-batch count;
    # interleaving multiplies the first stage's by (1 + (pp-1)/(pp·vp)) (Korthikanti §4.2.3).
    inflight_first = np.minimum(L.pp, n_micro) * np.where(
        L.vp > 1, 1 + (L.pp - 1) / (L.pp * L.vp), 1.0
    )
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

    # logits on the last stage: s·b·V/tp elements (vocab-parallel), bytes per element at their peak in the
    # loss's backward (constants.toml: a fused kernel; eager PyTorch on one TP rank; eager PyTorch's
    # DTensor loss_parallel across TP ranks)
    s_loc = seq / L.cp
    per_logit = (
        consts["fused_logits_bytes_per_element"]
        if plan.fused_loss
        else np.where(
            L.tp > 1,
            consts["loss_parallel_logits_bytes_per_element"],
            consts["logits_bytes_per_element"],
        )
    )
    logits = s_loc * L.micro_batch * m.vocab_size / L.tp * per_logit
    # beside them, the LM head's input, kept for its weight gradient (whole on every TP rank: the column-
    # parallel head all-gathers the sequence-parallel norm output), and the final norm's input (its
    # sequence shard under SP) — the last layer's output, which no layer's inventory counts
    logits = logits + e * s_loc * L.micro_batch * m.d_model * (1.0 + L.sp_share)
    if (
        plan.task == Task.CLASSIFICATION
    ):  # a few classes from a pooled token: no vocabulary logits, no LM head input
        logits = 0.0 * logits

    transient = transient + dequant
    # freeze: layers below the trainable ones run without autograd (nothing requires a gradient there) and
    # keep no activations; the last N layers keep theirs
    ft = plan.finetune
    if ft is not None and ft.method == FinetuneMethod.FREEZE:
        layers = np.minimum(layers, ft.trainable_layers)
    act_first = layers * per_layer_kept * inflight_first + transient
    # on the last stage the logits and their gradients are freed once the LM head's backward is done,
    # before the last layer is recomputed: the two never coexist, so the stage holds the larger
    # (the activations carry the recomputation's excess over the logits; measured against PyTorch's
    # MemTracker in benchmarks/memory_vs_torch.py)
    act_last = layers * per_layer_kept + np.maximum(transient - logits, 0.0)

    w1, g1, o1, _ = model_state_bytes(m, pc, plan, L, first=True, consts=consts)
    w2, g2, o2, _ = model_state_bytes(m, pc, plan, L, first=False, consts=consts)
    # outside the allocator: the CUDA context and the residual come in ``consts`` (a CPU: no context,
    # no NCCL channels; trilemma.estimate.evaluate.outside_allocator); NCCL's buffers follow the layout
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
