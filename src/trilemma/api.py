"""The Python API behind the CLI: resolve inputs, evaluate, pick a layout, return a typed result.

    >>> from trilemma import estimate
    >>> est = estimate("llama2-7b", "a100-80gb", n_gpus=64, tokens=2e12)
    >>> est.time.total_s, est.memory.fits
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trilemma.errors import InputError, LayoutError
from trilemma.estimate.cost import household_years
from trilemma.estimate.evaluate import Evaluation, best_row, evaluate
from trilemma.estimate.layouts import R_DP_TOO_LARGE, R_OOM, LayoutArrays, batch_sequences, candidate_layouts, reason_text
from trilemma.presets import calibration, constants, get_hardware, get_model, is_model_preset, regions
from trilemma.specs import (ClusterSpec, DtypeSpec, HardwareSpec, Layout, ModelSpec, Precision, Recompute, Stage,
                            TrainingPlan)
from trilemma.units import parse_count

SCHEMA = "trilemma.estimate/1"
LAYOUT_AXES = ("tp", "pp", "dp", "cp", "ep", "vp", "zero", "recompute", "micro_batch")


# ------------------------------------------------------------------ input resolution

def resolve_model(spec: str | ModelSpec) -> tuple[ModelSpec, str]:
    """A preset name, a path to a Hugging Face config.json (or its folder), or a size like ``3B``.

    Returns the model and a sentence saying how it was resolved.
    """
    if isinstance(spec, ModelSpec):
        return spec, "given"
    text = str(spec).strip()
    if is_model_preset(text):
        m = get_model(text)
        return m, f"preset {m.name}"
    if os.path.exists(text) or text.endswith(".json"):
        from trilemma.hf import model_from_hf_config
        m = model_from_hf_config(text)
        return m, f"Hugging Face config {text}"
    if text[:1].isdigit():
        from trilemma.shape import model_for_params
        target = parse_count(text, "model")
        m = model_for_params(target)
        return m, f"shape rule for {text}: {m.name}"
    return get_model(text), ""  # raises UnknownPresetError with suggestions


def resolve_hardware(spec: str | HardwareSpec) -> HardwareSpec:
    return spec if isinstance(spec, HardwareSpec) else get_hardware(spec)


def grid_intensity(region: str | float | None) -> float:
    """kg CO2e per kWh from a region preset name or a number."""
    if region is None:
        region = constants()["energy"]["default_region"]
    if isinstance(region, (int, float)):
        return float(region)
    try:
        return float(region)
    except ValueError:
        pass
    table = regions()
    key = region.strip().lower()
    if key not in table:
        raise InputError("region", region, "a number (kg CO2e/kWh) or one of " + ", ".join(table))
    return float(table[key]["kg_co2_per_kwh"])


# ------------------------------------------------------------------ results

@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device on the stage that needs the most."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    other: float  # logits, framework overhead, fragmentation
    per_gpu_bytes: float
    capacity_bytes: float

    @property
    def fits(self) -> bool:
        return self.per_gpu_bytes <= self.capacity_bytes


@dataclass(frozen=True)
class TimeBreakdown:
    step_s: float  # one optimizer step over the global batch
    tokens_per_s: float  # while training, whole cluster
    mfu: float  # model FLOPs utilisation, 0-1 (PaLM convention)
    hfu: float  # hardware FLOPs utilisation, 0-1 (with recomputation)
    steps: float
    busy_s: float  # Σ steps × step time
    total_s: float  # busy / goodput
    total_s_low: float  # 80% band from the leave-one-source-out backtest (trilemma validate)
    total_s_high: float
    goodput: float
    gpu_hours: float
    gpu_hours_low: float
    gpu_hours_high: float
    compute_s: float  # per step
    tp_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float
    optimizer_s: float


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

    model: ModelSpec
    model_resolution: str
    cluster: ClusterSpec
    plan: TrainingPlan
    layout: Layout
    layout_chosen: str  # "auto" (fastest that fits) or "given"
    params: dict[str, int]
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
    loss: dict[str, Any] | None = None  # trilemma.quality.predict.loss_block

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (stable keys, SI units, fractions 0-1)."""
        m, hw = self.model, self.cluster.hardware
        lay = self.layout.model_dump(mode="json")
        lay.update(n_gpus=self.cluster.n_gpus, chosen=self.layout_chosen, candidates_evaluated=self.candidates_evaluated)
        return {
            "schema": SCHEMA,
            "model": {"name": m.name, "resolved_from": self.model_resolution, "source": m.source,
                      "params_total": self.params["total"], "params_active": self.params["active"],
                      "params_embedding": self.params["embedding"],
                      "params_non_embedding": self.params["non_embedding"],
                      "n_layers": m.n_layers, "d_model": m.d_model, "n_heads": m.n_heads,
                      "n_kv_heads": m.kv_heads, "ffn_dim": m.ffn_dim, "vocab_size": m.vocab_size,
                      "n_experts": m.n_experts, "top_k": m.top_k},
            "hardware": {"name": hw.name, "n_gpus": self.cluster.n_gpus, "gpus_per_node": self.cluster.node_size,
                         "peak_flop_per_s": hw.peak(self.plan.precision), "precision": str(self.plan.precision),
                         "intra_node_bw_bytes_per_s": self.cluster.intra_bw,
                         "inter_node_bw_bytes_per_s": self.cluster.inter_bw},
            "flops": {"convention": "palm (6·N_matmul + 12·L·s·d_attn per token, no causal discount)",
                      "model_per_token": self.model_flop_per_token,
                      "hardware_per_token": self.hardware_flop_per_token,
                      "total_model": self.total_model_flop, "total_hardware": self.total_hardware_flop},
            "layout": lay,
            "batch": {"tokens": self.plan.total_tokens, "stages": [asdict(s) for s in self.stages]},
            "memory": {"per_gpu_bytes": self.memory.per_gpu_bytes, "capacity_bytes": self.memory.capacity_bytes,
                       "fits": self.memory.fits,
                       "breakdown": {"weights": self.memory.weights, "gradients": self.memory.gradients,
                                     "optimizer": self.memory.optimizer, "activations": self.memory.activations,
                                     "other": self.memory.other}},
            "time": asdict(self.time),
            "cost": asdict(self.cost),
            **({"loss": self.loss} if self.loss is not None else {}),
            "warnings": list(self.warnings),
        }


# ------------------------------------------------------------------ the entry point

def make_plan(model: ModelSpec, tokens: float | None = None, seq_len: int | None = None,
              global_batch_tokens: float | None = None, precision: Precision | str = Precision.BF16,
              stages: list[Stage] | None = None, **plan_fields: Any) -> TrainingPlan:
    """A TrainingPlan from flags, falling back on the model's published recipe."""
    if stages is None:
        seq = seq_len or model.seq_len or 2048
        if tokens is None:
            if model.tokens is None:
                raise InputError("tokens", None, f"a token count such as --tokens 2T ({model.name} has no published default)")
            tokens = model.tokens
        explicit = global_batch_tokens is not None
        gbt = global_batch_tokens if explicit else (model.global_batch_tokens or 512 * seq)
        stages = [Stage.build(prefix="plan", tokens=tokens, seq_len=seq, global_batch_tokens=gbt, explicit_batch=explicit)]
    prec = Precision(precision) if not isinstance(precision, Precision) else precision
    plan_fields.setdefault("dtypes", DtypeSpec.for_precision(prec))
    plan_fields.setdefault("goodput", constants()["run"]["goodput"])
    return TrainingPlan.build(prefix="plan", stages=tuple(stages), precision=prec, **plan_fields)


def make_cluster(hardware: str | HardwareSpec, n_gpus: int, **fields: Any) -> ClusterSpec:
    e = constants()["energy"]
    region = fields.pop("region", None)
    fields.setdefault("pue", e["pue"])
    fields.setdefault("power_fraction", e["power_fraction"])
    fields.setdefault("host_power_fraction", e["host_power_fraction"])
    fields.setdefault("grid_kg_co2_per_kwh", grid_intensity(region))
    fields = {k: v for k, v in fields.items() if v is not None}
    return ClusterSpec.build(prefix="cluster", hardware=resolve_hardware(hardware), n_gpus=n_gpus, **fields)


def estimate(model: str | ModelSpec, hardware: str | HardwareSpec, n_gpus: int, tokens: float | None = None,
             *, seq_len: int | None = None, global_batch_tokens: float | None = None,
             precision: Precision | str = Precision.BF16, layout: Layout | dict | None = None,
             cluster: dict | None = None, plan: TrainingPlan | None = None, law: str | None = None,
             unique_tokens: float | None = None) -> Estimate:
    """Estimate one training plan. ``layout`` pins any axes (a Layout pins them all); the rest are
    searched and the fastest legal layout that fits in memory is returned. The loss corner comes
    from ``law`` (default: trilemma.quality.laws.DEFAULT_LAW), with repetition over ``unique_tokens``."""
    if not isinstance(n_gpus, (int, np.integer)) or n_gpus <= 0:
        raise InputError("gpus", n_gpus, "a positive whole number of devices")
    m, how = resolve_model(model)
    cl = make_cluster(hardware, int(n_gpus), **(cluster or {}))
    pl = plan or make_plan(m, tokens, seq_len, global_batch_tokens, precision)
    cl.hardware.peak(pl.precision)  # clear error if the chip lacks this precision
    return with_loss(estimate_plan(m, cl, pl, layout, how), law, unique_tokens)


def with_loss(est: Estimate, law: str | None = None, unique_tokens: float | None = None) -> Estimate:
    """The estimate with its quality corner: predicted loss with a band (trilemma.quality)."""
    from dataclasses import replace

    from trilemma.quality.predict import loss_block

    block = loss_block(est.model, est.plan.total_tokens, law=law, unique_tokens=unique_tokens,
                       precision=str(est.plan.precision))
    return replace(est, loss=block, warnings=est.warnings + tuple(block.get("warnings", ())))


def estimate_plan(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout | dict | None = None,
                  how: str = "given") -> Estimate:
    if isinstance(layout, Layout):
        pinned = layout.model_dump()
        pinned["sp"] = int(layout.sp)
    else:
        pinned = {k: v for k, v in (layout or {}).items() if v is not None}
        if "sp" in pinned:
            pinned["sp"] = int(bool(pinned["sp"]))
    for k, v in pinned.items():
        if k in ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch") and (not isinstance(v, (int, np.integer)) or v < 1):
            raise InputError(k, v, "a positive whole number")
        if k == "zero" and v not in (0, 1, 2, 3):
            raise InputError("zero", v, "0, 1, 2 or 3")
        if k == "recompute":
            try:
                Recompute(v)
            except ValueError:
                raise InputError("recompute", v, "none, selective or full") from None
    max_seq = max(s.seq_len for s in pl.stages)
    cands = candidate_layouts(m, cl.n_gpus, cl.node_size, pinned, max_seq)
    if len(cands) == 0:
        raise LayoutError(_no_candidates_message(m, cl, pinned))
    ev = evaluate(m, cl, pl, cands)
    i = best_row(ev)
    if i is None:
        raise LayoutError(_explain_failure(m, cl, pl, ev, pinned))
    return _result(m, how, cl, pl, ev, i, "given" if pinned else "auto")


def evaluate_layout(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, layout: Layout) -> Estimate:
    """All corners of one fully given layout, even when it does not fit (``memory.fits`` is then
    False); raises LayoutError only when the layout is illegal for reasons other than memory."""
    ev = evaluate(m, cl, pl, LayoutArrays.from_layouts([layout]))
    bits = int(ev.reasons[0]) & ~R_OOM
    if bits:
        raise LayoutError(f"layout: {_lay(layout)} cannot run: " + "; ".join(reason_text(bits)))
    return _result(m, "given", cl, pl, ev, 0, "given")


def _no_candidates_message(m: ModelSpec, cl: ClusterSpec, pinned: dict) -> str:
    tp, pp, cp = pinned.get("tp", 1), pinned.get("pp", 1), pinned.get("cp", 1)
    if "dp" in pinned and cl.n_gpus % (tp * pp * cp) == 0:
        return (f"layout: tp={tp} × cp={cp} × pp={pp} × dp={pinned['dp']} = {tp * cp * pp * pinned['dp']} "
                f"is not the {cl.n_gpus} GPUs (tp × cp × pp × dp must equal the GPU count)")
    return (f"layout: tp={tp} × cp={cp} × pp={pp} does not divide {cl.n_gpus} GPUs "
            f"(tp × cp × pp × dp must equal the GPU count)")


def _explain_failure(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan, ev: Evaluation, pinned: dict) -> str:
    bits = ev.reasons
    only_oom = bits == R_OOM
    gib = 2.0**30
    where = f"{m.name} on {cl.n_gpus}× {cl.hardware.name}"
    if only_oom.any():  # legal layouts exist, none fits: show the leanest
        j = int(np.argmin(np.where(only_oom, ev.per_gpu_bytes, np.inf)))
        lay = ev.layouts.row(j)
        msg = (f"memory: no {'given ' if pinned else ''}layout of {where} fits: the leanest, {_lay(lay)}, needs "
               f"{ev.per_gpu_bytes[j] / gib:.1f} GiB per GPU and {cl.hardware.name} has {cl.hardware.hbm_bytes / gib:.0f} GiB")
    else:  # the candidate with the fewest problems stands for "why"
        nbits = np.array([bin(int(b)).count("1") for b in bits])
        j = int(np.argmin(nbits))
        lay = ev.layouts.row(j)
        msg = (f"layout: no {'given ' if pinned else ''}layout of {where} is legal; closest is {_lay(lay)}: "
               + "; ".join(reason_text(int(bits[j]))))
    if pinned:
        try:
            alt = estimate_plan(m, cl, pl, None)
            msg += f". What would work: {_lay(alt.layout)} ({alt.memory.per_gpu_bytes / gib:.1f} GiB per GPU)"
        except LayoutError:
            msg += ". No layout works on this cluster: use more GPUs, a larger-memory device or a smaller model"
    elif only_oom.any():
        msg += ". Use more GPUs, a larger-memory device, a shorter sequence or a smaller model"
    elif (bits & R_DP_TOO_LARGE).all():
        msg += ". Use fewer GPUs or a larger global batch"
    return msg


def _lay(a: Layout) -> str:
    return (f"tp={a.tp} pp={a.pp} dp={a.dp}" + (f" cp={a.cp}" if a.cp > 1 else "") + (f" ep={a.ep}" if a.ep > 1 else "")
            + (f" vp={a.vp}" if a.vp > 1 else "") + f" zero={a.zero} recompute={a.recompute} micro_batch={a.micro_batch}")


def band_factors() -> tuple[float, float]:
    """Multipliers (low, high) for an 80% interval on time and cost: from the leave-one-source-out
    residuals r = log(predicted / reported) of the last calibration, low = exp(−q90), high = exp(−q10)."""
    b = calibration().get("bands", {})
    if not b:
        return 1.0, 1.0
    return math.exp(-b["time_log_q90"]), math.exp(-b["time_log_q10"])


def _f(a: Any, i: int) -> float:
    return float(np.asarray(a)[i]) if np.ndim(a) else float(a)


def _result(m: ModelSpec, how: str, cl: ClusterSpec, pl: TrainingPlan, ev: Evaluation, i: int,
            chosen: str) -> Estimate:
    lay = ev.layouts.row(i)
    pc = ev.params
    # the stage with most tokens stands for the run in the top-level time/memory figures
    main = max(range(len(pl.stages)), key=lambda k: pl.stages[k].tokens)
    sa = ev.stages[main]
    # memory: report the stage that needs the most
    k_mem = int(np.argmax([_f(s.memory.total, i) for s in ev.stages]))
    mm = ev.stages[k_mem].memory
    memory = MemoryBreakdown(weights=_f(mm.weights, i), gradients=_f(mm.gradients, i), optimizer=_f(mm.optimizer, i),
                             activations=_f(mm.activations, i), other=_f(mm.other, i),
                             per_gpu_bytes=_f(ev.per_gpu_bytes, i), capacity_bytes=cl.hardware.hbm_bytes)
    t = sa.time
    lo, hi = band_factors()
    total, hours, usd = _f(ev.total_s, i), _f(ev.cost.gpu_hours, i), _f(ev.cost.usd, i)
    time = TimeBreakdown(step_s=_f(t.step_s, i), tokens_per_s=_f(ev.tokens_per_s, i), mfu=_f(ev.mfu, i),
                         hfu=_f(ev.hfu, i), steps=sum(_f(s.steps, i) for s in ev.stages), busy_s=_f(ev.busy_s, i),
                         total_s=total, total_s_low=total * lo, total_s_high=total * hi, goodput=pl.goodput,
                         gpu_hours=hours, gpu_hours_low=hours * lo, gpu_hours_high=hours * hi,
                         compute_s=_f(t.compute_s, i), tp_comm_s=_f(t.tp_comm_s, i), pp_comm_s=_f(t.pp_comm_s, i),
                         bubble_s=_f(t.bubble_s, i), dp_comm_s=_f(t.dp_comm_s, i), optimizer_s=_f(t.optimizer_s, i))
    energy_j = _f(ev.cost.energy_j, i)
    hw = cl.hardware
    cost = CostBreakdown(usd=usd, usd_low=usd * lo, usd_high=usd * hi, price_usd_per_gpu_hour=cl.price,
                         price_date=hw.price_date if cl.price_usd_per_hour is None else "user",
                         price_source=hw.price_source if cl.price_usd_per_hour is None else "user",
                         energy_kwh=energy_j / 3.6e6, co2_kg=_f(ev.cost.co2_kg, i),
                         household_years=float(household_years(energy_j, constants()["energy"]["household_kwh_per_year"])),
                         pue=cl.pue, grid_kg_co2_per_kwh=cl.grid_kg_co2_per_kwh)
    stages = tuple(StageResult(tokens=s.tokens, seq_len=s.seq_len, global_batch_sequences=int(_f(a.batch_seqs, i)),
                               global_batch_tokens=_f(a.batch_seqs, i) * s.seq_len, micro_batches=_f(a.n_micro, i),
                               steps=_f(a.steps, i), step_s=_f(a.time.step_s, i), per_gpu_bytes=_f(a.memory.total, i))
                   for s, a in zip(pl.stages, ev.stages))
    warnings = []
    for s, a in zip(pl.stages, stages):
        target = batch_sequences(s)
        if a.global_batch_sequences != target:
            warnings.append(f"global batch rounded from {target} to {a.global_batch_sequences} sequences "
                            f"(a multiple of dp × micro-batch = {lay.dp} × {lay.micro_batch})")
    if lay.tp > cl.node_size:
        warnings.append(f"tensor parallelism ({lay.tp}) spans nodes of {cl.node_size} devices: slow inter-node all-reduces")
    if cl.price_usd_per_hour is None and hw.price_date:
        warnings.append(f"price ${cl.price:.2f}/GPU-hour is the {hw.name} reference of {hw.price_date}; set --price for yours")
    mfpt = float(ev.model_flop) / pl.total_tokens
    hfpt = _f(ev.hardware_flop, i) / pl.total_tokens
    return Estimate(model=m, model_resolution=how, cluster=cl, plan=pl, layout=lay, layout_chosen=chosen,
                    params=pc.to_dict(), model_flop_per_token=mfpt, hardware_flop_per_token=hfpt,
                    total_model_flop=float(ev.model_flop), total_hardware_flop=_f(ev.hardware_flop, i), memory=memory,
                    time=time, cost=cost, stages=stages, candidates_evaluated=len(ev.layouts),
                    warnings=tuple(warnings))


__all__ = ["Estimate", "estimate", "estimate_plan", "evaluate_layout", "make_cluster", "make_plan",
           "resolve_model", "resolve_hardware", "with_loss"]
