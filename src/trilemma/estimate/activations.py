"""The activations one layer saves for its backward, per device and micro-batch, as an inventory of
tensors (Korthikanti et al. 2022, arXiv 2205.05198 §4, Table 2, generalised to GQA, gated MLPs, no
dropout, MoE and flash attention), with float8 linears' casts and a fine-tune's adapter tensors.

Every function broadcasts over layout arrays (one row per candidate layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.estimate.finetune import linear_params_per_layer, module_shapes
from trilemma.estimate.layouts import LayoutArrays
from trilemma.specs import ModelSpec, PositionType, Recompute, TrainingPlan
from trilemma.specs.enums import (
    DTYPE_BYTES,
    BasePrecision,
    Dtype,
)


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
    d = _Saved.of(m, seq, L, act_bytes, norm_bytes)
    attn_keep = _attention_saved(m, d)
    scores = _scores_saved(m, d, flash, probs_bytes)
    mlp = _mlp_saved(m, d, moe_layer, compiled)
    full = attn_keep + scores + mlp
    kept = np.where(
        L.recomputes(Recompute.FULL),
        d.e * d.sbd * d.r,  # full: the layer input only (§4.1, "2sbh", /t with SP)
        np.where(
            L.recomputes(Recompute.SELECTIVE),
            attn_keep + (scores if flash else 0.0) + mlp,
            np.where(L.recomputes(Recompute.OP), _op_saved(m, d, flash, moe_layer), full),
        ),
    )
    return full, kept


@dataclass(frozen=True)
class _Saved:
    """The sizes the inventory of ``activation_bytes_per_layer`` is written in: ``s`` the local
    sequence (tokens, s/cp), ``S`` the keys attended to (CP gathers K, V), ``sb`` and ``sbd`` its
    products with the micro-batch (and d_model), ``r`` the sequence-parallel share, ``e`` activation
    bytes per element, ``n_in`` bytes of a saved norm input, ``drop`` 1 with dropout else 0."""

    tp: Any
    mb: Any
    s: Any
    S: float
    sb: Any
    sbd: Any
    r: Any
    e: float
    n_in: float
    drop: float

    @classmethod
    def of(
        cls, m: ModelSpec, seq: float, L: LayoutArrays, e: float, norm_bytes: float | None
    ) -> _Saved:
        s = seq / L.cp  # local sequence length under context parallelism
        return cls(
            tp=L.tp,
            mb=L.micro_batch,
            s=s,
            S=seq,
            sb=s * L.micro_batch,
            sbd=s * L.micro_batch * m.d_model,
            r=L.sp_share,
            e=e,
            # bytes per element of what a norm saves of its input
            n_in=e if norm_bytes is None else norm_bytes,
            drop=1.0 if m.dropout else 0.0,
        )


def qkv_width(m: ModelSpec, tp: Any) -> Any:
    """Elements per token of Q, K and V one TP rank saves: (d_attn + 2·d_kv)/tp; MLA's decompressed
    per-head Q and K (d_qk each) and V (d_attn) over tp, and its query and key-value latents, which
    every rank computes whole (DeepSeek-V3 §2.1.1)."""
    if not m.is_mla:
        return (m.d_attn + 2 * m.d_kv) / tp
    return (2 * m.d_qk + m.d_attn) / tp + m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim


def _attention_saved(m: ModelSpec, d: _Saved) -> Any:
    """Bytes attention saves besides its scores: norm input (and output), Q, K, V, rotated Q and K,
    the output projection's input and the dropout mask."""
    e, sb, sbd, r, tp = d.e, d.sb, d.sbd, d.r, d.tp
    shared_norm = m.norms_per_layer == 1
    # rotary positions: attention saves the rotated Q and K, new tensors, while the fused QKV GEMM's
    # output stays alive because V is a view of it (Megatron-LM's and the probe model's fused QKV;
    # Su et al. 2021 rotation applied out of place). Korthikanti's inventory predates RoPE.
    rope = e * sb * (m.d_attn + m.d_kv) / tp if m.position == PositionType.ROTARY else 0.0
    return (
        (d.n_in + (0 if shared_norm else e)) * sbd * r  # norm input (+ norm output into QKV)
        + e * sb * qkv_width(m, tp)  # Q, K, V (MLA: and its latents)
        + rope  # rotated Q, K
        + e * sb * m.d_attn / tp  # output-projection input (= attention output O)
        + d.drop * sbd * r
    )  # attention-output dropout mask (1 byte)


def _scores_saved(m: ModelSpec, d: _Saved, flash: bool, probs_bytes: float | None) -> Any:
    """Bytes of attention's scores saved: the log-sum-exp with flash, else the softmax output (and
    dropout mask and output, or the fp32 probabilities and their e-byte copy)."""
    if flash:
        return 4.0 * d.sb * m.n_heads / d.tp  # log-sum-exp, fp32
    e, drop = d.e, d.drop
    p = e if probs_bytes is None else probs_bytes
    per_score = e + drop * (1 + e) if p <= e else p + drop + e
    return per_score * m.n_heads * d.s * d.S * d.mb / d.tp


def _mlp_saved(m: ModelSpec, d: _Saved, moe_layer: bool, compiled: bool) -> Any:
    """Bytes the MLP (or MoE) block saves: its norm input and output, the hidden tensors, the
    router's and the dropout mask."""
    e, sb, sbd, r, tp = d.e, d.sb, d.sbd, d.r, d.tp
    if m.norms_per_layer == 1:
        mlp_in = e * sbd * r * 0  # the shared norm output is already counted
    elif m.parallel_block:
        mlp_in = e * sbd * r  # second norm's output (its input is the layer input, counted)
    else:
        mlp_in = (d.n_in + e) * sbd * r  # norm input + MLP input
    # hidden tensors saved per token: GELU/ReLU 2 (pre- and post-activation, Korthikanti §4.1); gated 4
    # in eager PyTorch — the gate, up, act(gate) and their product (torchtitan's FeedForward,
    # w2(silu(w1 x) · w3 x): SiLU saves its input, the product saves both factors, w2 saves the
    # product). A fused SwiGLU kernel that recomputes act(gate) (Megatron-LM's bias_swiglu) saves 3.
    # Unsloth's fused LoRA MLP saves 2 (unsloth/kernels/fast_lora.py@e3162dc5: save_for_backward(..., X, e,
    # g)), yet is counted 4 here: the recomputed layer's backward working tensors (its f-wide DW, FlashAttention's
    # fp32 dQ accumulator) are counted for no trainer, and with 2 (or 3) its validate rows' median error
    # goes from 7.0% to 22.3% (14.6%), the whole fine-tune median from 8.6% to 10.5% (10.1%).
    k_f = (COMPILED_GATED_HIDDEN if compiled else 4) if m.ffn_matrices == 3 else 2
    if moe_layer:
        routed = m.top_k * (e * sbd / tp + k_f * e * sb * m.expert_ffn / tp)
        shared = m.n_shared_experts * k_f * e * sb * m.expert_ffn / tp
        return mlp_in + routed + shared + 4.0 * sb * m.n_experts + d.drop * sbd * r
    return mlp_in + k_f * e * sb * m.ffn_dim / tp + d.drop * sbd * r


def _op_saved(m: ModelSpec, d: _Saved, flash: bool, moe_layer: bool) -> Any:
    """Bytes kept under op-level recompute (torchtitan's selective_ac_option = "op"): the layer
    input, the outputs of the odd matmuls in call order — Q (1st), V (3rd), the MLP's first (5th:
    gate, or up when not gated) and, gated, the down projection (7th) — and attention's output with
    its log-sum-exp (flash); the rest is recomputed
    (trilemma.estimate.flops.op_recompute_matmul_flop_fwd)."""
    e, sb, sbd, r, tp = d.e, d.sb, d.sbd, d.r, d.tp
    f_op = m.expert_ffn * (m.top_k + m.n_shared_experts) if moe_layer else m.ffn_dim
    return (
        e * sbd * r
        + e * sb * (m.d_attn + m.d_kv) / tp
        + e * sb * m.d_attn / tp
        + (4.0 * sb * m.n_heads / tp if flash else 0.0)
        + e * sb * f_op / tp
        + (e * sbd * r if m.ffn_matrices == 3 else 0.0)
    )


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
    its matmul (bitsandbytes MatMul4Bit / MatMul8bitLt): the largest linear. A gptq4 base (AutoGPTQ's torch
    dequantisation) keeps the layer's 16-bit copies for its backward, and its unpacking an int32 and an int8
    copy of the largest linear."""
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
    largest = m.d_model * max(m.ffn_dim, m.d_attn) / L.tp
    if ft.base_precision == BasePrecision.GPTQ4:
        # AutoGPTQ's torch path: autograd's matmul saves each module's fp16 copy for the data gradient, so
        # under the recomputation the layer's whole 16-bit weights live until its backward, and the largest
        # module's unpacking holds its int32 shift and its int8 cast at once (GPTQ_TORCH_DEQUANT_BYTES)
        layer = DTYPE_BYTES[Dtype.BF16] * linear_params_per_layer(m) / L.tp
        transient = zero + layer + (DTYPE_BYTES[Dtype.FP32] + DTYPE_BYTES[Dtype.INT8]) * largest
    elif ft.base_precision is not None and ft.base_precision.quantised:
        transient = zero + DTYPE_BYTES[Dtype.BF16] * largest
    return zero + per - skip, transient


__all__ = [
    "COMPILED_GATED_HIDDEN",
    "activation_bytes_per_layer",
    "finetune_activation_bytes",
    "float8_cast_bytes",
]
