"""Fine-tuning's inventory: trainable parameters (exact, as Hugging Face PEFT counts them), bytes per
parameter of the frozen base in its storage, the adapters' and the optimizer's states, and what moves to
host memory under offload. Pure and numpy-broadcastable (a model may be a shape grid).

References:
- LoRA (Hu et al. 2021, arXiv 2106.09685 §4.1): a frozen W (d_in × d_out) gains B·A with A r × d_in and
  B d_out × r: r·(d_in + d_out) trainable parameters per adapted linear module, no bias (PEFT's
  ``LoraConfig(bias="none")``, its default). PEFT's ``target_modules="all-linear"`` adapts every linear
  layer but the output layer (peft/tuners/tuners_utils.py, ``_maybe_include_all_linear_layers``).
- PEFT keeps the adapters in fp32 when the base is bf16/fp16 (``get_peft_model(...,
  autocast_adapter_dtype=True)``, the default since PEFT 0.12): 4 bytes per adapter weight and gradient.
- NF4 (QLoRA, Dettmers et al. 2023, arXiv 2305.14314 §3): 4 bits per weight plus one fp32 absmax per
  block of 64 weights (32/64 = 0.5 bits); double quantisation stores those constants in 8 bits with one
  fp32 constant per 256 blocks: 8/64 + 32/(64·256) = 0.127 bits, 4.127 bits per weight in all.
  bitsandbytes quantises the linear layers only; embeddings, norms and the output layer stay 16-bit, as the
  QLoRA repository leaves them (qlora.py casts embed_tokens and lm_head back to bf16). PEFT's
  ``prepare_model_for_kbit_training`` (TRL's SFTTrainer on an unsharded 4-bit model) upcasts them to fp32
  instead: 2 more bytes per embedding and output-layer parameter, not counted here.
- LLM.int8 (Dettmers et al. 2022, arXiv 2208.07339 §3): int8 weights with one fp32 scale per output row.
- 8-bit optimizers (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", arXiv
  2110.02861 §2): each state in 8 bits with one fp32 absmax per block of 2048 values; bitsandbytes keeps
  tensors under 4,096 elements in 32 bits (``min_8bit_size``). Paged states (QLoRA §3) are the same bytes
  in unified memory, evicted to the host when the GPU runs short.
- ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840 §4.1, Fig. 2): fp16 weights on the GPU; fp16 gradients
  moved to the host, where the fp32 master weights and Adam's two moments live and CPU Adam updates them:
  2 + 4 + 4 + 4 = 14 host bytes per parameter. ZeRO-Infinity (Rajbhandari et al. 2021, arXiv 2104.07857)
  also keeps the 16-bit weights on the host and streams each layer in before its use (+2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.estimate.params import ParamCounts
from trilemma.specs import TrainingPlan
from trilemma.specs.enums import BasePrecision, FinetuneMethod, Offload, Optimizer, Task
from trilemma.specs.finetune import FinetuneSpec

#: why a fine-tune's estimate prints no loss
CLASSIFIER_NO_LOSS = (
    "quality: no loss for a classifier — the scaling laws give a causal language model's "
    "next-token loss; a classification head's loss depends on its labels and classes (no published "
    "law for it applies here)"
)
FINETUNE_NO_LOSS = (
    "quality: no loss for a fine-tune — the scaling laws give the loss of a model trained from "
    "scratch on the plan's tokens; a fine-tune's quality is bounded by its base model and depends on "
    "the task data (no published law for it applies here)"
)

#: NF4 block size and double quantisation's second-level block (QLoRA §3)
NF4_BLOCK = 64
NF4_DQ_BLOCK = 256
#: GPTQ's group: AutoGPTQ's QuantLinear keeps per group of input rows and output column an fp16 scale and a
#: 4-bit zero packed 8 to an int32 (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py@7c691ed, 2024-02-13:
#: qweight (K/8, N) int32, qzeros (K/group, N/8) int32, scales (K/group, N) fp16); 128 in Qwen's Int4 models
GPTQ_GROUP = 128
#: bytes per weight AutoGPTQ's torch dequantisation moves (the path it takes for inputs of ≥ 128 rows,
#: kernel_switch_threshold, and the one transformers' GPTQConfig(disable_exllama=True) keeps; same file, forward):
#: bitwise_right_shift of the packed int32 (read 0.5, write 4), .to(int8) (4, 1), bitwise_and (1, 1),
#: weight − zeros (1, 1), scales × (…) to fp16 (1, 2): 16.5; the GEMM's own read of the fp16 copy is gemm_s's
GPTQ_TORCH_DEQUANT_BYTES = 0.5 + 4 + 4 + 1 + 1 + 1 + 1 + 1 + 1 + 2
#: launches of that dequantisation per linear module (shift, cast, and, subtract, multiply)
GPTQ_TORCH_DEQUANT_KERNELS = 5
#: 8-bit optimizer block (Dettmers et al. 2022 §2) and bitsandbytes' min_8bit_size
OPT8_BLOCK = 2048
OPT8_MIN_SIZE = 4096
#: bytes per parameter of ZeRO-Offload's host copy: fp16 gradient + fp32 master, momentum, variance (Fig. 2)
OFFLOAD_HOST_BYTES = 2 + 4 + 4 + 4
#: + the fp16 weights themselves under ZeRO-Infinity parameter offload
OFFLOAD_PARAM_BYTES = 2
ADAPTER_BYTES = 4.0  # fp32 adapters (PEFT autocast_adapter_dtype)


def nf4_bits_per_weight(double_quant: bool = True) -> float:
    """Bits per NF4 weight with its block constants: 4 + 32/64 = 4.5, or 4 + 8/64 + 32/(64·256) = 4.127
    with double quantisation (QLoRA §3)."""
    if double_quant:
        return 4.0 + 8.0 / NF4_BLOCK + 32.0 / (NF4_BLOCK * NF4_DQ_BLOCK)
    return 4.0 + 32.0 / NF4_BLOCK


def gptq4_bits_per_weight(group: int = GPTQ_GROUP) -> float:
    """Bits per GPTQ 4-bit weight with its group's fp16 scale and packed 4-bit zero: 4 + 16/128 + 4/128 =
    4.156 (GPTQ_GROUP's layout)."""
    return 4.0 + (16.0 + 4.0) / group


def base_linear_bytes(
    base: BasePrecision, d_in: Any, double_quant: bool = True, half_bytes: float = 2.0
) -> Any:
    """Bytes per frozen linear weight of the base: bf16/fp16 ``half_bytes`` (2; the plan's frozen_weight
    storage, 4 for a probe's fp32 run), int8 1 + 4/d_in (an fp32 scale per output row of d_in weights), nf4
    nf4_bits_per_weight / 8, gptq4 gptq4_bits_per_weight / 8."""
    if base == BasePrecision.NF4:
        return nf4_bits_per_weight(double_quant) / 8.0
    if base == BasePrecision.GPTQ4:
        return gptq4_bits_per_weight() / 8.0
    if base == BasePrecision.INT8:
        return 1.0 + 4.0 / np.asarray(d_in, dtype=float)
    return half_bytes


def module_shapes(m: Any) -> dict[str, tuple[Any, Any]]:
    """(d_in, d_out) of each linear module of one dense layer, by its Hugging Face name."""
    d, f = m.d_model, m.ffn_dim
    out = {
        "q_proj": (d, m.d_attn),
        "k_proj": (d, m.d_kv),
        "v_proj": (d, m.d_kv),
        "o_proj": (m.d_attn, d),
        "up_proj": (d, f),
        "down_proj": (f, d),
    }
    if m.ffn_matrices == 3:
        out["gate_proj"] = (d, f)
    return out


def lora_params_per_layer(m: Any, ft: FinetuneSpec) -> Any:
    """Adapter parameters of one layer: Σ over targeted modules of r·(d_in + d_out) (LoRA §4.1). A
    mixture-of-experts layer adapts each expert's MLP modules (routed + shared)."""
    shapes = module_shapes(m)
    r = ft.lora_rank
    attn = sum(
        r * (a + b)
        for k, (a, b) in shapes.items()
        if k in ft.targets and k.startswith(("q", "k", "v", "o"))
    )
    mlp = sum(
        r * (a + b)
        for k, (a, b) in shapes.items()
        if k in ft.targets and not k.startswith(("q", "k", "v", "o"))
    )
    if getattr(m, "is_moe", False) and m.n_moe_layers:
        e_shapes = {k: (a, b) for k, (a, b) in module_shapes(_expert_view(m)).items()}
        mlp_e = sum(
            r * (a + b)
            for k, (a, b) in e_shapes.items()
            if k in ft.targets and k not in ("q_proj", "k_proj", "v_proj", "o_proj")
        )
        moe_mlp = mlp_e * (m.n_experts + m.n_shared_experts)
        return attn + (m.n_dense_layers * mlp + m.n_moe_layers * moe_mlp) / m.n_layers
    return attn + mlp


class _expert_view:  # noqa: N801  (a ModelSpec's view with the expert MLP width)
    def __init__(self, m: Any) -> None:
        self._m = m

    def __getattr__(self, k: str) -> Any:
        return self._m.expert_ffn if k == "ffn_dim" else getattr(self._m, k)


def trainable_params(m: Any, pc: ParamCounts, ft: FinetuneSpec | None) -> Any:
    """Parameters that train: every one (full, or no fine-tune); the last N layers (freeze); the adapters
    (LoRA, QLoRA) — equal to PEFT's ``get_nb_trainable_parameters()[0]`` for the same targets and rank."""
    if ft is None or ft.method == FinetuneMethod.FULL:
        return pc.total
    if ft.method == FinetuneMethod.FREEZE:
        return ft.trainable_layers * layer_params(m, pc)
    return m.n_layers * lora_params_per_layer(m, ft)


def layer_params(m: Any, pc: ParamCounts) -> Any:
    """Parameters of an average layer (dense and MoE layers weighted by their counts)."""
    return (
        m.n_dense_layers * pc.per_dense_layer
        + m.n_moe_layers * (pc.per_moe_layer_shared + m.n_experts * pc.per_expert)
    ) / m.n_layers


def linear_params_per_layer(m: Any) -> Any:
    """Weights of an average layer's linear modules (what bitsandbytes quantises; the router included)."""
    attn = 2 * m.d_model * m.d_attn + 2 * m.d_model * m.d_kv
    dense = m.ffn_matrices * m.d_model * m.ffn_dim
    if getattr(m, "is_moe", False) and m.n_moe_layers:
        moe = (
            m.ffn_matrices * m.d_model * m.expert_ffn * (m.n_experts + m.n_shared_experts)
            + m.d_model * m.n_experts
        )
        return attn + (m.n_dense_layers * dense + m.n_moe_layers * moe) / m.n_layers
    return attn + dense


def optimizer_state_bytes(
    opt: Optimizer, state_bytes: float = 4.0, rows: Any = None, cols: Any = None, numel: Any = None
) -> Any:
    """Optimizer state per trainable parameter, bytes, the master copy excluded:
    AdamW 2 moments, SGD (momentum) and LION 1 (Chen et al. 2023, arXiv 2302.06675 Alg. 2), each
    ``state_bytes``; 8-bit AdamW (plain or paged) 2 × (1 + 4/2048) for tensors of at least 4,096 elements
    (``numel``), else fp32 (Dettmers et al. 2022 §2); Adafactor the factored second moment only (HF
    Adafactor's default beta1=None): rows + cols fp32 values per rows × cols matrix (Shazeer & Stern 2018,
    arXiv 1804.04235 §3)."""
    if opt in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        eight = 2.0 * (1.0 + 4.0 / OPT8_BLOCK)
        if numel is None:
            return eight
        return np.where(np.asarray(numel) >= OPT8_MIN_SIZE, eight, 2.0 * 4.0)
    if opt == Optimizer.ADAFACTOR:
        r = np.asarray(rows, dtype=float)
        c = np.asarray(cols, dtype=float)
        return 4.0 * (1.0 / r + 1.0 / c)
    if opt == Optimizer.ADAMW:
        return 2.0 * state_bytes
    return 1.0 * state_bytes  # sgd, lion


@dataclass(frozen=True)
class StateBytes:
    """Bytes per base parameter on the device, by group — ``layer`` (the transformer blocks: quantisable
    linears, adapters) and ``ends`` (embeddings, final norm, output layer) — and per base parameter on the
    host (offload)."""

    layer_weight: Any
    layer_grad: Any
    layer_optim: Any
    ends_weight: float
    ends_grad: float
    ends_optim: float
    host: Any  # bytes per base parameter held in host memory (offload), layers and ends alike
    streamed: bool  # weights live on the host and stream in (offload optimizer+params)


def state_bytes(m: Any, pc: ParamCounts, plan: TrainingPlan) -> StateBytes:
    """The model states of ``plan`` per base parameter (module docstring). Pre-training and full fine-tunes:
    ZeRO's 16-bit weight + gradient + master and moments (Rajbhandari et al. 2020 §3); freeze: those on the
    trainable layers' share, 16-bit weights elsewhere; LoRA/QLoRA: the base in its storage, fp32 adapters
    with fp32 gradients and optimizer state (no master copy: the adapters are fp32 already)."""
    d = plan.dtypes
    ft = plan.finetune
    opt = plan.optimizer
    w_b, g_b, fz_b = d.bytes_of("weight"), d.bytes_of("grad"), d.bytes_of("frozen_weight")
    dm = m.d_model
    full_o = d.bytes_of("master") + optimizer_state_bytes(
        opt, d.bytes_of("optimizer_state"), dm, dm, dm * dm
    )
    off = plan.offload
    if ft is None or ft.method in (FinetuneMethod.FULL, FinetuneMethod.FREEZE):
        if ft is None:
            t_layer = t_ends = plan.trainable_fraction
        else:
            t_ends = 1.0 if ft.method == FinetuneMethod.FULL else 0.0
            t_layer = 1.0 if ft.method == FinetuneMethod.FULL else ft.trainable_layers / m.n_layers
        lw = t_layer * w_b + (1 - t_layer) * fz_b
        ew = t_ends * w_b + (1 - t_ends) * fz_b
        lg, eg, lo, eo = t_layer * g_b, t_ends * g_b, t_layer * full_o, t_ends * full_o
        share = t_layer  # trainable share of the parameters (the ends are a small remainder)
    else:
        per_layer = layer_params(m, pc)
        a = lora_params_per_layer(m, ft) / per_layer  # adapter parameters per base parameter
        lin = linear_params_per_layer(m) / per_layer  # linear weights per base parameter of a layer
        base = (
            lin * base_linear_bytes(ft.base_precision, dm, ft.double_quant, fz_b) + (1 - lin) * fz_b
        )
        r = ft.lora_rank
        # an adapter matrix is r × d (A) or d × r (B): Adafactor factors it; 8-bit states when ≥ 4,096 elements
        lo = a * optimizer_state_bytes(opt, 4.0, r, dm, r * dm)
        lw, lg = base + a * ADAPTER_BYTES, a * ADAPTER_BYTES
        ew, eg, eo = fz_b, 0.0, 0.0
        share = a
    host = 0.0
    if off != Offload.NONE:
        host = share * OFFLOAD_HOST_BYTES + (
            OFFLOAD_PARAM_BYTES if off == Offload.OPTIMIZER_PARAMS else 0.0
        )
        lg, eg, lo, eo = (
            0.0 * lg,
            0.0,
            0.0 * lo,
            0.0,
        )  # gradients stream out per bucket; states on the host
    return StateBytes(
        layer_weight=lw,
        layer_grad=lg,
        layer_optim=lo,
        ends_weight=ew,
        ends_grad=eg,
        ends_optim=eo,
        host=host,
        streamed=off == Offload.OPTIMIZER_PARAMS,
    )


def checkpoint_bytes(m: Any, pc: ParamCounts, plan: TrainingPlan) -> Any:
    """Bytes a checkpoint of the job saves: the trainable weights and their optimizer state (the frozen base
    is reloaded from the released model, not saved). Pre-training: TrainingPlan.checkpoint_bytes_per_param
    × all parameters."""
    ft = plan.finetune
    if ft is None or ft.method == FinetuneMethod.FULL:
        return np.asarray(pc.total, dtype=float) * plan.checkpoint_bytes_per_param
    n = trainable_params(m, pc, ft)
    if ft.method == FinetuneMethod.FREEZE:
        d = plan.dtypes
        return n * (
            d.bytes_of("weight")
            + d.bytes_of("master")
            + optimizer_state_bytes(plan.optimizer, 4.0, m.d_model, m.d_model, m.d_model**2)
        )
    return n * (ADAPTER_BYTES + optimizer_state_bytes(plan.optimizer, 4.0, ft.lora_rank, m.d_model))


__all__ = [
    "FINETUNE_NO_LOSS",
    "StateBytes",
    "adapter_flop_per_token",
    "backward_shares",
    "base_linear_bytes",
    "checkpoint_bytes",
    "linear_params_per_layer",
    "lora_params_per_layer",
    "module_shapes",
    "nf4_bits_per_weight",
    "optimizer_state_bytes",
    "state_bytes",
    "trainable_params",
]


def backward_shares(m: Any, plan: TrainingPlan) -> tuple[float, float, int]:
    """(share of layers whose backward runs, share whose weight gradients are computed, LM-head GEMMs).

    A linear layer's backward is two GEMMs of its forward's size: the data gradient dX = dY·Wᵀ and the weight
    gradient dW = Xᵀ·dY (Kaplan et al. 2020 §2.1: the backward pass is about twice the forward; Narayanan et al.
    2021 eq. (3) counts it so). A frozen weight needs no dW (LoRA, Hu et al. 2021 §4.2: no gradients for most parameters, a
    25% speed-up on GPT-3 175B), and a layer below every trainable one needs no backward at all (freeze:
    autograd stops at the lowest layer that requires a gradient). Pre-training and full: (1, 1, 3); LoRA and
    QLoRA: (1, 0, 2) — every layer carries adapters, so the data gradient runs down to the first; freeze
    with N of L layers: (N/L, N/L, 2). The LM head is frozen in every fine-tune but full: logits and their
    data gradient, 2 GEMMs. A classifier (plan.task classification) has no LM head: 0 (its d × classes
    matmul on one pooled token per sequence is negligible)."""
    ft = plan.finetune
    head = 3 if ft is None or ft.method == FinetuneMethod.FULL else 2
    head = 0 if plan.task == Task.CLASSIFICATION else head
    if ft is None or ft.method == FinetuneMethod.FULL:
        return 1.0, 1.0, head
    if ft.method == FinetuneMethod.FREEZE:
        t = ft.trainable_layers / m.n_layers
        return t, t, head
    return 1.0, 0.0, head


def adapter_flop_per_token(m: Any, ft: FinetuneSpec | None) -> Any:
    """Training FLOPs per token of the LoRA adapters, all layers: 2 per multiply-accumulate forward
    (x·Aᵀ then ·Bᵀ: r·(d_in + d_out) MACs per module), twice that backward (data and weight gradients of A
    and B): 6 × adapter parameters, the 6N rule applied to them (Kaplan et al. 2020 §2.1)."""
    if ft is None or not ft.adapters:
        return 0.0
    return 6.0 * m.n_layers * lora_params_per_layer(m, ft)
