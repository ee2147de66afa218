"""Compute per layer and the LM head: one micro-batch on one device, seconds by operation class.

- Backward costs 2× forward for the GEMMs (dgrad + wgrad); a fine-tune's backward runs where
  finetune.backward_shares says.
- Attention core at a FlashAttention efficiency (FlashAttention-2's; the first tiled kernels at their
  measured rate relative to it); a causal mask lets FlashAttention skip half the
  score blocks (Dao 2023 §3.1); its backward 2.5× the forward (FlashAttention-2: 5 matmuls vs 2).
- Recomputation is counted in its class: full re-runs the layer's forward, selective the attention
  core, op-level (torchtitan) every other matmul and the elementwise ops (Korthikanti et al. 2022
  §4-5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.estimate.finetune import backward_shares
from trilemma.estimate.flops import matmul_flop_fwd, op_recompute_matmul_flop_fwd
from trilemma.estimate.host import async_tp_ops, host_ops_per_layer, unfused_extra
from trilemma.estimate.layer_ops import (
    attention_kernels,
    elementwise_bytes,
    finetune_layer_s,
    kernels_per_layer,
    unfused_attention_s,
)
from trilemma.estimate.roofline import balance_factor
from trilemma.estimate.step_context import StepContext
from trilemma.specs import Recompute
from trilemma.specs.stack import AttentionKernel


@dataclass(frozen=True)
class LayerTimes:
    """One layer, one micro-batch, one device: seconds (arrays over the layout rows)."""

    qkv: np.ndarray  # forward GEMMs: the QKV projection
    out: np.ndarray  # … the attention output projection
    up: np.ndarray  # … the MLP's input projections (gate and up)
    mlp_fwd: np.ndarray  # … the whole MLP (dense or MoE, by the layers' shares)
    attn_fwd: np.ndarray  # the attention core, forward
    attn_bwd: np.ndarray  # … backward
    layer_fwd: np.ndarray  # the whole layer, forward
    layer_bwd: np.ndarray  # … backward
    b_share: np.ndarray  # share of layers that run a backward (finetune.backward_shares)
    w_share: np.ndarray  # share of layers that compute weight gradients
    head_gemms: np.ndarray  # the LM head's GEMMs (0 for a classifier)
    per_class: dict[str, np.ndarray]  # forward + backward + recomputation by operation class
    host: np.ndarray  # the host's issue time of the layer's operators, recomputation included


def forward_gemms(ctx: StepContext) -> tuple:
    """(QKV, output, relative-position, MLP, MLP input projections) forward GEMM seconds of one
    layer: Megatron-LM's column- and row-parallel split over tp (Shoeybi et al. 2019 §3); a MoE
    layer runs its local experts on top_k·ep/n_experts of the tokens each, plus the router."""
    m, tp, T, d = ctx.m, ctx.L.tp, ctx.T, ctx.m.d_model
    qkv = mla_gemms(ctx) if m.is_mla else ctx.gemm(T, (m.d_attn + 2 * m.d_kv) / tp, d)
    out = ctx.gemm(T, d, m.d_attn / tp)
    rel = ctx.gemm(T, m.d_attn / tp, d) if m.position.value == "relative" else 0.0
    k_up = m.ffn_matrices - 1

    def mlp(tokens, f):
        return k_up * ctx.gemm(tokens, f / tp, d) + ctx.gemm(tokens, d, f / tp)

    dense_mlp = mlp(T, m.ffn_dim)
    if m.is_moe:
        ep = ctx.L.ep
        local_experts = m.n_experts / ep
        tok_per_expert = T * m.top_k * ep / m.n_experts
        moe_mlp = (
            local_experts * mlp(tok_per_expert, m.expert_ffn)
            + m.n_shared_experts * mlp(T, m.expert_ffn)
            + ctx.gemm(T, m.n_experts, d)
        )
    else:
        moe_mlp = dense_mlp
    fd, fm = m.n_dense_layers / m.n_layers, m.n_moe_layers / m.n_layers
    mlp_fwd = fd * dense_mlp + fm * moe_mlp  # one forward of a layer's MLP matmuls (dense or MoE)
    up = k_up / (k_up + 1) * mlp_fwd  # the MLP's input projections (gate and up); down is the rest
    return qkv, out, rel, mlp_fwd, up


def mla_gemms(ctx: StepContext) -> np.ndarray | float:
    """Forward seconds of MLA's projections but the output's (trilemma.estimate.params.mla_matmul_params):
    the latent down-projections whole on every TP rank, the up-projections split by heads over tp."""
    m, tp, T, d = ctx.m, ctx.L.tp, ctx.T, ctx.m.d_model
    q = m.q_lora_rank
    query = ctx.gemm(T, q, d) + ctx.gemm(T, m.d_qk / tp, q) if q else ctx.gemm(T, m.d_qk / tp, d)
    latent = ctx.gemm(T, m.kv_lora_rank + m.qk_rope_head_dim, d)
    return query + latent + ctx.gemm(T, 2 * m.d_attn / tp, m.kv_lora_rank)


def flash_kernel_rate(kernel: AttentionKernel, c: dict) -> float:
    """A tiled attention kernel's rate relative to FlashAttention-2's, whose the fitted
    ``efficiency.attention`` is: FlashAttention 1.x and xformers' kernel (``flash1``) at
    ``efficiency.flash1_rate`` (constants.toml, from Dao 2023's benchmark), any other 1 (a stack
    that does not run a tiled kernel but a plan that asks for one: FlashAttention-2's)."""
    return float(c["flash1_rate"]) if kernel == AttentionKernel.FLASH1 else 1.0


#: FlashAttention's backward over its forward (FlashAttention-2: 5 matmuls against 2, Dao 2023 §3.1)
FLASH_BACKWARD_RATIO = 2.5


def attention_core_flop(tokens: Any, context: Any, width: Any, tp: Any, causal: bool) -> Any:
    """FLOPs of the attention core's forward: Q·Kᵀ and P·V, 2 × 2·tokens·context·width over ``tp``
    ranks, half of it under a causal mask where a tiled kernel skips the masked blocks."""
    return 4.0 * tokens * context * width / tp * (0.5 if causal else 1.0)


def attention_core_s(ctx: StepContext) -> tuple:
    """(forward, backward) seconds of one layer's attention core. FlashAttention at its own balance
    power: FA2 reaches 50-73% of A100's peak forward (Dao 2023, arXiv 2307.08691 §4.1) but 35% of
    H100's (Shah et al. 2024, arXiv 2407.08608); unfused: layer_ops.unfused_attention_s."""
    m, plan, c, L, seq = ctx.m, ctx.plan, ctx.c, ctx.L, ctx.seq
    attn_flop = attention_core_flop(
        ctx.T, seq, m.attn_core_width, L.tp, m.causal and plan.flash_attention
    )
    attn_width = 1.0 if ctx.attn_bf16 else c["operand_width"]
    if plan.flash_attention:
        eff = flash_kernel_rate(ctx.stack.attention, c) * (
            # a CPU profile's own kernel, measured by head dimension (probe.attention_rate)
            c["attention_max"] * m.d_head / (m.d_head + c["attention_half_dim"])
            if "attention_half_dim" in c
            else c["attention"]
            * balance_factor(
                ctx.attn_peak, c["balance_bw"], c, attn_width, "attention_balance_exponent"
            )
        )
        attn_fwd = attn_flop / (ctx.attn_peak * min(1.0, eff))  # ≤ peak
    else:
        attn_fwd = unfused_attention_s(
            m,
            plan,
            L.micro_batch / L.tp,
            seq / L.cp,
            seq,
            ctx.attn_peak,
            ctx.bw,
            ctx.e,
            {**c, "operand_width": attn_width},
        )
    return attn_fwd, attn_fwd * (FLASH_BACKWARD_RATIO if plan.flash_attention else 2.0)


def layer_times(ctx: StepContext) -> LayerTimes:
    """One layer's forward and backward, with a fine-tune's shares, adapters and dequantisation
    (finetune.backward_shares, layer_ops.finetune_layer_s), and its recomputation by class."""
    m, plan, L = ctx.m, ctx.plan, ctx.L
    qkv, out, rel, mlp_fwd, up = forward_gemms(ctx)
    attn_fwd, attn_bwd = attention_core_s(ctx)
    ew_f, ew_b = elementwise_bytes(m, ctx.seq, L, ctx.e)
    x_kf, x_kb, x_bf, x_bb = unfused_extra(m, ctx.stack, ctx.host, ctx.T, L.tp, ctx.e)
    elem_fwd, elem_bwd = ctx.hbm_s(ew_f + x_bf), ctx.hbm_s(ew_b + x_bb)
    k_f, k_b = kernels_per_layer(m, plan.flash_attention, plan.softmax_passes)
    k_f, k_b = k_f + x_kf, k_b + x_kb
    kern_fwd, kern_bwd = k_f * ctx.kernel_s, k_b * ctx.kernel_s
    b_share, w_share, head_gemms = backward_shares(m, plan)
    ad_f, ad_b, dq_pass, ad_kern_f, ad_kern_b = finetune_layer_s(
        m, plan, ctx.T, L.tp, ctx.peak, ctx.bw, ctx.e, ctx.c
    )
    gemm_fwd = qkv + out + rel + mlp_fwd + ad_f
    attn_bwd = b_share * attn_bwd
    elem_bwd = b_share * elem_bwd
    kern_fwd, kern_bwd = kern_fwd + ad_kern_f, b_share * kern_bwd + ad_kern_b
    gemm_bwd = (b_share + w_share) * (
        gemm_fwd - ad_f
    ) + ad_b  # ad_b: bitsandbytes' dequantisation too
    fwd = {"gemm": gemm_fwd, "attention": attn_fwd, "elementwise": elem_fwd}
    bwd = {"gemm": gemm_bwd, "attention": attn_bwd, "elementwise": elem_bwd}
    kernels = (kern_fwd, kern_bwd, k_f, b_share * k_b)
    per_class, n_kernels = with_recompute(ctx, fwd, bwd, dq_pass, kernels)
    h_f, h_b = host_ops_per_layer(k_f, k_b, ctx.host, L.tp)
    # the host issues every kernel the device runs, plus its views and collectives (host.py);
    # backward's through the autograd engine, at its own cost where the profile measured one
    bwd_ops = b_share * h_b
    fwd_ops = n_kernels - b_share * k_b + (h_f - k_f) * (1 + L.recomputes(Recompute.FULL))
    # a stack's asynchronous TP written as Python autograd Functions: its operators, either pass
    py_ops = async_tp_ops(ctx.stack, plan.async_tp & L.dims.sp_on, L.tp)
    return LayerTimes(
        qkv=qkv,
        out=out,
        up=up,
        mlp_fwd=mlp_fwd,
        attn_fwd=attn_fwd,
        attn_bwd=attn_bwd,
        layer_fwd=gemm_fwd + attn_fwd + elem_fwd + kern_fwd + dq_pass,
        layer_bwd=gemm_bwd + attn_bwd + elem_bwd + kern_bwd,
        b_share=b_share,
        w_share=w_share,
        head_gemms=head_gemms,
        per_class=per_class,
        host=(fwd_ops + py_ops) * ctx.host_op_s + bwd_ops * ctx.host_bwd_op_s,
    )


def with_recompute(
    ctx: StepContext, fwd: dict, bwd: dict, dq_pass, kernels: tuple
) -> tuple[dict, np.ndarray]:
    """Seconds by operation class, forward + backward + what recomputation runs again: full the
    layer's forward, selective the attention core, op-level the even matmuls (their share of the
    matmul FLOPs, flops.op_recompute_matmul_flop_fwd) and every elementwise op, with launches; and
    the kernels launched, recomputation included."""
    m, L = ctx.m, ctx.L
    kern_fwd, kern_bwd, k_f, k_b_run = kernels
    full_rc, sel_rc, op_rc = (
        L.recomputes(r) for r in (Recompute.FULL, Recompute.SELECTIVE, Recompute.OP)
    )
    op_share = op_recompute_matmul_flop_fwd(m) / np.maximum(
        matmul_flop_fwd(m, ctx.pc) - 2.0 * m.vocab_size * m.d_model, 1.0
    )
    attn_k = attention_kernels(ctx.plan.flash_attention, ctx.plan.softmax_passes)[0]
    relative = 1 if m.position.value == "relative" else 0
    op_k = k_f - attn_k - 0.5 * (4 + relative)
    op_kern = op_k * ctx.kernel_s
    n_kernels = (
        k_f + k_b_run + np.where(full_rc, k_f, np.where(sel_rc, attn_k, np.where(op_rc, op_k, 0.0)))
    )
    gemm_fwd, attn_fwd, elem_fwd = fwd["gemm"], fwd["attention"], fwd["elementwise"]
    per_class = {
        "gemm": gemm_fwd
        + bwd["gemm"]
        + dq_pass
        + np.where(full_rc, gemm_fwd + dq_pass, np.where(op_rc, op_share * gemm_fwd, 0.0)),
        "attention": attn_fwd + bwd["attention"] + np.where(full_rc | sel_rc, attn_fwd, 0.0),
        "elementwise": elem_fwd + bwd["elementwise"] + np.where(full_rc | op_rc, elem_fwd, 0.0),
        "kernel_launch": kern_fwd
        + kern_bwd
        + np.where(
            full_rc, kern_fwd, np.where(sel_rc, kern_fwd / k_f, np.where(op_rc, op_kern, 0.0))
        ),
    }
    return per_class, n_kernels


def lm_head_s(ctx: StepContext, head_gemms) -> np.ndarray:
    """The LM head and loss on the last stage, one micro-batch: 3 GEMMs (logits, their data and
    weight gradients), fp32 logits read and written by the cross-entropy and its gradient, 5
    kernels; none for a classifier (``head_gemms`` 0)."""
    m, T, tp = ctx.m, ctx.T, ctx.L.tp
    return head_gemms * ctx.gemm(T, m.vocab_size / tp, m.d_model) + (head_gemms > 0) * (
        ctx.hbm_s(3 * 4.0 * T * m.vocab_size / tp) + (head_gemms + 2) * ctx.kernel_s
    )


__all__ = ["LayerTimes", "attention_core_s", "forward_gemms", "layer_times", "lm_head_s"]
