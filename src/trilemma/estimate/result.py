"""The typed result of one plan: all corners (params, FLOPs, layout, memory, time, cost) in SI units,
and the JSON document it serialises to (schema ``trilemma.estimate/1``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from trilemma.estimate.bands import family_calibrated
from trilemma.estimate.params import ParamCounts
from trilemma.specs import ClusterSpec, Layout, ModelSpec, Task, TrainingPlan
from trilemma.specs.stack_plan import PLAN_FIELDS, stack_document

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
    reference: float = (
        0.0  # an RL step's frozen reference model (trilemma.estimate.rl), part of ``other``
    )
    generation: float = (
        0.0  # an RL step's generation engine: weights and KV cache, part of ``other``
    )
    reward: float = 0.0  # PPO's frozen reward model (trilemma.estimate.rl), part of ``other``
    critic: float = (
        0.0  # PPO's value model: weights, gradients, optimizer states, part of ``other``
    )
    teacher: float = 0.0  # a distillation teacher's 16-bit weights (estimate.distill), in ``other``
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
        """Fits with margin: the peak at or under the usable bytes (with the band's headroom: the band's upper
        end within the card, 90% sure to fit)."""
        return self.per_gpu_bytes <= self.usable_bytes

    @property
    def tight(self) -> bool:
        """Neither fits with margin nor cannot fit: the band's favourable (lower) end is within the card, its
        upper end is not. ``estimate`` answers such a plan with a warning; it refuses one only when even the
        favourable end is over the card (docs/memory-verdict.md)."""
        return not self.fits and self.per_gpu_bytes_low <= self.capacity_bytes

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
        1.0  # left after each step waits for the slowest GPU (stragglers.straggler_share)
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
    #: expected benchmark scores with 80% bands (trilemma.quality.benchmarks.predict), added with the
    #: loss by trilemma.api.with_loss; None where there is no loss (a fine-tune, a classifier)
    benchmarks: dict[str, Any] | None = None
    finetune: dict[str, Any] | None = (
        None  # what a fine-tune trains and stores (None: pre-training)
    )
    deploy: dict[str, Any] | None = (
        None  # where the trained model must run (trilemma.api.with_deploy), or None
    )
    #: the same run on owned hardware (trilemma.estimate.owned.owned_document), or None
    owned: dict[str, Any] | None = None

    @property
    def async_tp_applied(self) -> bool:
        """Asynchronous TP asked for and in effect (async_tp_applies)."""
        return async_tp_applies(self.plan, self.layout)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (stable keys, SI units, fractions 0-1)."""
        return {
            "schema": self.SCHEMA,
            "model": self._model_dict(),
            "hardware": self._hardware_dict(),
            "flops": self._flops_dict(),
            "layout": self._layout_dict(),
            # the software stack and the plan fields it decides (trilemma.specs.stack_plan)
            "plan": {
                "stack": stack_document(self.plan),
                **{k: getattr(self.plan, k) for k in PLAN_FIELDS},
                # the fine-tuning trainer's memory features (presets/trainers.toml) and an RL step's rollout
                "trainer": None
                if self.plan.trainer is None
                else {"name": self.plan.trainer.name, "features": self.plan.trainer.features},
                "rl": None if self.plan.rl is None else self.plan.rl.model_dump(mode="json"),
                # the teacher distilled from (trilemma.estimate.distill), where there is one
                **(
                    {} if self.plan.distill is None else {"distill": self.plan.distill.model_dump()}
                ),
            },
            "task": str(
                self.plan.task
            ),  # what the head predicts: causal-lm or classification (TrainingPlan.task)
            "batch": {"tokens": self.plan.total_tokens, "stages": [asdict(s) for s in self.stages]},
            "memory": self._memory_dict(),
            "time": asdict(self.time),
            "cost": asdict(self.cost),
            **({"loss": self.loss.to_dict()} if self.loss is not None else {}),
            **({"quality": {"benchmarks": self.benchmarks}} if self.loss is not None else {}),
            **({"finetune": self.finetune} if self.finetune is not None else {}),
            **({"deploy": self.deploy} if self.deploy is not None else {}),
            **({"owned": self.owned} if self.owned is not None else {}),
            "warnings": list(self.warnings),
        }

    def _layout_dict(self) -> dict[str, Any]:
        lay = self.layout.model_dump(mode="json")
        lay.update(
            n_gpus=self.cluster.n_gpus,
            chosen=self.layout_chosen,
            candidates_evaluated=self.candidates_evaluated,
            # asynchronous TP asked for, and whether this layout uses it (TP > 1 with sequence parallelism)
            async_tp=self.plan.async_tp,
            async_tp_applied=self.async_tp_applied,
        )
        return lay

    def _model_dict(self) -> dict[str, Any]:
        m = self.model
        return {
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
        }

    def _hardware_dict(self) -> dict[str, Any]:
        """family: the chip's architecture; family_calibrated: the calibration has step times or
        runs of it."""
        hw = self.cluster.hardware
        return {
            "name": hw.name,
            "family": hw.family,
            "family_calibrated": family_calibrated(hw.family),
            "n_gpus": self.cluster.n_gpus,
            "gpus_per_node": self.cluster.node_size,
            "peak_flop_per_s": hw.peak(self.plan.precision),
            "precision": str(self.plan.precision),
            "intra_node_bw_bytes_per_s": self.cluster.intra_bw,
            "inter_node_bw_bytes_per_s": self.cluster.inter_bw,
        }

    def _flops_dict(self) -> dict[str, Any]:
        return {
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
        }

    def _memory_dict(self) -> dict[str, Any]:
        return {
            "per_gpu_bytes": self.memory.per_gpu_bytes,
            # 80% band on the peak (leave-one-source-out, trilemma.validate.bands)
            "per_gpu_bytes_low": self.memory.per_gpu_bytes_low,
            "per_gpu_bytes_high": self.memory.per_gpu_bytes_high,
            "capacity_bytes": self.memory.capacity_bytes,
            "fits": self.memory.fits,
            # not fitting with margin, yet within the card at the band's favourable end: answered, not refused
            "tight": self.memory.tight,
            "breakdown": {
                "weights": self.memory.weights,
                "gradients": self.memory.gradients,
                "optimizer": self.memory.optimizer,
                "activations": self.memory.activations,
                "other": self.memory.other,
            },
            # the parts of breakdown.other: the logits, and outside PyTorch's allocator the CUDA
            # context, NCCL's buffers, the fitted residual, an RL step's reference and generation engine
            # (they sum to other)
            "other_parts": {
                "logits": self.memory.logits,
                "cuda_context": self.memory.cuda_context,
                "nccl": self.memory.nccl,
                "framework_residual": self.memory.framework_residual,
                # an RL step's (trilemma.estimate.rl), only where there is one
                **(
                    {"reference": self.memory.reference, "generation": self.memory.generation}
                    if self.plan.rl is not None
                    else {}
                ),
                **(
                    {"reward": self.memory.reward, "critic": self.memory.critic}
                    if self.plan.rl is not None and self.plan.rl.method == "ppo"
                    else {}
                ),
                **({"teacher": self.memory.teacher} if self.plan.distill is not None else {}),
            },
            # of breakdown.activations: float8 linears' casts (precision fp8, torchao Float8Linear)
            "activations_parts": {"float8_casts": self.memory.float8_casts},
            # torch.compile: fewer saved activations (trilemma.estimate.activations.COMPILED_GATED_HIDDEN)
            "compile": self.plan.compile,
            # headroom: the share of capacity the verdict keeps free for the memory model's
            # error (upper end of its 80% band, or --memory-headroom); free = capacity − peak
            "headroom": self.memory.headroom,
            "usable_bytes": self.memory.usable_bytes,
            "free_bytes": self.memory.free_bytes,
            "free_fraction": self.memory.free_bytes / self.memory.capacity_bytes,
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


__all__ = [
    "FINETUNE_FLOPS",
    "SCHEMA",
    "CostBreakdown",
    "Estimate",
    "MemoryBreakdown",
    "StageResult",
    "TimeBreakdown",
    "async_tp_applies",
]
