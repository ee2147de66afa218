"""``run_probe``: measure real training on this machine and set it beside the planner's prediction.

1. Resolve the model (default: a small GPT-2-style model; a preset, scaled down by any of
   layers / d_model / heads / kv_heads / ffn / vocab; or a Hugging Face config.json).
2. Measure the machine (matmul FLOP/s against size per precision, memory bandwidth, loopback
   link; with ``nproc`` > 1 on a CPU, gloo's all-reduce between two processes; cached) and save it
   as the hardware profile ``local``.
3. Predict with the planner's own API: ``evaluate_layout(model, make_cluster(local, nproc),
   make_plan(...), Layout(dp=nproc, zero=0 or 3, recompute, micro_batch))``.
4. Train: in this process, or ``nproc`` processes through torchrun (DDP or FSDP; gloo on a CPU,
   NCCL on GPUs), and with ``nproc`` > 1 also one process at the same threads per process, for
   the scaling efficiency.
5. Compare: predicted / measured step time, tokens/s and memory.

The comparison tests the planner; nothing measured here feeds back into its constants.
Step 1 lives in ``probe.inputs`` and ``probe.run_inputs`` (with 2), 3 and 5 in ``probe.compare``,
4 in ``probe.launch``.
"""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError
from trilemma.probe import machine as host
from trilemma.probe import run_inputs
from trilemma.probe.compare import comparison, finetune_info, measured, predict, predicted
from trilemma.probe.inputs import DEFAULTS, probe_model
from trilemma.probe.launch import launch as _launch  # the name tests know it by
from trilemma.probe.launch import median_step, train
from trilemma.specs import Layout, ModelSpec
from trilemma.units import GIB

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.estimate.result import Estimate
    from trilemma.probe.result import Measured, Predicted, ProbeResult, Scaling
    from trilemma.probe.train import Job
    from trilemma.request.probe import ProbeRequest

__all__ = ["DEFAULTS", "probe_model", "run_probe"]

log = logging.getLogger(__name__)

#: a bf16 run on a CPU without a native bf16 path must promise to end in this time, seconds
TINY_BF16_S = 120.0


# ------------------------------------------------------------------ the steps of a run


@dataclass
class _Setup:
    """One run's resolved inputs: the model, the job each process runs, the machine, and the warnings so far."""

    spec: ModelSpec
    how: str  # how the model was chosen
    job: Job
    nproc: int  # training processes
    machine: run_inputs.Machine
    warnings: list[str]
    finetune: Any = None  # a FinetuneSpec (--finetune), else None


def _prediction(s: _Setup) -> tuple[Estimate, Layout, Predicted]:
    """The planner's prediction for the run; InputError, before anything big is allocated, for a CPU
    run predicted not to fit in 90% of the available memory (bytes) or a half-precision CPU run
    without a native path that would take more than TINY_BF16_S seconds of matmuls."""
    job, meas = s.job, s.machine.whole
    est, layout = predict(
        s.spec,
        s.machine.hw,
        s.nproc,
        job.seq,
        job.micro_batch,
        job.grad_accum,
        job.steps,
        job.precision,
        job.recompute,
        job.fsdp,
        s.finetune,
    )
    pred = predicted(est)
    if job.device == "cpu":
        avail = host.available_memory()
        if pred.memory_training_bytes * s.nproc > 0.9 * avail:
            raise InputError(
                "memory",
                f"{s.spec.name}, micro-batch {job.micro_batch}, seq {job.seq}, {s.nproc} "
                "process(es)",
                f"a run that fits: the planner predicts {pred.memory_training_bytes / GIB:.1f} GiB per "
                f"process and {avail / GIB:.1f} GiB is available; scale the model down (--layers, "
                "--d-model), use a smaller --micro-batch or --seq, or --recompute full",
            )
        if job.precision != "fp32" and meas.peak(job.precision) < meas.peak("fp32"):
            est_s = (
                job.steps
                * job.micro_batch
                * job.grad_accum
                * job.seq
                * s.nproc
                * est.hardware_flop_per_token
                / meas.peak(job.precision)
            )
            if est_s > TINY_BF16_S:
                raise InputError(
                    "precision",
                    job.precision,
                    f"fp32 on this CPU, or a tiny model: without a native {job.precision} path this run "
                    f"would take about {est_s:.0f} s of {job.precision} matmuls (limit {TINY_BF16_S:.0f} s)",
                )
    elif pred.memory_bytes > meas.memory_bytes:
        s.warnings.append(
            f"the planner predicts {pred.memory_bytes / GIB:.1f} GiB per GPU, more than the "
            f"{meas.memory_bytes / GIB:.1f} GiB this GPU has"
        )
    return est, layout, pred


def _training(s: _Setup) -> tuple[dict[str, Any], float, float | None]:
    """Train: (rank 0's raw figures, wall time in s, share of the CPU time other processes used, 0 to 1)."""
    meter = host.OtherLoad(s.machine.cores)
    raw = train(s.job, s.nproc, quiet=not s.job.progress)
    wall = meter.wall()
    others = meter.share()
    if raw["interrupted"]:
        s.warnings.append(
            f"interrupted after {len(raw['step_s'])} of {s.job.steps} steps: figures cover the steps done"
        )
    if raw["memory"].get("trained_before"):
        s.warnings.append(
            "this process trained on the CPU before: glibc's heap keeps the blocks that run freed and "
            "serves this run's tensors from them, so freed memory stays resident and the measured "
            "memory is an upper bound; a fresh process (each `trilemma probe` command) measures it"
        )
    if len(raw["step_s"]) <= s.job.warmup:
        s.warnings.append("no step after the warm-up finished: no steady-state figures")
    if s.job.device == "cpu" and others is not None and others > host.BUSY:
        s.machine.busy.append(f"during training: other processes used {others:.0%} of the CPU time")
    if s.machine.busy:
        s.warnings.append(
            "busy machine — " + "; ".join(s.machine.busy) + ": other work is inside these figures; "
            "rerun on an idle machine"
        )
    return raw, wall, others


def _measurement(s: _Setup, raw: dict[str, Any]) -> Measured:
    """The measured figures (MFU against one process's measured matmul FLOP/s, and a GPU's datasheet)."""
    from trilemma.probe.profile import datasheet_match

    datasheet = datasheet_match(s.machine.whole.device_name) if s.job.device == "cuda" else None
    meas = measured(raw, s.job, s.spec, s.nproc, s.machine.share.peak(s.job.precision), datasheet)
    st = meas.step_time
    if st is not None and st.n >= 5 and st.spread > 0.5:
        s.warnings.append(
            f"step times are noisy (p10 {st.p10_s:.3g} s, p90 {st.p90_s:.3g} s): other work shared "
            "the machine; the median is reported"
        )
    if meas.mfu is not None and meas.mfu > 1.0:
        s.warnings.append(
            f"MFU {meas.mfu:.0%} is above 100%: the matmul microbenchmark ran while the machine was "
            "busier than during training; rerun with --remeasure on an idle machine"
        )
    return meas


def _scaling(s: _Setup, est: Estimate, meas: Measured, raw: dict[str, Any]) -> Scaling | None:
    """With ``nproc`` > 1: tokens/s against one process at the same threads, and (CPU) one process
    with every core, measured and predicted; None for one process or an interrupted run."""
    from dataclasses import replace as dc_replace

    from trilemma.probe.result import Scaling

    if not (s.nproc > 1 and meas.tokens_per_s and not raw["interrupted"]):
        return None
    job, m = s.job, s.machine
    tokens = job.seq * job.micro_batch * job.grad_accum  # one process's per step
    meter = host.OtherLoad(m.cores)
    one = _launch(job, 1, quiet=True) if job.device == "cpu" else train(job, 1, quiet=True)
    one_tps = tokens / median_step(one, job.warmup)
    est1, _ = predict(
        s.spec,
        m.hw,
        1,
        job.seq,
        job.micro_batch,
        job.grad_accum,
        job.steps,
        job.precision,
        job.recompute,
        False,
        s.finetune,
    )
    whole_tps = pred_whole = None
    if job.device == "cpu" and m.threads < m.cores:
        whole = train(dc_replace(job, threads=m.cores, fsdp=False), 1, quiet=True)
        whole_tps = tokens / median_step(whole, job.warmup)
        est_w, _ = predict(
            s.spec,
            m.hw_whole,
            1,
            job.seq,
            job.micro_batch,
            job.grad_accum,
            job.steps,
            job.precision,
            job.recompute,
            False,
            s.finetune,
        )
        pred_whole = est.time.tokens_per_s / est_w.time.tokens_per_s
    others_base = meter.share()
    if job.device == "cpu" and others_base is not None and others_base > host.BUSY:
        s.warnings.append(
            f"other processes used {others_base:.0%} of the CPU time while the one-process baselines "
            "ran: the scaling figures carry their work"
        )
    return Scaling(
        nproc=s.nproc,
        threads_per_process=m.threads,
        tokens_per_s=meas.tokens_per_s,
        one_process_tokens_per_s=one_tps,
        efficiency=meas.tokens_per_s / (s.nproc * one_tps),
        predicted_efficiency=est.time.tokens_per_s / (s.nproc * est1.time.tokens_per_s),
        whole_machine_tokens_per_s=whole_tps,
        speedup_vs_whole_machine=None if whole_tps is None else meas.tokens_per_s / whole_tps,
        predicted_speedup_vs_whole_machine=pred_whole,
    )


def _result(
    s: _Setup,
    torch: Any,
    est: Estimate,
    layout: Layout,
    pred: Predicted,
    meas: Measured,
    scaling: Scaling | None,
    raw: dict[str, Any],
    wall: float,
    others: float | None,
) -> ProbeResult:
    """The ProbeResult: the run (``wall`` in s), its environment (``others``: the share of CPU time other
    processes used, 0 to 1), the machine, and the prediction beside the measurement."""
    from trilemma.presets import user_config_dir
    from trilemma.probe.profile import profile_path
    from trilemma.probe.result import ProbeMachine, ProbeResult, ProbeRun

    job, m, device, nproc = s.job, s.machine, s.job.device, s.nproc
    env = _environment(s, torch, raw, others)
    run = ProbeRun(
        device=device,
        precision=job.precision,
        seq=job.seq,
        micro_batch=job.micro_batch,
        grad_accum=job.grad_accum,
        nproc=nproc,
        fsdp=job.fsdp,
        recompute=job.recompute,
        compile=job.compile,
        steps=job.steps,
        warmup=job.warmup,
        steps_done=len(raw["step_s"]),
        interrupted=raw["interrupted"],
        tokens_per_step=job.seq * job.micro_batch * job.grad_accum * nproc,
        lr=job.lr,
        seed=job.seed,
        optimizer="AdamW (betas 0.9, 0.95; weight decay 0.1)"
        + (" over the trainable parameters" if s.finetune is not None else ""),
        wall_s=wall,
        finetune=None if s.finetune is None else finetune_info(s.finetune, est, raw, s.warnings),
        parallelism=("FSDP (fully sharded)" if job.fsdp else "DDP")
        + (" over gloo" if device == "cpu" else " over NCCL")
        if nproc > 1
        else "single process",
    )
    machine = ProbeMachine(
        profile=str(profile_path()),
        config_dir=str(user_config_dir()),
        measurement=m.whole,
        per_process=None if m.share is m.whole else m.share,
    )
    return ProbeResult(
        model=s.spec,
        model_resolution=s.how,
        params_planner=int(est.params.total),
        layout=layout,
        run=run,
        comparison=comparison(pred, meas),
        measured=meas,
        predicted=pred,
        scaling=scaling,
        machine=machine,
        environment=env,
        data=raw["corpus"],
        step_s=tuple(raw["step_s"]),
        losses=tuple(raw["losses"]),
        warnings=tuple(s.warnings),
    )


def _environment(s: _Setup, torch: Any, raw: dict[str, Any], others: float | None) -> Any:
    """Where the probe ran: torch, python, the platform, the device and its cores and threads, and
    how busy the machine was (``others``: the share of CPU time other processes used, 0 to 1)."""
    from trilemma.probe.result import ProbeEnvironment

    m, device, nproc = s.machine, s.job.device, s.nproc
    return ProbeEnvironment(
        torch=torch.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        device=device,
        device_name=m.whole.device_name,
        cores=m.cores,
        threads_per_process=raw.get("threads", m.threads),
        nproc=nproc,
        cuda=torch.version.cuda if device == "cuda" else None,
        other_processes_cpu_share=others,
        load_1min=m.load_1min,
        busy=bool(m.busy),
        busy_why="; ".join(m.busy),
    )


def run_probe(req: ProbeRequest, *, eval_batches: int = 8, progress: bool = False) -> ProbeResult:
    """Train the model for ``steps`` optimizer steps on this machine and compare with the planner.

    ``threads`` is CPU threads per process (default: the cores shared out over ``nproc``).
    Raises InputError (exit status 2) for what cannot run: no torch, an unknown device, more
    processes than cores or GPUs, a sequence longer than the model's positions, a run that
    would not fit in memory (predicted before, or met while training).

    ``finetune`` (lora, full, freeze; with ``lora_rank``, ``lora_alpha``, ``lora_targets``,
    ``trainable_layers``): train a Hugging Face Llama built from the spec with PEFT adapters (or its last
    layers, or all of it) and compare with the planner's fine-tune prediction (``pip install
    'trilemma[finetune]'``).

    ``req`` is a :class:`trilemma.request.ProbeRequest` (the flags of `trilemma probe`, typed);
    ``eval_batches``: held-out batches for the loss after training; ``progress``: a bar on stderr.
    """
    try:
        import torch
    except ImportError:
        raise InputError(
            "probe", "torch", "PyTorch installed: pip install 'trilemma[probe]'"
        ) from None
    from trilemma.probe.result import append_record

    warnings: list[str] = []
    device, precision, warmup, cores, spec, how, seq, ft = run_inputs.probe_inputs(
        req, torch, warnings
    )
    machine = run_inputs.machine_for(
        device, precision, req.nproc, req.threads, cores, req.remeasure, warnings
    )
    job = run_inputs.make_job(
        req, spec, (device, precision, warmup, seq), machine.threads, ft, (eval_batches, progress)
    )
    s = _Setup(
        spec=spec,
        how=how,
        job=job,
        nproc=req.nproc,
        machine=machine,
        warnings=warnings,
        finetune=ft,
    )
    est, layout, pred = _prediction(s)
    raw, wall, others = _training(s)
    meas = _measurement(s, raw)
    result = _result(
        s, torch, est, layout, pred, meas, _scaling(s, est, meas, raw), raw, wall, others
    )
    if meas.params != result.params_planner:  # pragma: no cover - guarded by tests
        log.warning(
            "model has %d parameters, the planner counts %d", meas.params, result.params_planner
        )
    if req.out:
        append_record(req.out, result)
    return result
