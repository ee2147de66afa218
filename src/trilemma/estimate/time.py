"""Step time: per-GEMM roofline compute + exposed communication + pipeline bubble.

- Each major matmul costs max(FLOPs / (peak × eff(M, N, K)), bytes / HBM bandwidth), with an
  efficiency that falls for small or skinny shapes (Calculon, Isaev et al. SC'23 §4, models
  GEMM efficiency as a function of operation size). Backward costs 2× forward (dgrad + wgrad).
- Attention core at a FlashAttention efficiency; a causal mask lets FlashAttention skip half the
  score blocks (Dao 2023 §3.1), so executed FLOPs are halved for causal models with flash.
- Element-wise kernels are memory-bound: bytes moved / HBM bandwidth.
- Communication per collective by the hierarchical α–β model (comm.py): TP all-reduces (or SP
  reduce-scatter + all-gather, same volume) 2 forward + 2 backward per layer (Narayanan 2021
  §3.3 / Korthikanti 2022 §3); PP sends per micro-batch; DP gradient all-reduce or ZeRO
  reduce-scatter + all-gather once per step, ZeRO-3 gathers per micro-batch; MoE all-to-all
  2 forward + 2 backward per MoE layer; CP ring exchange of K and V.
- 1F1B pipeline: (m + (p − 1)/v) stage-times per step (Narayanan 2021 §2.2, interleaved /v).
- Data-parallel communication hidden behind compute still costs: NCCL's channels occupy streaming
  multiprocessors while the kernels run (collective_interference_s).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from trilemma.estimate.comm import (
    Fabric,
    all_gather_s,
    all_reduce_s,
    all_to_all_s,
    p2p_s,
    reduce_scatter_s,
)
from trilemma.estimate.finetune import (
    ADAPTER_BYTES,
    backward_shares,
    base_linear_bytes,
    linear_params_per_layer,
    module_shapes,
    state_bytes,
    trainable_params,
)
from trilemma.estimate.flops import matmul_flop_fwd, op_recompute_matmul_flop_fwd
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.memory import model_state_bytes
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.pipeline import last_stage_layers, stage_layers
from trilemma.specs import ClusterSpec, HardwareSpec, ModelSpec, Precision, Recompute, TrainingPlan
from trilemma.specs.enums import DTYPE_BYTES, BasePrecision, Offload
from trilemma.units import MEGA


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
    # kernels), kernel_launch (the fixed cost per launch), lm_head (logits GEMMs and cross-entropy)
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


def gemm_efficiency(
    M: np.ndarray, N: np.ndarray, K: np.ndarray, eff_max: float, half: float
) -> np.ndarray:
    """Achievable fraction of peak for an (M×K)·(K×N) matmul: eff_max · Π x/(x + half)."""
    return eff_max * (M / (M + half)) * (N / (N + half)) * (K / (K + half))


def balance_factor(
    peak: float, hbm_bw: float, c: dict, width: float = 1.0, exponent: str = "balance_exponent"
) -> float:
    """How much of the efficiency ceiling a chip keeps, from its balance of compute to memory
    bandwidth: (ref / (peak · width / bw))^γ. Chips (or precisions) whose peak outgrows their bandwidth
    are harder to keep fed — the "memory wall" (Gholami et al. 2024, IEEE Micro, arXiv 2403.14123); γ is
    fitted on the calibration data, ref is A100 bf16 (≈153 FLOP/B). ``exponent`` names γ's key: GEMMs take
    ``balance_exponent``, the attention core ``attention_balance_exponent`` (``step_time``: FlashAttention, a hand-written
    kernel whose port to a new chip lags cuBLAS's).

    ``width`` is the operands' bytes over bf16's 2, for operands wider than 16 bits (``device_constants``):
    a matmul on 4-byte operands moves twice the bytes per FLOP, so tf32 (half bf16's rate, twice its
    bytes) sits at bf16's balance. Checked on H100 SXM: XLA's measured matmul table runs f32 dots on the
    TF32 tensor cores at a median 0.94 of the fraction of peak bf16 reaches at the same shapes
    (tests/data/xla_h100_matmul.csv), where the peak alone gave TF32 1.9 times bf16's fraction. fp8 is not
    credited with its narrower operands: its measured best matmul sits below bf16's fraction, not above
    (H100 MAMF 70.9% against 80.3%), and crediting it took the throughput rows' leave-one-source-out median
    from 9.8% to 10.9% and whole runs' from 10.5% to 11.3%.

    At most 1: a bandwidth-rich chip or precision (A100 fp32: ~19 FLOP/B at 16-bit width) does not run its
    matmuls closer to peak than the fitted ceiling; without the cap the power law granted A100 fp32
    attention and GEMMs their whole peak and an MFU above 100%."""
    return float(min(1.0, (c["ref_flop_per_byte"] / (peak * width / hbm_bw)) ** c[exponent]))


def gemm_s(M, N, K, peak: float, hbm_bw: float, e: float, c: dict) -> np.ndarray:
    """Roofline time of one forward GEMM (seconds)."""
    flop = 2.0 * M * N * K
    # never above the device's measured best matmul (``mamf``: Maximum Achievable Matmul FLOPS, the best
    # shape of mamf-finder.py's search; 1 where none is measured): no GEMM of a training step beats the best
    # one found for the chip (A100: 86.9% of peak, where the fitted law would reach 88% at 32k-wide shapes;
    # MI300X: 51.1%, where it gives 62% at that search's best shape). Never above 1 either: the balance power
    # law would grant a bandwidth-rich chip (a CPU: ~6 FLOP/B against the calibration GPUs' 100-300) more.
    # the balance reads the device's own bandwidth unless it keeps another's matmul rates (HardwareSpec.balance_bw_bytes_per_s)
    eff = np.minimum(
        c.get("mamf", 1.0),
        gemm_efficiency(
            M,
            N,
            K,
            c["gemm_max"]
            * balance_factor(peak, c.get("balance_bw", hbm_bw), c, c.get("operand_width", 1.0)),
            c["gemm_half_dim"],
        ),
    )
    mem = e * (M * K + K * N + M * N) / (hbm_bw * c["hbm"])
    return np.maximum(flop / (peak * eff), mem)


def sixteen_bit(hw: HardwareSpec) -> Precision | None:
    """The chip's 16-bit matmul path, bf16 else fp16; None where it publishes neither."""
    return next((p for p in (Precision.BF16, Precision.FP16) if p in hw.peak_flop_per_s), None)


def math_rate_ratio(hw: HardwareSpec, precision: Precision) -> float:
    """How fast ``precision``'s matmul math runs against the chip's 16-bit path (bf16, else fp16):
    peak(precision) / peak(16-bit); 1 where the chip has no 16-bit peak. A100: fp32 1/16 (SIMT cores),
    tf32 1/2; H100: fp32 1/14.8, tf32 1/2, fp8 2."""
    ref = sixteen_bit(hw)
    return hw.peak(precision) / hw.peak_flop_per_s[ref] if ref is not None else 1.0


def operand_width(precision: Precision) -> float:
    """A matmul operand's bytes at ``precision`` over bf16's 2: fp32 and tf32 (stored as fp32) 2, fp8 1/2."""
    return DTYPE_BYTES[precision.value] / DTYPE_BYTES[Precision.BF16.value]


def device_constants(consts: dict, hw: HardwareSpec, precision: Precision) -> dict:
    """The efficiency and latency constants one device's step is timed with at ``precision``: the calibrated
    ones, a device's own measured ones (a ``trilemma probe`` profile) in their place, ``mamf``, the device's
    measured best matmul rate as a fraction of its peak (1 where none is measured), ``operand_width``,
    the width ``balance_factor`` weighs bandwidth by (the precision's ``operand_width`` where above 1, else 1),
    and ``balance_bw``, the bandwidth it reads (``HardwareSpec.balance_bw_bytes_per_s``, else the device's own).

    The GEMM half-dimension is fitted on 16-bit and fp8 rows. The shape penalty x/(x + half) is a fixed
    cost per output tile (the prologue that fills the pipeline, the epilogue that writes the tile, the last
    partial wave): moving the tile's operands and result, so paid in bytes, and weighed against the main
    loop's math. At another precision it therefore scales with math rate × operand bytes, against the
    16-bit path: ``math_rate_ratio`` × ``operand_width``. tf32 (half the rate, twice the bytes) and fp8
    (twice the rate, half the bytes) keep the fitted value; fp32 on the SIMT cores (A100: 1/16 of the rate,
    twice the bytes) takes 1/8 of it. Checked on both sides: the SGEMMs of a profiled fp32 training step run
    at 87-89% of A100's fp32 peak at 1024×1600×1600 and 1024×6400×1600 (github.com/yyin-dev/cs336-a2
    writeup.md, nsys kernel table: 310 µs and 1.211 ms), where the unscaled half-dimension gave 58% and 51%
    and whole fp32 steps came out 1.4-1.9× slow; and XLA's measured H100 table has TF32 at a median 0.94 of
    bf16's fraction of peak (tests/data/xla_h100_matmul.csv), where scaling by the rate alone gave TF32 a
    half-dimension half as large. A probe profile's half-dimension is measured at its own precision: not
    scaled; nor is a preset's ``measured_half_dim`` at its precision. The scaling does not carry to H100's
    fp32: cuBLAS's SGEMMs there run at 45.7 and 50.5 TFLOP/s at 4,096³ and 8,192³ (0.68 and 0.75 of peak;
    github.com/waynehacking8/blackwell-tensorcore-kernels results/bench_sm90a.csv), a half-dimension of 362
    at the law's ceiling where the scaling gives 51 — Hopper doubled the fp32 lanes per SM but not what
    feeds them."""
    mamf = hw.mamf_flop_per_s.get(precision)
    width = operand_width(precision)
    c = {
        **consts["efficiency"],
        **consts["latency"],
        **hw.efficiency,
        "mamf": mamf / hw.peak(precision) if mamf else 1.0,
        "operand_width": max(1.0, width),
        "balance_bw": hw.balance_bw_bytes_per_s or hw.hbm_bw_bytes_per_s,
    }
    if (
        precision in hw.measured_half_dim
    ):  # fitted to the device's own matmuls at this precision: not scaled
        c["gemm_half_dim"] = hw.measured_half_dim[precision]
    elif "gemm_half_dim" not in hw.efficiency and sixteen_bit(hw) is not None:
        c["gemm_half_dim"] = c["gemm_half_dim"] * math_rate_ratio(hw, precision) * width
    return c


def gemm_rate(hw: HardwareSpec, precision: Precision, M, N, K, consts: dict) -> np.ndarray:
    """FLOP/s the step model gives one forward (M×K)·(K×N) matmul on ``hw`` at ``precision`` (elementwise over
    array M, N, K), inputs and output in that precision's bytes: the GEMM term alone, to set against a
    measured matmul rate."""
    e = DTYPE_BYTES[precision.value]
    c = device_constants(consts, hw, precision)
    return 2.0 * M * N * K / gemm_s(M, N, K, hw.peak(precision), hw.hbm_bw_bytes_per_s, e, c)


def collective_interference_s(
    hidden_s: np.ndarray, channels: float, compute_units: int | None
) -> np.ndarray:
    """Compute time lost to collectives that run while it runs, seconds: an overlapped collective is not
    free. NCCL (and RCCL) run each channel as one thread block on a streaming multiprocessor (NCCL docs,
    Environment Variables: NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS, "each channel uses one CUDA block"),
    so while ``hidden_s`` seconds of communication hide behind compute, the kernels have
    compute_units − channels of the device's units: they run at 1 − f of their rate, f = channels /
    compute_units, and take hidden_s · f / (1 − f) longer (Rashidi et al., ISCA 2021, "Enabling
    Compute-Communication Overlap in Distributed Deep Learning Training Platforms": overlapped
    collectives slow the compute they overlap). The channel count is memory.nccl_channels (its buffers
    use the same count). A device whose collectives do not run on its compute cores (TPU: ICI DMA
    engines; a CPU) has ``compute_units`` None: no interference."""
    if not compute_units or channels <= 0:
        return np.zeros_like(np.asarray(hidden_s, dtype=float))
    f = min(channels / compute_units, 0.5)
    return np.asarray(hidden_s, dtype=float) * f / (1.0 - f)


def async_tp_s(one_s: np.ndarray, tp: np.ndarray, col: tuple, row: tuple) -> np.ndarray:
    """Exposed seconds of one layer's forward TP collectives under asynchronous tensor parallelism (with
    sequence parallelism), one micro-batch: the all-gather before each column-parallel matmul (``col``:
    QKV, MLP up; forward seconds) and the reduce-scatter after each row-parallel one (``row``: attention
    output, MLP down). ``one_s``: one all-gather (or reduce-scatter) of the layer's activations.

    Each collective is split by rank and micro-pipelined with its matmul (collective matmul decomposition:
    Wang et al., ASPLOS 2023, "Overlap Communication with Dependent Computation via Decomposition in Large
    Deep Learning Models"; PyTorch's symmetric-memory async TP, used by torchtitan: the inductor pass
    torch/_inductor/fx_passes/micro_pipeline_tp.py fuses all_gather → mm and mm → reduce_scatter into
    torch.distributed._symmetric_memory's ``_pipelined_all_gather_and_consume`` and
    ``_pipelined_produce_and_all2all``). Of tp chunks, tp − 1 transfers hide behind tp − 1 chunks of the
    matmul and one cannot: exposed max(one/tp, one − matmul·(tp − 1)/tp). The shards move as device-to-device
    copies on a side stream (``Tensor.copy_``: the copy engines), so they take no streaming multiprocessors
    from the matmul (no collective_interference_s); the reduce-scatter's local sum of tp partial chunks is a
    memory-bound kernel, counted by the caller.

    The forward's four only: the backward's and a recomputed forward's collectives are timed as without async
    TP. That is what the measurements show. torchtitan's own pair (benchmarks/llama3_h100_202412_torchtitan.md
    Table 4, Llama 3.1 70B, FSDP 32 × TP 8) gains 5.7% end to end (829 → 876 tokens/s per GPU). PyTorch's
    announcement (discuss.pytorch.org/t/209487) reports up to ~20% in the forward and ~8% end to end on Llama 3
    70B. Hiding the forward's four gives +5.3% on torchtitan's row (tests/test_async_tp.py); hiding every pair
    of the step (the backward's six and the recomputed forward's four too) gave about +14%."""
    return sum(np.maximum(one_s / tp, one_s - g * (tp - 1) / tp) for g in (*col, *row))


def elementwise_bytes(
    m: ModelSpec, seq: float, L: LayoutArrays, e: float
) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) bytes that one layer's memory-bound kernels move for one micro-batch.

    Each kernel reads its inputs and writes its outputs once from HBM (no fusion across kernels, as
    in eager PyTorch and Megatron's unfused paths; e = activation bytes, T = local tokens, T_r = T/tp
    under sequence parallelism):
      norm (RMSNorm/LayerNorm): forward reads x, writes y (2·e·T_r·d); backward reads x, dy, writes dx (3).
      residual add: reads two, writes one (3·e·T_r·d), forward and backward (the gradient add).
      activation: GELU/ReLU reads and writes T·f/tp (2; backward 3: x, dy → dx); gated (SwiGLU)
        reads gate and up, writes their product (3; backward 5: gate, up, dy → dgate, dup).
      rotary embedding: reads and writes Q and K (2·e·T·(d_attn + d_kv)/tp), forward and backward.
      dropout (when trained with it): reads x, writes y and a 1-byte mask; backward reads dy, mask.
      MoE: the dispatch and combine copies of top_k token vectors (2 × read + write), both ways.
    """
    tp, cp, mb = L.tp, L.cp, L.micro_batch
    T = mb * seq / cp
    r = L.sp_share
    td = e * T * m.d_model * r  # one residual-stream tensor
    norms = m.norms_per_layer
    fwd = norms * 2 * td + 2 * 3 * td
    bwd = norms * 3 * td + 2 * 3 * td
    f_loc = e * T * m.ffn_dim / tp
    gated = m.ffn_matrices == 3
    act_f, act_b = (3.0, 5.0) if gated else (2.0, 3.0)
    mlp_frac = m.n_dense_layers / m.n_layers
    fwd = fwd + mlp_frac * act_f * f_loc
    bwd = bwd + mlp_frac * act_b * f_loc
    if m.is_moe:
        moe_frac = m.n_moe_layers / m.n_layers
        h_loc = e * T * m.top_k * m.expert_ffn / tp
        copies = 2 * 2 * e * T * m.top_k * m.d_model / tp
        fwd = fwd + moe_frac * (act_f * h_loc + copies)
        bwd = bwd + moe_frac * (act_b * h_loc + copies)
    if m.position.value == "rotary":
        rope = 2 * e * T * (m.d_attn + m.d_kv) / tp
        fwd, bwd = fwd + rope, bwd + rope
    if m.dropout:  # two per layer; forward reads x, writes y and the mask; backward reads dy and mask, writes dx
        drop = 2 * (2 * td + td / e)
        fwd, bwd = fwd + drop, bwd + drop
    return fwd, bwd


def attention_score_bytes(e: float, p: float) -> float:
    """Bytes one forward of unfused attention moves per element of its h·s·S score matrix, with activations
    of ``e`` bytes and probabilities of ``p`` (DtypeSpec.attention_probs). In the activations' dtype (Megatron-
    LM's fused softmax keeps them so): QKᵀ writes the scores, softmax reads them and writes the probabilities,
    P·V reads them: 4·e. In another dtype (an fp32 softmax: torch.autocast, whose softmax autocasts to
    float32 and whose matmul casts back, PyTorch AMP docs "CUDA Ops that can autocast to float32"; or by hand,
    as GLM-130B's "FP32 softmax", github.com/THUDM/GLM-130B logs/main-log-en.md) two casts come in: the scores
    are read (e) and written as p, softmax reads and writes p, the probabilities are read (p) and written back
    as e for P·V: 4·e + 4·p (fp16 with an fp32 softmax: 24 bytes, three times 8). The backward is timed as
    twice the forward (step_time)."""
    return 4.0 * e if p == e else 4.0 * e + 4.0 * p


def unfused_attention_s(
    m: ModelSpec,
    plan: TrainingPlan,
    seqs: np.ndarray,
    s: np.ndarray,
    S: float,
    peak: float,
    bw: float,
    e: float,
    c: dict,
) -> np.ndarray:
    """Seconds of one forward of the attention core without FlashAttention, for ``seqs`` sequences' worth of
    heads (micro-batch / tp) of ``s`` queries over ``S`` keys: QKᵀ and P·V as cuBLAS batched GEMMs, one
    (s×d_head)·(d_head×S) and one (s×S)·(S×d_head) per head, each by the roofline of gemm_s at the GEMM ceiling
    — thin in d_head (64-128), their arithmetic intensity (≈ 2·d_head·s·S / (e·(s·S + 2·d_head·(s + S))),
    80-120 FLOP/B at d_head 96-128) is under an A100's or H100's balance (150-300 FLOP/B), so the score
    matrix each writes or reads sets their time; the shape law fitted on the model's GEMMs (d ≥ 768) is not
    extrapolated to d_head (with it, one 22B layer's attention forward came to 1.6 ms where Korthikanti et
    al. 2022 Table 4 measure 1.3 ms for the whole recomputed core, selective less none) — then the softmax
    between them (attention_score_bytes, less QKᵀ's write and P·V's read of the h·s·S matrix) and, in a model
    with dropout, the probabilities' dropout (read, write, a 1-byte mask: Megatron-LM's CoreAttention). A softmax
    that is not one fused kernel (``TrainingPlan.softmax_passes`` above 1) reads and writes the matrix once more
    per further pass."""
    n_bh = seqs * m.n_heads
    dh = m.d_attn / m.n_heads
    ceiling = {**c, "gemm_half_dim": 0.0}
    gemms = n_bh * (gemm_s(s, S, dh, peak, bw, e, ceiling) + gemm_s(s, dh, S, peak, bw, e, ceiling))
    per_score = attention_score_bytes(e, plan.dtypes.bytes_of("attention_probs") or e) - 2 * e
    per_score = per_score + 2 * e * (
        plan.softmax_passes - 1
    )  # an eager softmax's further passes, each a read and a write
    if m.dropout:
        per_score = per_score + 2 * e + 1
    return gemms + per_score * n_bh * s * S / (bw * c["hbm"])


def attention_kernels(flash: bool, softmax_passes: int = 1) -> tuple[int, int]:
    """(forward, backward) kernel launches of one layer's attention core: FlashAttention one forward, two
    backward; unfused QKᵀ, the softmax's passes (``softmax_passes``), P·V, and twice that backward."""
    return (1, 2) if flash else (2 + softmax_passes, 2 * (2 + softmax_passes))


def kernels_per_layer(m: ModelSpec, flash: bool, softmax_passes: int = 1) -> tuple[int, int]:
    """(forward, backward) kernel launches of one layer, unfused: GEMMs (QKV, output, up — gate and
    up fused into one —, down; backward a data-gradient and a weight-gradient GEMM each), attention
    (FlashAttention one kernel forward, two backward; unfused: scores, softmax, weighted sum, and
    twice that backward; an eager softmax one kernel per pass, ``softmax_passes``), norms, residual adds, the
    activation, rotary."""
    gemm = 4 + (1 if m.position.value == "relative" else 0)
    attn_f, attn_b = attention_kernels(flash, softmax_passes)
    other = (
        m.norms_per_layer
        + 2
        + 1
        + (1 if m.position.value == "rotary" else 0)
        + (2 if m.dropout else 0)
    )
    return gemm + attn_f + other, 2 * gemm + attn_b + other


def finetune_layer_s(
    m: ModelSpec,
    plan: TrainingPlan,
    T: np.ndarray,
    tp: np.ndarray,
    peak: float,
    bw: float,
    e: float,
    c: dict,
) -> tuple:
    """A fine-tune's extra seconds per layer for one micro-batch of T tokens: (adapter GEMMs forward, adapter
    GEMMs backward, one dequantisation pass, adapter kernel launches forward, backward).

    Adapters (PEFT LoRA Linear, ``result + lora_B(lora_A(x)) * scaling``): forward x·Aᵀ (T × r × d_in) and
    ·Bᵀ (T × d_out × r) through the same roofline as every GEMM (skinny: memory-bound for small r), then
    a scale and an add over T × d_out (read 2, write 1; read 1, write 1); backward the data and weight
    gradients of both (4 GEMMs) and the scale's backward; 4 launches forward, 5 backward, per module.
    Dequantisation (bitsandbytes MatMul4Bit / int8): before each use of a quantised weight — forward, the
    data gradient, and a recomputed forward — the kernel reads the packed weight and writes a 16-bit copy
    the GEMM then reads (counted by gemm_s): (bytes per stored weight + 2) per weight, memory-bound."""
    ft = plan.finetune
    zero = np.zeros(np.shape(tp), dtype=float) if np.ndim(tp) else 0.0
    if ft is None or not ft.adapters:
        return zero, zero, zero, zero, zero
    r = ft.lora_rank
    fwd = bwd = kf = kb = zero
    for name, (d_in, d_out) in module_shapes(m).items():
        if name not in ft.targets:
            continue
        # o_proj and down_proj are row-parallel (input split), the others column-parallel (output split)
        din, dout = (d_in / tp, d_out) if name in ("o_proj", "down_proj") else (d_in, d_out / tp)
        a = gemm_s(T, r, din, peak, bw, e, c)
        b = gemm_s(T, dout, r, peak, bw, e, c)
        ew = (3 + 2) * e * T * dout / (bw * c["hbm"])
        fwd = fwd + a + b + ew
        bwd = bwd + 2 * (a + b) + 2 * e * T * dout / (bw * c["hbm"])
        kf, kb = kf + 4 * c["kernel_s"], kb + 5 * c["kernel_s"]
    dq = zero
    if ft.base_precision in (BasePrecision.NF4, BasePrecision.INT8):
        per_w = base_linear_bytes(ft.base_precision, m.d_model, ft.double_quant) + 2.0
        dq = zero + linear_params_per_layer(m) / tp * per_w / (bw * c["hbm"]) + 7 * c["kernel_s"]
    return fwd, bwd, dq, kf, kb


def offload_s(
    plan: TrainingPlan,
    opt_params: np.ndarray,
    n_micro: np.ndarray,
    backward_s: np.ndarray,
    w_bytes: np.ndarray,
    compute_mb: np.ndarray,
    node_size: int,
    consts: dict,
) -> np.ndarray:
    """Seconds per step that offloading adds, in place of the device's optimizer step (ZeRO-Offload, Ren et
    al. 2021 §4.1): the 16-bit gradients cross the host link during the last micro-batch's backward (what
    does not hide behind it is exposed); CPU Adam updates ``opt_params`` parameters on the host, bound by host
    memory bandwidth (26 bytes per parameter, shared by the node's devices: constants.toml [offload]); the
    updated 16-bit weights cross back before the next forward. ZeRO-Infinity (optimizer+params) also
    streams every layer's weights in for each micro-batch's forward and backward, hidden behind the compute
    when the link keeps up."""
    o = consts["offload"]
    link = float(o["host_link_bytes_per_s"])
    grads = opt_params * 2.0 / link
    exposed = np.maximum(grads - backward_s, 0.0)
    cpu_adam = opt_params * 26.0 * node_size / float(o["host_memory_bytes_per_s"])
    upload = opt_params * 2.0 / link
    total = exposed + cpu_adam + upload
    if plan.offload == Offload.OPTIMIZER_PARAMS:
        total = total + n_micro * np.maximum(2 * w_bytes / link - compute_mb, 0.0)
    return total


def step_time(
    m: ModelSpec,
    pc: ParamCounts,
    plan: TrainingPlan,
    cluster: ClusterSpec,
    L: LayoutArrays,
    seq: float,
    batch: np.ndarray,
    consts: dict,
) -> TimeArrays:
    """Seconds per optimizer step of ``batch`` sequences of ``seq`` tokens, per layout row."""
    hw = cluster.hardware
    c = device_constants(consts, hw, plan.precision)
    peak = hw.peak(plan.precision)
    attn_bf16 = (
        plan.precision == Precision.FP8 and Precision.BF16 in hw.peak_flop_per_s
    )  # fp8 plans: attention in bf16
    attn_peak = hw.peak(Precision.BF16) if attn_bf16 else peak
    bw = hw.hbm_bw_bytes_per_s
    e = DTYPE_BYTES[plan.dtypes.activation]
    tp, pp, dp, cp, ep, vp, mb = L.tp, L.pp, L.dp, L.cp, L.ep, L.vp, L.micro_batch
    n_micro = batch / (dp * mb)
    T = mb * seq / cp  # tokens per device per micro-batch
    d = m.d_model
    node = cluster.node_size
    fab = Fabric(
        node_size=node,
        intra_bw=cluster.intra_bw * c["link"],
        inter_bw=cluster.inter_bw * c["link"],
        intra_alpha=c["intra_node_s"],
        inter_alpha=c["inter_node_s"],
    )

    # ---- forward compute of one layer, one micro-batch
    qkv = gemm_s(T, (m.d_attn + 2 * m.d_kv) / tp, d, peak, bw, e, c)
    out = gemm_s(T, d, m.d_attn / tp, peak, bw, e, c)
    rel = gemm_s(T, m.d_attn / tp, d, peak, bw, e, c) if m.position.value == "relative" else 0.0
    k_up = m.ffn_matrices - 1

    def mlp(tokens, f):
        return k_up * gemm_s(tokens, f / tp, d, peak, bw, e, c) + gemm_s(
            tokens, d, f / tp, peak, bw, e, c
        )

    dense_mlp = mlp(T, m.ffn_dim)
    if m.is_moe:
        local_experts = m.n_experts / ep
        tok_per_expert = T * m.top_k * ep / m.n_experts
        moe_mlp = (
            local_experts * mlp(tok_per_expert, m.expert_ffn)
            + m.n_shared_experts * mlp(T, m.expert_ffn)
            + gemm_s(T, m.n_experts, d, peak, bw, e, c)
        )
    else:
        moe_mlp = dense_mlp

    causal_skip = 0.5 if (m.causal and plan.flash_attention) else 1.0
    attn_flop = 4.0 * T * seq * m.d_attn / tp * causal_skip
    attn_width = 1.0 if attn_bf16 else c["operand_width"]
    # the attention core's own balance power: FlashAttention-2 reaches 50-73% of A100's peak forward (Dao 2023,
    # arXiv 2307.08691 §4.1) but 35% of H100's (Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, abstract):
    # 0.48-0.70 of its A100 fraction, where the GEMMs' power gives H100 0.73 of A100's (tests/test_time.py)
    if plan.flash_attention:
        eff = c["attention"] * balance_factor(
            attn_peak, c["balance_bw"], c, attn_width, "attention_balance_exponent"
        )
        attn_fwd = attn_flop / (attn_peak * min(1.0, eff))  # ≤ peak
    else:  # unfused: other kernels than FlashAttention's (unfused_attention_s)
        attn_fwd = unfused_attention_s(
            m, plan, mb / tp, seq / cp, seq, attn_peak, bw, e, {**c, "operand_width": attn_width}
        )
    attn_bwd = attn_fwd * (2.5 if plan.flash_attention else 2.0)  # FA2 backward: 5 matmuls vs 2

    ew_f, ew_b = elementwise_bytes(m, seq, L, e)
    elem_fwd, elem_bwd = ew_f / (bw * c["hbm"]), ew_b / (bw * c["hbm"])
    # a fixed cost per kernel launch (launch latency and the framework's per-op dispatch)
    k_f, k_b = kernels_per_layer(m, plan.flash_attention, plan.softmax_passes)
    kern_fwd, kern_bwd = k_f * c["kernel_s"], k_b * c["kernel_s"]

    fd, fm = m.n_dense_layers / m.n_layers, m.n_moe_layers / m.n_layers
    mlp_fwd = fd * dense_mlp + fm * moe_mlp  # one forward of a layer's MLP matmuls (dense or MoE)
    gemm_fwd = qkv + out + rel + mlp_fwd
    # a fine-tune: which layers run a backward and which compute weight gradients (finetune.backward_shares),
    # the adapters' GEMMs and elementwise ops, a quantised base's dequantisation (finetune_layer_s)
    b_share, w_share, head_gemms = backward_shares(m, plan)
    ad_f, ad_b, dq_pass, ad_kern_f, ad_kern_b = finetune_layer_s(m, plan, T, tp, peak, bw, e, c)
    gemm_fwd = gemm_fwd + ad_f
    gemm_bwd_factor = b_share + w_share  # × the base GEMMs' forward time
    attn_bwd = b_share * attn_bwd
    elem_bwd = b_share * elem_bwd
    kern_fwd, kern_bwd = kern_fwd + ad_kern_f, b_share * kern_bwd + ad_kern_b
    layer_fwd = gemm_fwd + attn_fwd + elem_fwd + kern_fwd + dq_pass
    gemm_bwd = gemm_bwd_factor * (gemm_fwd - ad_f) + ad_b + b_share * dq_pass
    layer_bwd = gemm_bwd + attn_bwd + elem_bwd + kern_bwd
    full_rc, sel_rc, op_rc = (
        L.recomputes(r) for r in (Recompute.FULL, Recompute.SELECTIVE, Recompute.OP)
    )
    # op-level: the even matmuls (their share of the layer's matmul FLOPs) and every elementwise op
    # again, with their launches; attention is saved (flops.op_recompute_matmul_flop_fwd)
    op_share = op_recompute_matmul_flop_fwd(m) / np.maximum(
        matmul_flop_fwd(m, pc) - 2.0 * m.vocab_size * d, 1.0
    )
    attn_k = attention_kernels(plan.flash_attention, plan.softmax_passes)[0]
    op_kern = (k_f - attn_k - 0.5 * (4 + (1 if m.position.value == "relative" else 0))) * c[
        "kernel_s"
    ]

    # ---- communication inside a layer: TP (stride 1), CP (stride tp), EP (stride tp·cp)
    # TP as Megatron-LM runs it (megatron/core/tensor_parallel/layers.py, in all-reduce units: an all-gather
    # or reduce-scatter of the same tensor is half of one). Exposed: the forward's two (after the attention
    # and MLP output projections; under sequence parallelism an all-gather before each input projection
    # and a reduce-scatter after each output one), twice under full recomputation, and under sequence
    # parallelism the backward's all-gathers of the output projections' gradients (one more). Hidden:
    # the input projections' (QKV, MLP up) backward collectives, which LinearWithGradAccumulationAndAsync-
    # Communication issues asynchronously: the input-gradient all-reduce behind the weight-gradient GEMM,
    # or under sequence parallelism the all-gather of the saved input behind the input-gradient GEMM and
    # the reduce-scatter behind the weight-gradient one; exposed only where they outlast those GEMMs, and
    # what hides slows them (collective_interference_s). Korthikanti et al. 2022 Table 4 measures the
    # consequences: full recomputation costs 39% (its recomputed forward's all-reduces cannot hide), and
    # sequence parallelism saves 3% only (benchmarks/time_floors.py prints the model's).
    tp_ar = all_reduce_s(e * T * d, 1, tp, fab) * (1 - c["tp_overlap"])
    sp_on = L.dims.sp_on
    tp_exposed = (2 + np.where(full_rc, 2, 0) + np.where(sp_on, 1, 0)) * tp_ar
    up = k_up / (k_up + 1) * mlp_fwd  # the MLP's input projections (gate and up); down is the rest
    col_gemm = qkv + up  # one forward of the input projections
    window = (w_share + np.where(sp_on, b_share, 0.0)) * col_gemm
    tp_bwd = 2 * tp_ar
    tp_late = np.maximum(0.0, tp_bwd - window)
    tp_layer = (
        tp_exposed
        + tp_late
        + collective_interference_s(
            tp_bwd - tp_late, consts["memory"]["nccl_channels"], hw.compute_units
        )
    )
    if (
        plan.async_tp
    ):  # the forward's four collectives paired with their matmuls instead (async_tp_s)
        rs_sum = (
            2 * e * T * d * (1 + 1 / tp) / (bw * c["hbm"])
        )  # the two reduce-scatters' local sums
        # one all-gather or reduce-scatter is half an all-reduce (tp_ar)
        tp_async = (
            tp_layer
            - 2 * tp_ar
            + async_tp_s(tp_ar / 2, tp, (qkv, up), (out, mlp_fwd - up))
            + rs_sum
        )
        tp_layer = np.where(sp_on, tp_async, tp_layer)
    kv_bytes = e * mb * seq * 2 * m.d_kv / tp
    cp_layer = np.maximum(0.0, 3 * all_gather_s(kv_bytes, tp, cp, fab) - (attn_fwd + attn_bwd))
    if m.is_moe:
        tok_bytes = e * T * m.top_k * d * L.sp_share
        ep_layer = fm * 4 * all_to_all_s(tok_bytes, L.dims.expert_stride, ep, fab)
    else:
        ep_layer = 0.0

    # ---- LM head and loss on the last stage
    # (3 GEMMs: logits, and their data and weight gradients; fp32 logits read and written by the
    # softmax cross-entropy and its gradient; 5 kernels); none for a classifier (head_gemms 0)
    head = head_gemms * gemm_s(T, m.vocab_size / tp, d, peak, bw, e, c) + (head_gemms > 0) * (
        3 * 4.0 * T * m.vocab_size / tp / (bw * c["hbm"]) + (head_gemms + 2) * c["kernel_s"]
    )

    layers = stage_layers(m.n_layers, pp, vp)  # the heaviest rank's (stages may be uneven)
    # recomputation counted in its class: full re-runs a layer's forward, selective the attention core
    per_layer = {
        "gemm": gemm_fwd
        + gemm_bwd
        + dq_pass
        + np.where(full_rc, gemm_fwd + dq_pass, np.where(op_rc, op_share * gemm_fwd, 0.0)),
        "attention": attn_fwd + attn_bwd + np.where(full_rc | sel_rc, attn_fwd, 0.0),
        "elementwise": elem_fwd + elem_bwd + np.where(full_rc | op_rc, elem_fwd, 0.0),
        "kernel_launch": kern_fwd
        + kern_bwd
        + np.where(
            full_rc, kern_fwd, np.where(sel_rc, kern_fwd / k_f, np.where(op_rc, op_kern, 0.0))
        ),
    }
    # the slowest rank: the heaviest one, or the last one (the head's) when its fewer layers plus the
    # head take longer; at pp = 1, or when the chunks divide the layers, the last rank is a heaviest one
    last = last_stage_layers(m.n_layers, pp, vp)
    layer_s = sum(per_layer.values())
    head_rank = last * layer_s + head >= layers * layer_s
    n_l = np.where(head_rank, last, layers)
    ops_mb = {k: n_l * v for k, v in per_layer.items()}
    ops_mb["lm_head"] = np.where(head_rank, head, 0.0)
    compute_mb = sum(ops_mb.values())
    ops_mb = {
        k: np.broadcast_to(v, np.shape(compute_mb)) for k, v in ops_mb.items()
    }  # every class at the rows' shape
    comm_mb = layers * (tp_layer + cp_layer + ep_layer)
    act_msg = e * T * d * L.sp_share
    p2p_mb = np.where(pp > 1, 2 * vp * p2p_s(act_msg, L.n_gpus > node, fab), 0.0)
    stage_mb = compute_mb + comm_mb + p2p_mb

    bubble = (pp - 1) / vp * stage_mb

    # ---- data parallel: gradients (and ZeRO gathers) over dp·cp ranks, stride tp
    n_dp = L.dims.shard_ranks
    _, _, _, local_params = model_state_bytes(m, pc, plan, L, first=False)
    if plan.finetune is None:
        train = plan.trainable_fraction
        g_b, w_b = plan.dtypes.bytes_of("grad"), plan.dtypes.bytes_of("weight")
    else:  # a fine-tune reduces and updates only what trains (adapters: fp32, PEFT's autocast_adapter_dtype)
        train = trainable_params(m, pc, plan.finetune) / pc.total
        adapters = plan.finetune.adapters
        g_b = ADAPTER_BYTES if adapters else plan.dtypes.bytes_of("grad")
        w_b = ADAPTER_BYTES if adapters else plan.dtypes.bytes_of("weight")
    g_bytes = local_params * train * g_b
    w_bytes = local_params * w_b
    # ZeRO-0: gradient all-reduce hidden behind the last micro-batch's backward (bucketing);
    # ZeRO-1/2 (distributed optimizer): reduce-scatter behind the backward, parameter all-gather
    # behind the next step's first forward (Megatron-Core overlap_param_gather).
    # The last bucket's reduction cannot overlap anything: it starts when the backward ends (PyTorch
    # DDP, Li et al. 2020 §3.2.3; Megatron-Core buckets of max(40M, 1M·dp) parameters,
    # distributed_data_parallel.py); likewise the first bucket's gather before the forward.
    hide_bwd = c["dp_overlap"] * layers * layer_bwd
    hide_fwd = c["dp_overlap"] * layers * layer_fwd
    bucket = np.minimum(
        1.0, np.maximum(c["dp_bucket_params"], MEGA * n_dp) / np.maximum(local_params, 1.0)
    )
    ar_full = all_reduce_s(g_bytes, tp, n_dp, fab)
    rs_full = reduce_scatter_s(g_bytes, tp, n_dp, fab)
    ag_full = all_gather_s(w_bytes * train, tp, n_dp, fab)
    ar = np.maximum(bucket * ar_full, ar_full - hide_bwd)
    rs_ag = np.maximum(bucket * rs_full, rs_full - hide_bwd) + np.maximum(
        bucket * ag_full, ag_full - hide_fwd
    )
    exposed_once = np.where(L.zero == 0, ar, rs_ag)
    z3_mb = 2 * all_gather_s(w_bytes, tp, n_dp, fab) + reduce_scatter_s(g_bytes, tp, n_dp, fab)
    exposed_z3 = n_micro * np.maximum(0.0, z3_mb - c["dp_overlap"] * compute_mb)
    dp_exposed = np.where(L.zero >= 3, exposed_z3, exposed_once)
    # the part that hides behind compute slows that compute (collective_interference_s); counted here,
    # with the data-parallel communication that causes it
    hidden = np.where(
        L.zero >= 3,
        n_micro * np.minimum(z3_mb, c["dp_overlap"] * compute_mb),
        np.where(L.zero == 0, ar_full - ar, rs_full + ag_full - rs_ag),
    )
    dp_exposed = dp_exposed + collective_interference_s(
        np.maximum(hidden, 0.0), consts["memory"]["nccl_channels"], hw.compute_units
    )

    # ---- optimizer step: memory-bound read/write of the local (sharded) states
    # (master and moments read and written, gradient read, weight written)
    sb = state_bytes(m, pc, plan)
    opt_b = (
        sb.layer_optim / np.maximum(sb.layer_grad, 1e-30) * g_b
        if plan.finetune is not None
        else plan.dtypes.optimizer_bytes(plan.optimizer_moments)
    )
    per_param = 2 * opt_b + g_b + w_b
    opt_params = local_params * train / np.where(L.zero >= 1, n_dp, 1)
    # + the gradient-norm pass of clipping: the local gradients read once (Megatron clip_grad_norm)
    optimizer = opt_params * (per_param + g_b) / (bw * c["hbm"])
    if plan.offload != Offload.NONE:
        optimizer = offload_s(
            plan,
            opt_params,
            n_micro,
            layers * layer_bwd,
            w_bytes / np.maximum(n_dp, 1),
            compute_mb,
            cluster.node_size,
            consts,
        )

    return TimeArrays(
        n_micro=n_micro,
        compute_mb=compute_mb,
        comm_mb=comm_mb,
        p2p_mb=p2p_mb,
        bubble_s=bubble,
        dp_comm_s=dp_exposed,
        optimizer_s=optimizer,
        ops_mb=ops_mb,
    )
