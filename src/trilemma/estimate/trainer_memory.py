"""A fine-tuning trainer's memory terms (trilemma.specs.trainer.TrainerSpec): where the checkpointed layer
inputs live and how many bytes the loss keeps per logit. Used by trilemma.estimate.memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.estimate.layouts import LayoutArrays
from trilemma.specs import ModelSpec, Recompute, TrainingPlan
from trilemma.specs.trainer import LossKernel


def offloaded_layers(plan: TrainingPlan, L: LayoutArrays, layers: Any) -> Any:
    """Layers whose kept activations are on the device: all of them, or, under a trainer's activation
    offload (TrainerSpec.activation_offload) with full recomputation — whose kept activations are each
    layer's input — the ``offload_in_flight`` layers whose inputs are on their way to or from the host."""
    tr = plan.trainer
    if tr is None or not tr.activation_offload:
        return layers
    return np.where(L.recomputes(Recompute.FULL), np.minimum(layers, tr.offload_in_flight), layers)


def trainer_loss_bytes(
    m: ModelSpec, tokens: Any, tp: Any, plan: TrainingPlan, e: float, eager: Any
) -> Any:
    """The logits' bytes under the trainer's loss kernel (TrainerSpec.loss), per micro-batch of ``tokens``:
    ``eager`` as given; chunked over C chunks, each chunk's cross_entropy keeps its fp32 log-softmax output
    until the backward (4 bytes a logit, every chunk) and the backward's fp32 gradient and the cast's gradient
    (the eager 12's other 4 + 4) exist for one chunk at a time: 4 + 8/C; fused-linear (Liger's
    fused_linear_cross_entropy), a chunk of next_power_of_2(ceil(tokens / ceil(V / d))) tokens' logits in the
    activation dtype and the input's gradient, computed in the forward (tokens × d, activation dtype); cut (Cut
    Cross-Entropy, Wijmans et al. 2024, arXiv 2411.09009: "CCE reduces the memory footprint of the loss
    computation from 24 GB to 1 MB" on Gemma 2 2B, the log-sum-exp computed in on-chip memory), no logits: the
    input's gradient (tokens × d, activation dtype) and each token's fp32 log-sum-exp (4 bytes) — a frozen LM
    head has no gradient of its own. flash-attn's Triton cross_entropy_loss (flash_attn/ops/triton/
    cross_entropy.py@058ad35a: ``ctx.save_for_backward(logits, lse, labels)``; backward ``dlogits = logits if
    ctx.inplace_backward else torch.empty_like(logits)``) keeps its input logits and a fp32 log-sum-exp a token:
    flash-inplace (verl: activation-dtype logits, the gradient written into them), e a logit; flash-fp32
    (OpenRLHF: the logits upcast first), the saved fp32 copy and the backward's new fp32 gradient, 8 a logit
    (the upcast's own gradient comes after the node's saved copy is freed)."""
    tr = plan.trainer
    if tr is None or tr.loss == LossKernel.EAGER:
        return eager
    v = m.vocab_size / tp
    if tr.loss == LossKernel.CHUNKED:
        return tokens * v * (4.0 + 8.0 / tr.loss_chunks)
    t = np.asarray(tokens, dtype=float)
    if tr.loss == LossKernel.CUT:
        return e * t * m.d_model + 4.0 * t
    if tr.loss in (LossKernel.FLASH_INPLACE, LossKernel.FLASH_FP32):
        return t * v * (e if tr.loss == LossKernel.FLASH_INPLACE else 8.0) + 4.0 * t
    chunk = np.minimum(t, 2.0 ** np.ceil(np.log2(np.ceil(t / np.ceil(m.vocab_size / m.d_model)))))
    return e * (chunk * v + t * m.d_model)


__all__ = ["offloaded_layers", "trainer_loss_bytes"]
