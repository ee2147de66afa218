"""One row of an evaluation as the typed Estimate: its memory, time and cost breakdowns with their
bands, its stages and the warnings the plan deserves."""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.estimate.bands import (
    BAND_CROSS_FAMILY,
    BAND_LOSO,
    band_factors,
    band_outside,
    uncalibrated_family_warning,
)
from trilemma.estimate.capacity import host_memory_bytes, memory_headroom
from trilemma.estimate.cost import homes_powered, household_years
from trilemma.estimate.evaluate import Evaluation
from trilemma.estimate.goodput import node_count
from trilemma.estimate.goodput import resolve as resolve_reliability
from trilemma.estimate.layouts import batch_sequences
from trilemma.estimate.params import ParamCounts
from trilemma.estimate.result import (
    CostBreakdown,
    Estimate,
    MemoryBreakdown,
    StageResult,
    TimeBreakdown,
    async_tp_applies,
)
from trilemma.specs import ClusterSpec, ModelSpec, TrainingPlan
from trilemma.specs.constants import Constants
from trilemma.units import KWH


def finetune_block(
    m: ModelSpec, pc: ParamCounts, pl: TrainingPlan, host_bytes: float, host_capacity: float
) -> dict:
    """The ``finetune`` block of the JSON: method, what trains (exact, PEFT's count), adapters, the base's
    storage, optimizer, offload with host memory, and why there is no loss."""
    from trilemma.estimate.finetune import (
        FINETUNE_NO_LOSS,
        gptq4_bits_per_weight,
        nf4_bits_per_weight,
        trainable_params,
    )

    ft = pl.finetune
    n = trainable_params(m, pc, ft)
    bits = {
        "bf16": 16.0,
        "fp16": 16.0,
        "int8": 8.0,
        "nf4": nf4_bits_per_weight(ft.double_quant),
        "gptq4": gptq4_bits_per_weight(),
    }[ft.base_precision.value]
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
        "the straggler share (each step's wait for the slowest GPU), charged to pre-training runs, is not applied",
    }


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


def _memory_breakdown(
    cl: ClusterSpec, ev: Evaluation, i: int, consts: Constants
) -> MemoryBreakdown:
    """Row ``i``'s memory on the stage that needs the most, with its 80% band and host memory."""
    # memory: report the stage that needs the most
    m_lo, m_hi = band_factors("memory")
    k_mem = int(np.argmax([_f(s.memory.total, i) for s in ev.stages]))
    mm = ev.stages[k_mem].memory
    host_cap = host_memory_bytes(cl, consts) / min(cl.n_gpus, cl.node_size)
    return MemoryBreakdown(
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
        reference=_f(mm.reference_bytes, i),
        generation=_f(mm.generation_bytes, i),
        reward=_f(mm.reward_bytes, i),
        critic=_f(mm.critic_bytes, i),
        teacher=_f(mm.teacher_bytes, i),
        host_bytes=_f(mm.host_bytes, i),
        host_capacity_bytes=host_cap,
        per_gpu_bytes_low=_f(ev.per_gpu_bytes, i) * m_lo,
        per_gpu_bytes_high=_f(ev.per_gpu_bytes, i) * m_hi,
    )


def _bands(cl: ClusterSpec, pl: TrainingPlan, pc: ParamCounts) -> tuple:
    """(low, high, reasons) of a run's time and (low, high) of a step's: the calibration's 80% band,
    widened outside the calibrated regime (bands.band_outside)."""
    # a fine-tune (TrainingPlan.finetune, where the plan has one): no calibrated row is one
    ft = getattr(pl, "finetune", None) is not None
    nodes = node_count(
        cl.n_gpus, cl.node_size
    )  # as whole runs' nodes are counted (--gpus-per-node too)
    given = pl.stack is not None
    name = pl.stack.name if given else None  # a stack no calibration row ran: widened as none named
    lo, hi, reasons = band_outside(
        cl.hardware.family,
        cl.n_gpus,
        pc.total,
        str(pl.precision),
        finetune=ft,
        nodes=nodes,
        stack_given=given,
        stack=name,
    )
    s_lo, s_hi, _ = band_outside(
        cl.hardware.family,
        cl.n_gpus,
        pc.total,
        str(pl.precision),
        "throughput",
        ft,
        None,
        given,
        name,
    )
    return lo, hi, reasons, s_lo, s_hi


def _time_breakdown(ev: Evaluation, i: int, t: Any, bands: tuple) -> TimeBreakdown:
    """Row ``i``'s time: step, run, goodput and the step's parts (``t``: the main stage's TimeArrays)."""
    lo, hi, reasons, s_lo, s_hi = bands
    total, hours = _f(ev.total_s, i), _f(ev.cost.gpu_hours, i)
    return TimeBreakdown(
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


def _cost_breakdown(
    cl: ClusterSpec, ev: Evaluation, i: int, consts: Constants, lo: float, hi: float
) -> CostBreakdown:
    """Row ``i``'s dollars, energy and CO2 with the run's band (``lo``, ``hi``)."""
    usd = _f(ev.cost.usd, i)
    energy_j = _f(ev.cost.energy_j, i)
    hw = cl.hardware
    return CostBreakdown(
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


def _stage_results(pl: TrainingPlan, ev: Evaluation, i: int) -> tuple[StageResult, ...]:
    return tuple(
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


def _warnings(
    cl: ClusterSpec,
    pl: TrainingPlan,
    pc: ParamCounts,
    lay: Any,
    stages: tuple[StageResult, ...],
    bands: tuple,
) -> tuple[str, ...]:
    """What the plan deserves to be told: a rounded batch, async TP without effect, TP across nodes,
    fp16 stability, an uncalibrated chip family, a plan outside the calibrated regime, a price."""
    lo, hi, reasons = bands[:3]
    hw = cl.hardware
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
    if cl.price_usd_per_hour is None and hw.price_date and not hw.price_provider:
        warnings.append(
            f"price ${cl.price:.2f}/GPU-hour is the {hw.name} reference of {hw.price_date}; set --price for yours"
        )
    return tuple(warnings)


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
    memory = _memory_breakdown(cl, ev, i, consts)
    bands = _bands(cl, pl, pc)
    stages = _stage_results(pl, ev, i)
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
        time=_time_breakdown(ev, i, ev.stages[main].time, bands),
        cost=_cost_breakdown(cl, ev, i, consts, bands[0], bands[1]),
        stages=stages,
        candidates_evaluated=len(ev.layouts),
        warnings=_warnings(cl, pl, pc, lay, stages, bands),
        finetune=None
        if pl.finetune is None
        else finetune_block(m, pc, pl, memory.host_bytes, memory.host_capacity_bytes),
    )


__all__ = ["finetune_block", "from_evaluation"]
