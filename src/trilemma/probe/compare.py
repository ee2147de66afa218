"""The planner's prediction for a probe run and the measured figures set beside it (``run_probe``'s
prediction side): the planner's own API, nothing fitted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trilemma.specs import Layout, ModelSpec, Recompute

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.estimate.result import Estimate
    from trilemma.probe.result import Comparison, Measured, Predicted
    from trilemma.probe.train import Job
    from trilemma.specs.hardware import HardwareSpec

__all__ = ["comparison", "finetune_info", "measured", "predict", "predicted"]


def predict(
    spec: ModelSpec,
    hw: HardwareSpec,
    nproc: int,
    seq: int,
    micro_batch: int,
    grad_accum: int,
    steps: int,
    precision: str,
    recompute: str,
    fsdp: bool,
    finetune: Any = None,
) -> tuple[Estimate, Layout]:
    """The planner's Estimate for this exact run (its own API, nothing fitted) and its layout:
    ``nproc`` data-parallel processes, ``seq`` tokens × ``micro_batch`` sequences × ``grad_accum``
    micro-batches per process and step, ``steps`` optimizer steps; ``finetune`` a FinetuneSpec (the probe's
    PEFT fine-tune: its base stored as the run computes, fp32 on a CPU)."""
    from trilemma.estimate.choose import evaluate_layout
    from trilemma.resolve import make_cluster, make_plan
    from trilemma.specs import DtypeSpec

    gbt = float(seq * micro_batch * grad_accum * nproc)
    # autocast keeps fp32 weights, gradients and Adam states; only activations are half precision
    act = "fp32" if precision == "fp32" else precision
    dtypes = DtypeSpec(
        weight="fp32",
        grad="fp32",
        master=None,
        optimizer_state="fp32",
        frozen_weight="fp32",
        activation=act,
    )
    plan = make_plan(
        spec,
        tokens=gbt * max(steps, 1),
        seq_len=seq,
        global_batch_tokens=gbt,
        precision=precision,
        flash_attention=True,
        dtypes=dtypes,
        **({"finetune": finetune} if finetune is not None else {}),
    )
    layout = Layout(
        tp=1,
        pp=1,
        dp=nproc,
        zero=3 if fsdp else 0,
        recompute=Recompute(recompute),
        micro_batch=micro_batch,
    )
    cluster = make_cluster(hw, nproc, gpus_per_node=nproc)
    return evaluate_layout(spec, cluster, plan, layout), layout


def predicted(est: Estimate) -> Predicted:
    """The figures of ``est`` the probe compares (seconds, tokens/s, bytes per process)."""
    from trilemma.probe.result import Predicted

    # the GPU framework overhead (CUDA context, NCCL, the residual) is not training memory; a CPU profile's
    # measured runtime overhead is: the process grows by it when it trains (trilemma.estimate.evaluate)
    m = est.memory
    overhead = 0.0 if est.cluster.is_cpu else m.cuda_context + m.nccl + m.framework_residual
    return Predicted(
        hardware=est.cluster.hardware.name,
        step_time_s=est.time.step_s,
        tokens_per_s=est.time.tokens_per_s,
        memory_bytes=m.per_gpu_bytes,
        memory_training_bytes=max(m.per_gpu_bytes - overhead, 0.0),
        framework_overhead_bytes=overhead,
        mfu=est.time.mfu,
        compute_s=est.time.compute_s,
        dp_comm_s=est.time.dp_comm_s,
        optimizer_s=est.time.optimizer_s,
        host_s=est.time.ops_s.get("host", 0.0),
        memory_breakdown={
            "weights": m.weights,
            "gradients": m.gradients,
            "optimizer": m.optimizer,
            "activations": m.activations,
            "other": m.other,
        },
    )


def measured(
    raw: dict[str, Any],
    job: Job,
    spec: ModelSpec,
    nproc: int,
    peak: float,
    datasheet: HardwareSpec | None,
) -> Measured:
    """Rank 0's raw figures as Measured: step times past the warm-up, tokens/s, MFU and HFU against
    ``peak`` (the measured matmul FLOP/s of one process) and the ``datasheet``'s, memory in bytes."""
    from trilemma.estimate.flops import hardware_flop_per_token, model_flop_per_token
    from trilemma.probe.result import Measured, StepStats

    times = raw["step_s"][job.warmup :]
    stats = StepStats.of(times)
    tokens = job.seq * job.micro_batch * job.grad_accum * nproc
    mfpt = float(model_flop_per_token(spec, job.seq))
    hfpt = float(hardware_flop_per_token(spec, job.seq, Recompute(job.recompute)))
    tps = tokens / stats.median_s if stats else None
    per_proc = None if tps is None else tps / nproc * mfpt
    sheet_peak = (
        datasheet.peak(job.precision)
        if datasheet is not None and job.precision in {str(p) for p in datasheet.peak_flop_per_s}
        else None
    )
    losses = raw["losses"]
    mem = raw["memory"]
    return Measured(
        step_time=stats,
        tokens_per_s=tps,
        model_flop_per_token=mfpt,
        hardware_flop_per_token=hfpt,
        model_flop_per_s=per_proc,
        mfu=None if per_proc is None else per_proc / peak,
        hfu=None if per_proc is None else per_proc * hfpt / mfpt / peak,
        peak_flop_per_s=peak,
        mfu_datasheet=None if per_proc is None or sheet_peak is None else per_proc / sheet_peak,
        datasheet=None if datasheet is None else datasheet.name,
        memory_bytes=mem["peak_bytes"],
        memory_training_bytes=mem["training_bytes"],
        memory_baseline_bytes=mem["baseline_bytes"],
        memory_kind=mem["kind"],
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        train_loss=sum(losses[-5:]) / len(losses[-5:]) if losses else None,
        eval_loss=raw["eval_loss"],
        params=int(raw["params_measured"]),
    )


def comparison(pred: Predicted, meas: Measured) -> dict[str, Comparison]:
    """Predicted / measured for step time (s), tokens/s and memory (bytes), where it was measured. On a CPU
    the measured memory per process is the whole resident set, interpreter and libraries included: its
    prediction is that runtime baseline, measured before training (the same for every plan, not something
    the planner predicts), plus the planner's total; ``memory_training`` compares the planner alone."""
    from trilemma.probe.result import Comparison

    out = {}
    pairs = [
        ("step_time", pred.step_time_s, meas.step_time.median_s if meas.step_time else None),
        ("tokens_per_s", pred.tokens_per_s, meas.tokens_per_s),
        ("memory", pred.memory_bytes + (meas.memory_baseline_bytes or 0.0), meas.memory_bytes),
        ("memory_training", pred.memory_training_bytes, meas.memory_training_bytes),
    ]
    for k, p, m in pairs:
        if m:
            out[k] = Comparison(predicted=float(p), measured=float(m), ratio=float(p) / float(m))
    return out


def finetune_info(
    ft: Any, est: Estimate, raw: dict[str, Any], warnings: list[str]
) -> dict[str, Any]:
    """The fine-tune's settings and its trainable parameters, counted by PEFT in the run and by the planner; a mismatch is appended to ``warnings``."""
    planner = est.finetune["trainable_params"] if est.finetune else None
    measured_n = raw.get("trainable_measured")
    if measured_n is not None and planner is not None and int(measured_n) != int(planner):
        warnings.append(
            f"PEFT trains {int(measured_n):,} parameters, the planner counts {int(planner):,}"
        )
    return {
        "method": ft.method.value,
        "lora_rank": ft.lora_rank if ft.adapters else None,
        "lora_alpha": ft.lora_alpha if ft.adapters else None,
        "lora_targets": list(ft.targets) if ft.adapters else None,
        "trainable_layers": ft.trainable_layers,
        "trainable_params_measured": measured_n,
        "trainable_params_planner": planner,
        "base": "Hugging Face LlamaForCausalLM built from the spec (random weights), stored in the run's precision",
    }
