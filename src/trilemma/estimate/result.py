"""The typed result of one plan: all corners (params, FLOPs, layout, memory, time, cost) in SI units,
and the JSON document it serialises to (schema ``trilemma.estimate/1``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from trilemma.estimate.cost import homes_powered, household_years
from trilemma.estimate.evaluate import Evaluation, host_memory_bytes, memory_headroom
from trilemma.estimate.goodput import node_count
from trilemma.estimate.goodput import resolve as resolve_reliability
from trilemma.estimate.layouts import batch_sequences
from trilemma.estimate.params import ParamCounts
from trilemma.presets import calibration
from trilemma.specs import ClusterSpec, Layout, ModelSpec, Task, TrainingPlan
from trilemma.specs.constants import Constants
from trilemma.units import KWH

if TYPE_CHECKING:  # a type only: the estimators do not depend on the laws
    from trilemma.quality.predict import LossPrediction

SCHEMA = "trilemma.estimate/1"


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device on the stage that needs the most."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    other: float  # logits + cuda_context + nccl + framework_residual
    per_gpu_bytes: float
    capacity_bytes: float
    headroom: float = (
        0.0  # share of capacity a plan must leave free to count as fitting (memory band)
    )
    # the parts of ``other``: outside PyTorch's allocator (they count in nvidia-smi's figure, not in the
    # allocator's peaks) the CUDA context, NCCL's buffers for the layout's process groups and the fitted
    # residual; and the logits with their gradient (last pipeline stage)
    logits: float = 0.0
    cuda_context: float = 0.0
    nccl: float = 0.0
    framework_residual: float = 0.0
    float8_casts: float = 0.0  # of ``activations``: float8 linears' casts at one linear's backward
    host_bytes: float = (
        0.0  # offloaded states in host memory, per device (fine-tunes with --offload)
    )
    host_capacity_bytes: float = (
        0.0  # host memory per device the check allows (node's host memory / devices)
    )
    # the 80% band on the peak (calibrated.toml bands.memory_*): the measured peak lies in it 80% of the time;
    # with the default headroom, a plan fits exactly when the band's upper end is within capacity
    per_gpu_bytes_low: float = 0.0
    per_gpu_bytes_high: float = 0.0

    @property
    def usable_bytes(self) -> float:
        """Capacity less the headroom: what a plan may use and still fit, bytes."""
        return self.capacity_bytes * (1 - self.headroom)

    @property
    def fits(self) -> bool:
        return self.per_gpu_bytes <= self.usable_bytes

    @property
    def free_bytes(self) -> float:
        """Capacity less the predicted peak, bytes (negative: over capacity)."""
        return self.capacity_bytes - self.per_gpu_bytes


@dataclass(frozen=True)
class TimeBreakdown:
    step_s: float  # one optimizer step over the global batch
    tokens_per_s: float  # while training, whole cluster
    mfu: float  # model FLOPs utilisation, 0-1 (PaLM convention)
    hfu: float  # hardware FLOPs utilisation, 0-1 (with recomputation)
    steps: float
    busy_s: float  # Σ steps × step time
    total_s: float  # busy / goodput
    total_s_low: (
        float  # 80% band from the leave-one-source-out backtest (trilemma validate), see band_for
    )
    total_s_high: float
    goodput: float  # busy / wall: reliability's share × other_share, or the plan's --goodput
    gpu_hours: float
    gpu_hours_low: float
    gpu_hours_high: float
    compute_s: float  # per step
    tp_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float  # exposed DP/ZeRO communication + the slowdown of the compute it overlaps, s
    optimizer_s: float
    band_reason: (
        str  # what the band is: BAND_LOSO, or why it was widened (band_reasons joined by '; ')
    )
    # compute_s by operation class (gemm, attention, elementwise, kernel_launch, lm_head), seconds per step
    ops_s: dict[str, float] = field(default_factory=dict)
    # the failure model for this run (trilemma.estimate.goodput.Goodput.to_dict: MTBF, checkpoint write and
    # interval, expected interruptions, seconds lost by cause, its goodput share)
    reliability: dict[str, Any] = field(default_factory=dict)
    other_share: float = (
        1.0  # slow nodes, evaluation, stalls for this node count (goodput.slow_node_share)
    )
    goodput_given: bool = False  # the plan's --goodput replaced the model
    step_s_low: float = (
        0.0  # 80% band on step time (calibrated.toml bands.throughput_*, widened like total_s)
    )
    step_s_high: float = 0.0
    # every reason the bands were widened beyond the leave-one-source-out ones (empty: none); band_reason joins them
    band_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class CostBreakdown:
    usd: float
    usd_low: float  # same band as time
    usd_high: float
    price_usd_per_gpu_hour: float
    price_date: str
    price_source: str
    energy_kwh: float
    co2_kg: float
    household_years: float
    pue: float
    grid_kg_co2_per_kwh: float
    # 80% bands: the time band's factors (energy is power × time; the power model has no measured energy
    # to be checked against, so this band holds the time model's error only)
    energy_kwh_low: float = 0.0
    energy_kwh_high: float = 0.0
    # the run's draw while it runs: devices × (board power × power fraction + host and network share) × PUE
    power_w: float = 0.0
    host_power_w_per_device: float = (
        0.0  # the host and network share in power_w, W per device (before PUE)
    )
    homes_powered: float = (
        0.0  # average US homes that power would supply for the run's duration (EIA)
    )
    co2_kg_low: float = 0.0
    co2_kg_high: float = 0.0


@dataclass(frozen=True)
class StageResult:
    tokens: float
    seq_len: int
    global_batch_sequences: int
    global_batch_tokens: float
    micro_batches: float
    steps: float
    step_s: float
    per_gpu_bytes: float


@dataclass(frozen=True)
class Estimate:
    """All corners of one plan: params, FLOPs, layout, memory, time, cost. SI units."""

    SCHEMA: ClassVar[str] = SCHEMA  # of ``to_dict()``

    model: ModelSpec
    model_resolution: str
    cluster: ClusterSpec
    plan: TrainingPlan
    layout: Layout
    layout_chosen: str  # "auto" (fastest that fits) or "given"
    params: ParamCounts
    model_flop_per_token: float
    hardware_flop_per_token: float
    total_model_flop: float
    total_hardware_flop: float
    memory: MemoryBreakdown
    time: TimeBreakdown
    cost: CostBreakdown
    stages: tuple[StageResult, ...]
    candidates_evaluated: int
    warnings: tuple[str, ...] = field(default=())
    loss: LossPrediction | None = None  # the quality corner, added by trilemma.api.with_loss
    finetune: dict[str, Any] | None = (
        None  # what a fine-tune trains and stores (None: pre-training)
    )
    deploy: dict[str, Any] | None = (
        None  # where the trained model must run (trilemma.api.with_deploy), or None
    )

    @property
    def async_tp_applied(self) -> bool:
        """Asynchronous TP asked for and in effect (async_tp_applies)."""
        return async_tp_applies(self.plan, self.layout)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (stable keys, SI units, fractions 0-1)."""
        m, hw = self.model, self.cluster.hardware
        lay = self.layout.model_dump(mode="json")
        lay.update(
            n_gpus=self.cluster.n_gpus,
            chosen=self.layout_chosen,
            candidates_evaluated=self.candidates_evaluated,
            # asynchronous TP asked for, and whether this layout uses it (TP > 1 with sequence parallelism)
            async_tp=self.plan.async_tp,
            async_tp_applied=self.async_tp_applied,
        )
        return {
            "schema": self.SCHEMA,
            "model": {
                "name": m.name,
                "resolved_from": self.model_resolution,
                "source": m.source,
                "params_total": self.params.total,
                "params_active": self.params.active,
                "params_embedding": self.params.embedding,
                "params_non_embedding": self.params.non_embedding,
                "n_layers": m.n_layers,
                "d_model": m.d_model,
                "n_heads": m.n_heads,
                "n_kv_heads": m.kv_heads,
                "ffn_dim": m.ffn_dim,
                "vocab_size": m.vocab_size,
                "n_experts": m.n_experts,
                "top_k": m.top_k,
            },
            # family: the chip's architecture; family_calibrated: the calibration has step times or runs of it
            "hardware": {
                "name": hw.name,
                "family": hw.family,
                "family_calibrated": family_calibrated(hw.family),
                "n_gpus": self.cluster.n_gpus,
                "gpus_per_node": self.cluster.node_size,
                "peak_flop_per_s": hw.peak(self.plan.precision),
                "precision": str(self.plan.precision),
                "intra_node_bw_bytes_per_s": self.cluster.intra_bw,
                "inter_node_bw_bytes_per_s": self.cluster.inter_bw,
            },
            "flops": {
                "convention": (
                    "palm (6·N_matmul + 12·L·s·d_attn per token, no causal discount)"
                    if self.finetune is None
                    else FINETUNE_FLOPS
                )
                + (
                    "; no LM head (task classification)"
                    if self.plan.task == Task.CLASSIFICATION
                    else ""
                ),
                "model_per_token": self.model_flop_per_token,
                "hardware_per_token": self.hardware_flop_per_token,
                "total_model": self.total_model_flop,
                "total_hardware": self.total_hardware_flop,
            },
            "layout": lay,
            "task": str(
                self.plan.task
            ),  # what the head predicts: causal-lm or classification (TrainingPlan.task)
            "batch": {"tokens": self.plan.total_tokens, "stages": [asdict(s) for s in self.stages]},
            "memory": {
                "per_gpu_bytes": self.memory.per_gpu_bytes,
                # 80% band on the peak (leave-one-source-out, trilemma.validate.bands)
                "per_gpu_bytes_low": self.memory.per_gpu_bytes_low,
                "per_gpu_bytes_high": self.memory.per_gpu_bytes_high,
                "capacity_bytes": self.memory.capacity_bytes,
                "fits": self.memory.fits,
                "breakdown": {
                    "weights": self.memory.weights,
                    "gradients": self.memory.gradients,
                    "optimizer": self.memory.optimizer,
                    "activations": self.memory.activations,
                    "other": self.memory.other,
                },
                # the parts of breakdown.other: the logits, and outside PyTorch's allocator the CUDA
                # context, NCCL's buffers and the fitted residual (they sum to other)
                "other_parts": {
                    "logits": self.memory.logits,
                    "cuda_context": self.memory.cuda_context,
                    "nccl": self.memory.nccl,
                    "framework_residual": self.memory.framework_residual,
                },
                # of breakdown.activations: float8 linears' casts (precision fp8, torchao Float8Linear)
                "activations_parts": {"float8_casts": self.memory.float8_casts},
                # torch.compile: fewer saved activations (trilemma.estimate.memory.COMPILED_GATED_HIDDEN)
                "compile": self.plan.compile,
                # headroom: the share of capacity the verdict keeps free for the memory model's
                # error (upper end of its 80% band, or --memory-headroom); free = capacity − peak
                "headroom": self.memory.headroom,
                "usable_bytes": self.memory.usable_bytes,
                "free_bytes": self.memory.free_bytes,
                "free_fraction": self.memory.free_bytes / self.memory.capacity_bytes,
            },
            "time": asdict(self.time),
            "cost": asdict(self.cost),
            **({"loss": self.loss.to_dict()} if self.loss is not None else {}),
            **({"finetune": self.finetune} if self.finetune is not None else {}),
            **({"deploy": self.deploy} if self.deploy is not None else {}),
            "warnings": list(self.warnings),
        }


def async_tp_applies(plan: TrainingPlan, layout: Layout) -> bool:
    """The plan asks for asynchronous TP and the layout can use it: TP > 1 with sequence parallelism, the
    collectives trilemma.estimate.parallel_time.async_tp_s overlaps."""
    return bool(plan.async_tp and layout.dims.sp_on)


#: the FLOP convention of a fine-tune's MFU (trilemma.estimate.flops.finetune_flop_per_token)
FINETUNE_FLOPS = (
    "executed by the fine-tune: forward 2·N_matmul, data gradients 2·N_matmul where a backward runs, "
    "weight gradients only for trainable weights, 6 × adapter parameters, attention 12·L·s·d_attn "
    "(PaLM, no causal discount)"
)


def finetune_block(
    m: ModelSpec, pc: ParamCounts, pl: TrainingPlan, host_bytes: float, host_capacity: float
) -> dict:
    """The ``finetune`` block of the JSON: method, what trains (exact, PEFT's count), adapters, the base's
    storage, optimizer, offload with host memory, and why there is no loss."""
    from trilemma.estimate.finetune import FINETUNE_NO_LOSS, nf4_bits_per_weight, trainable_params

    ft = pl.finetune
    n = trainable_params(m, pc, ft)
    bits = {"bf16": 16.0, "fp16": 16.0, "int8": 8.0, "nf4": nf4_bits_per_weight(ft.double_quant)}[
        ft.base_precision.value
    ]
    return {
        "method": ft.method.value,
        "trainable_params": int(round(float(n))),
        "trainable_fraction": float(n) / pc.total,
        "trainable_layers": ft.trainable_layers,
        "lora_rank": ft.lora_rank if ft.adapters else None,
        "lora_alpha": ft.lora_alpha if ft.adapters else None,
        "lora_targets": list(ft.targets) if ft.adapters else None,
        "base_precision": ft.base_precision.value,
        "base_linear_bits_per_weight": bits,
        "optimizer": pl.optimizer.value,
        "offload": pl.offload.value,
        "host_bytes_per_gpu": host_bytes,
        "host_capacity_bytes_per_gpu": host_capacity,
        "loss": None,
        "loss_reason": FINETUNE_NO_LOSS,
        "goodput": "the failure model only (checkpoints, failures, restarts for this job's GPUs and hours); "
        "the slow-node share (run.slow_node_spread), fitted on months-long pre-training runs, is not applied",
    }


def _q(name: str) -> tuple[float, float]:
    """(q10, q90) of calibrated.toml's ``{name}_log_q10/q90`` (0, 0 when absent: no band)."""
    b = calibration().get("bands", {})
    return float(b.get(f"{name}_log_q10", 0.0)), float(b.get(f"{name}_log_q90", 0.0))


def band_factors(kind: str = "time") -> tuple[float, float]:
    """Multipliers (low, high) for an 80% interval on a prediction: from the leave-one-source-out residuals
    r = log(predicted / reported) of the last calibration (time: a duration's sign), low = exp(−q90),
    high = exp(−q10). ``kind``: "time" (a whole run's time, GPU-hours, $, energy, CO2), "throughput" (a
    step's time), "memory" (the peak per device) — trilemma.validate.bands."""
    q10, q90 = _q(kind)
    return math.exp(-q90), math.exp(-q10)


#: ``time.band_reason``: the band is the leave-one-source-out one (the plan is inside the calibrated regime)
BAND_LOSO = "leave-one-source-out"
#: ``time.band_reason``: the chip's family has no step times or runs in the calibration
BAND_CROSS_FAMILY = "chip family not calibrated: cross-family error added"
#: the kinds of calibration row that measure time (a family with only memory rows is not calibrated for it)
TIME_KINDS = ("throughput", "runs")


def family_coverage(family: str) -> dict[str, int]:
    """Calibration cases of a chip family per kind (calibrated.toml [families]; {} if none used it)."""
    row = calibration().get("families", {}).get(family, {})
    return {k: int(v) for k, v in row.items() if not k.startswith("cross_family")}


def family_calibrated(family: str) -> bool:
    """Whether the last calibration measured step times or runs on this chip family. True when the
    calibration predates the [families] table (nothing to say either way)."""
    if "families" not in calibration():
        return True
    return sum(family_coverage(family).get(k, 0) for k in TIME_KINDS) > 0


def outside_reasons(
    family: str,
    n_gpus: float | None = None,
    params_total: float | None = None,
    precision: str | None = None,
    finetune: bool = False,
    nodes: float | None = None,
) -> tuple[str, ...]:
    """Why a plan lies outside what the time calibration measured (calibrated.toml [families], [regime]):
    a chip family with no step times or runs, more devices or a larger model than the largest calibrated
    one, a precision no throughput or run was measured in, a fine-tune when no fine-tune was, and (given
    ``nodes``, for a whole run's time) more nodes than the largest whole run with a wall time, or fewer (but
    more than one) than the smallest, where the slow-node share (trilemma.estimate.goodput.slow_node_share)
    is extrapolated. Empty: inside."""
    out = [] if family_calibrated(family) else [BAND_CROSS_FAMILY]
    reg = calibration().get("regime", {})
    if n_gpus is not None and "max_gpus" in reg and n_gpus > reg["max_gpus"]:
        out.append(
            f"{n_gpus:,.0f} devices, more than the largest calibrated ({reg['max_gpus']:,}): out-of-regime error added"
        )
    if params_total is not None and "max_params" in reg and params_total > reg["max_params"]:
        out.append(
            f"{params_total:.3g} parameters, more than the largest calibrated model ({reg['max_params']:.3g}): "
            "out-of-regime error added"
        )
    if precision is not None and "precisions" in reg and str(precision) not in reg["precisions"]:
        out.append(
            f"precision {precision} has no calibrated step times or runs ({', '.join(reg['precisions'])} have): "
            "out-of-regime error added"
        )
    if finetune and reg.get("finetune_cases", 1) == 0:
        out.append(
            "a fine-tune: no calibrated step times or runs are of fine-tunes: out-of-regime error added"
        )
    if (
        nodes is not None
        and not finetune
        and "max_run_nodes" in reg
        and nodes > reg["max_run_nodes"]
    ):
        out.append(
            f"{nodes:,.0f} nodes, more than the largest whole run with a wall time ({reg['max_run_nodes']:,}): "
            "the slow-node share is extrapolated: out-of-regime error added"
        )
    if nodes is not None and not finetune and 1 < nodes < reg.get("min_run_nodes", 0):
        out.append(
            f"{nodes:,.0f} nodes, fewer than the smallest multi-node whole run with a wall time "
            f"({reg['min_run_nodes']:,}): the slow-node share is extrapolated: out-of-regime error added"
        )
    return tuple(out)


def widened(q10: float, q90: float, k: int) -> tuple[float, float]:
    """Multipliers (low, high) of a band with leave-one-source-out quantiles (q10, q90), widened for ``k``
    reasons the plan lies outside the calibrated regime.

    The error outside has two parts: the source-to-source error the leave-one-source-out residuals
    measure (q10, q90) and the error of predicting a regime the constants never saw, measured where it
    can be: each chip family held out in turn (c10, c90; calibrated.toml [bands] cross_family_*). No
    calibrated row lies beyond the largest device count or model or in another precision, so each such
    reason is taken to add an error of that same size, independent of the others. Independent errors'
    quantiles add in quadrature, each side on its own (the residuals are skewed), and only the part of
    each quantile on its own side of the point counts (a quantile on the wrong side would narrow it):

        low  = exp(−√(max(q90, 0)² + k·max(c90, 0)²))
        high = exp(+√(min(q10, 0)² + k·min(c10, 0)²))

    so a band never narrows as reasons are added. The cross-family residuals already hold some
    source-to-source spread, so this counts that part twice: it errs wide, on purpose."""
    b = calibration().get("bands", {})
    if k <= 0 or "cross_family_log_q90" not in b:
        return math.exp(-q90), math.exp(-q10)
    up = math.sqrt(max(q90, 0.0) ** 2 + k * max(b["cross_family_log_q90"], 0.0) ** 2)
    down = math.sqrt(min(q10, 0.0) ** 2 + k * min(b["cross_family_log_q10"], 0.0) ** 2)
    return math.exp(-up), math.exp(down)


def band_outside(
    family: str,
    n_gpus: float | None = None,
    params_total: float | None = None,
    precision: str | None = None,
    kind: str = "time",
    finetune: bool = False,
    nodes: float | None = None,
) -> tuple[float, float, tuple[str, ...]]:
    """Multipliers (low, high) of the 80% band on ``kind`` ("time": a whole run's time, GPU-hours, $,
    energy; "throughput": a step's time) for a plan, and the reasons it was widened (``outside_reasons``,
    ``widened``). ``nodes`` counts for a whole run's time only: a step has no slow-node share."""
    reasons = outside_reasons(
        family, n_gpus, params_total, precision, finetune, nodes if kind == "time" else None
    )
    lo, hi = widened(*_q(kind), len(reasons))
    return lo, hi, reasons


def band_for(family: str) -> tuple[float, float, str]:
    """Multipliers (low, high) of the 80% band on time, GPU-hours and dollars for a chip family alone, and
    the reason (``BAND_LOSO`` or ``BAND_CROSS_FAMILY``): ``band_outside`` with the family as the only
    coordinate, so the widened band always contains the leave-one-source-out one."""
    lo, hi, reasons = band_outside(family)
    return lo, hi, reasons[0] if reasons else BAND_LOSO


def uncalibrated_family_warning(hw_name: str, family: str) -> str | None:
    """The note an estimate on a chip family the calibration has no step times or runs of carries."""
    low, high, reason = band_for(family)
    if reason != BAND_CROSS_FAMILY:
        return None
    lo, hi = band_factors()
    mem = family_coverage(family).get("memory", 0)
    only = f" (only {mem} peak-memory row{'s' if mem != 1 else ''})" if mem else ""
    return (
        f"{hw_name} ({family}): no measured step times or runs of this chip family in the calibration{only}; "
        f"time and cost bands widened by the cross-family error to ×{low:.2f}–×{high:.2f} of the point "
        f"(×{lo:.2f}–×{hi:.2f} on calibrated families)"
    )


def _reliability_dict(ev: Evaluation) -> dict[str, Any]:
    """The failure model's figures as arrays (or floats) keyed as in the JSON, with the inputs it ran at: the
    failure rate per device-hour, the restart time (s) and the checkpoint write bandwidth (bytes/s, the whole
    job's), the cluster's where it sets them, else ``reliability.toml``'s defaults."""
    g, cl = ev.reliability, ev.cluster
    r = resolve_reliability(failures_per_gpu_hour=cl.failures_per_gpu_hour, restart_s=cl.restart_s)
    inputs = {
        "failures_per_gpu_hour": r.failures_per_gpu_hour,
        "restart_s": r.restart_s,
        "write_bytes_per_s": np.asarray(ev.checkpoint_bytes, dtype=float)
        / np.asarray(g.checkpoint_write_s),
    }
    return {
        "inputs": inputs,
        "goodput": g.goodput,
        "mtbf_s": g.mtbf_s,
        "checkpoint_write_s": g.checkpoint_write_s,
        "checkpoint_interval_s": g.checkpoint_interval_s,
        "checkpoints": g.checkpoints,
        "expected_interruptions": g.expected_interruptions,
        "lost_s": {
            "checkpoint_writes": g.checkpoint_s,
            "rework": g.rework_s,
            "restarts": g.restart_s,
        },
    }


def _f(a: Any, i: int) -> float:
    return float(np.asarray(a)[i]) if np.ndim(a) else float(a)


def from_evaluation(
    m: ModelSpec,
    how: str,
    cl: ClusterSpec,
    pl: TrainingPlan,
    ev: Evaluation,
    i: int,
    chosen: str,
    consts: Constants,
) -> Estimate:
    """Row ``i`` of an evaluation as the typed result; ``chosen`` is "auto" or "given"."""
    lay = ev.layouts.row(i)
    pc = ev.params
    # the stage with most tokens stands for the run in the top-level time/memory figures
    main = max(range(len(pl.stages)), key=lambda k: pl.stages[k].tokens)
    sa = ev.stages[main]
    # memory: report the stage that needs the most
    m_lo, m_hi = band_factors("memory")
    k_mem = int(np.argmax([_f(s.memory.total, i) for s in ev.stages]))
    mm = ev.stages[k_mem].memory
    host_cap = host_memory_bytes(cl, consts) / min(cl.n_gpus, cl.node_size)
    memory = MemoryBreakdown(
        weights=_f(mm.weights, i),
        gradients=_f(mm.gradients, i),
        optimizer=_f(mm.optimizer, i),
        activations=_f(mm.activations, i),
        other=_f(mm.other, i),
        per_gpu_bytes=_f(ev.per_gpu_bytes, i),
        capacity_bytes=cl.hardware.hbm_bytes,
        headroom=memory_headroom(cl),
        logits=_f(mm.logits_picked, i),
        cuda_context=float(mm.context_bytes),
        nccl=_f(mm.nccl_bytes, i),
        framework_residual=float(mm.residual_bytes),
        float8_casts=_f(mm.float8_casts, i),
        host_bytes=_f(mm.host_bytes, i),
        host_capacity_bytes=host_cap,
        per_gpu_bytes_low=_f(ev.per_gpu_bytes, i) * m_lo,
        per_gpu_bytes_high=_f(ev.per_gpu_bytes, i) * m_hi,
    )
    t = sa.time
    # a fine-tune (TrainingPlan.finetune, where the plan has one): no calibrated row is one
    ft = getattr(pl, "finetune", None) is not None
    nodes = node_count(
        cl.n_gpus, cl.node_size
    )  # as the slow-node share counts them (--gpus-per-node too)
    lo, hi, reasons = band_outside(
        cl.hardware.family, cl.n_gpus, pc.total, str(pl.precision), finetune=ft, nodes=nodes
    )
    s_lo, s_hi, _ = band_outside(
        cl.hardware.family, cl.n_gpus, pc.total, str(pl.precision), "throughput", ft
    )
    total, hours, usd = _f(ev.total_s, i), _f(ev.cost.gpu_hours, i), _f(ev.cost.usd, i)
    time = TimeBreakdown(
        step_s=_f(t.step_s, i),
        tokens_per_s=_f(ev.tokens_per_s, i),
        mfu=_f(ev.mfu, i),
        hfu=_f(ev.hfu, i),
        steps=sum(_f(s.steps, i) for s in ev.stages),
        busy_s=_f(ev.busy_s, i),
        total_s=total,
        total_s_low=total * lo,
        total_s_high=total * hi,
        goodput=_f(ev.goodput, i),
        gpu_hours=hours,
        gpu_hours_low=hours * lo,
        gpu_hours_high=hours * hi,
        compute_s=_f(t.compute_s, i),
        tp_comm_s=_f(t.tp_comm_s, i),
        pp_comm_s=_f(t.pp_comm_s, i),
        bubble_s=_f(t.bubble_s, i),
        dp_comm_s=_f(t.dp_comm_s, i),
        optimizer_s=_f(t.optimizer_s, i),
        band_reason="; ".join(reasons) or BAND_LOSO,
        ops_s={k: _f(v, i) for k, v in t.ops_s.items()},
        reliability={
            k: (_f(v, i) if not isinstance(v, dict) else {kk: _f(vv, i) for kk, vv in v.items()})
            for k, v in _reliability_dict(ev).items()
        },
        other_share=_f(ev.other_share, i),
        goodput_given=ev.goodput_given is not None,
        step_s_low=_f(t.step_s, i) * s_lo,
        step_s_high=_f(t.step_s, i) * s_hi,
        band_reasons=reasons,
    )
    energy_j = _f(ev.cost.energy_j, i)
    hw = cl.hardware
    cost = CostBreakdown(
        usd=usd,
        usd_low=usd * lo,
        usd_high=usd * hi,
        price_usd_per_gpu_hour=cl.price,
        price_date=hw.price_date if cl.price_usd_per_hour is None else "user",
        price_source=hw.price_source if cl.price_usd_per_hour is None else "user",
        energy_kwh=energy_j / KWH,
        co2_kg=_f(ev.cost.co2_kg, i),
        energy_kwh_low=energy_j / KWH * lo,
        energy_kwh_high=energy_j / KWH * hi,
        co2_kg_low=_f(ev.cost.co2_kg, i) * lo,
        co2_kg_high=_f(ev.cost.co2_kg, i) * hi,
        household_years=float(
            household_years(energy_j, consts["energy"]["household_kwh_per_year"])
        ),
        pue=cl.pue,
        grid_kg_co2_per_kwh=cl.grid_kg_co2_per_kwh,
        power_w=_f(ev.power_w, i),
        host_power_w_per_device=ev.host_w_per_device,
        homes_powered=float(
            homes_powered(_f(ev.power_w, i), consts["energy"]["household_kwh_per_year"])
        ),
    )
    stages = tuple(
        StageResult(
            tokens=s.tokens,
            seq_len=s.seq_len,
            global_batch_sequences=int(_f(a.batch_seqs, i)),
            global_batch_tokens=_f(a.batch_seqs, i) * s.seq_len,
            micro_batches=_f(a.n_micro, i),
            steps=_f(a.steps, i),
            step_s=_f(a.time.step_s, i),
            per_gpu_bytes=_f(a.memory.total, i),
        )
        for s, a in zip(pl.stages, ev.stages)
    )
    warnings = []
    for s, a in zip(pl.stages, stages):
        target = batch_sequences(s)
        if a.global_batch_sequences != target:
            warnings.append(
                f"global batch rounded from {target} to {a.global_batch_sequences} sequences "
                f"(a multiple of dp × micro-batch = {lay.dp} × {lay.micro_batch})"
            )
    if pl.async_tp and not async_tp_applies(pl, lay):
        warnings.append(
            "--async-tp has no effect on this layout: asynchronous TP overlaps the collectives of "
            "tensor parallelism with sequence parallelism, and this layout has "
            + ("tp 1" if lay.tp == 1 else "no sequence parallelism")
        )
    if lay.tp > cl.node_size:
        warnings.append(
            f"tensor parallelism ({lay.tp}) spans nodes of {cl.node_size} devices: slow inter-node all-reduces"
        )
    from trilemma.estimate.stability import stability_warning

    unstable = stability_warning(str(pl.precision), pc.total)
    if unstable:
        warnings.append(unstable)
    uncal = uncalibrated_family_warning(hw.name, hw.family)
    if uncal:
        warnings.append(uncal)
    others = [r for r in reasons if r != BAND_CROSS_FAMILY]
    if others:
        warnings.append(
            f"outside the calibrated regime ({'; '.join(others)}): time, cost and energy bands widened to "
            f"×{lo:.2f}–×{hi:.2f} of the point"
        )
    if cl.price_usd_per_hour is None and hw.price_date:
        warnings.append(
            f"price ${cl.price:.2f}/GPU-hour is the {hw.name} reference of {hw.price_date}; set --price for yours"
        )
    mfpt = float(ev.model_flop) / pl.total_tokens
    hfpt = _f(ev.hardware_flop, i) / pl.total_tokens
    return Estimate(
        model=m,
        model_resolution=how,
        cluster=cl,
        plan=pl,
        layout=lay,
        layout_chosen=chosen,
        params=pc,
        model_flop_per_token=mfpt,
        hardware_flop_per_token=hfpt,
        total_model_flop=float(ev.model_flop),
        total_hardware_flop=_f(ev.hardware_flop, i),
        memory=memory,
        time=time,
        cost=cost,
        stages=stages,
        candidates_evaluated=len(ev.layouts),
        warnings=tuple(warnings),
        finetune=None
        if pl.finetune is None
        else finetune_block(m, pc, pl, memory.host_bytes, host_cap),
    )


__all__ = [
    "BAND_CROSS_FAMILY",
    "BAND_LOSO",
    "SCHEMA",
    "CostBreakdown",
    "Estimate",
    "MemoryBreakdown",
    "StageResult",
    "TimeBreakdown",
    "band_factors",
    "band_for",
    "band_outside",
    "family_calibrated",
    "family_coverage",
    "from_evaluation",
    "outside_reasons",
    "uncalibrated_family_warning",
    "widened",
]
