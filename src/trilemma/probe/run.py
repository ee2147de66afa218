"""``run_probe``: measure real training on this machine and set it beside the planner's prediction.

1. Resolve the model (default: a small GPT-2-style model; a preset, scaled down by any of
   layers / d_model / heads / kv_heads / ffn / vocab; or a Hugging Face config.json).
2. Measure the machine (matmul FLOP/s against size per precision, memory bandwidth, loopback
   link; cached) and save it as the hardware profile ``local``.
3. Predict with the planner's own API: ``evaluate_layout(model, make_cluster(local, nproc),
   make_plan(...), Layout(dp=nproc, zero=0 or 3, recompute, micro_batch))``.
4. Train: in this process, or ``nproc`` processes through torchrun (DDP or FSDP; gloo on a CPU,
   NCCL on GPUs), and with ``nproc`` > 1 also one process at the same threads per process, for
   the scaling efficiency.
5. Compare: predicted / measured step time, tokens/s and memory.

The comparison tests the planner; nothing measured here feeds back into its constants.
Step 1 lives in ``probe.inputs``, 3 and 5 in ``probe.compare``, 4 in ``probe.launch``.
"""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError
from trilemma.probe import machine as host
from trilemma.probe.compare import comparison, measured, predict, predicted
from trilemma.probe.inputs import DEFAULTS, model_and_seq, probe_model, settings
from trilemma.probe.launch import launch as _launch  # the name tests know it by
from trilemma.probe.launch import median_step, train
from trilemma.specs import Layout, ModelSpec
from trilemma.units import GIB, GIGA

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.estimate.result import Estimate
    from trilemma.probe.profile import MachineMeasurement
    from trilemma.probe.result import Measured, Predicted, ProbeResult, Scaling
    from trilemma.probe.train import Job
    from trilemma.request.probe import ProbeRequest
    from trilemma.specs.hardware import HardwareSpec

__all__ = ["DEFAULTS", "probe_model", "run_probe"]

log = logging.getLogger(__name__)

TINY_BF16_S = (
    120.0  # a bf16 run on a CPU without a native bf16 path must promise to end in this time
)


# ------------------------------------------------------------------ the steps of a run


@dataclass
class _Machine:
    """This machine as measured for the run: whole, and one process's share of it."""

    cores: int  # usable CPU cores
    threads: int  # CPU threads per process (1 on a GPU)
    whole: MachineMeasurement  # every core (saved as the `local` profile)
    hw_whole: HardwareSpec
    share: MachineMeasurement  # one process's threads (``whole`` where a process has them all)
    hw: HardwareSpec  # what the planner predicts with
    load_1min: float | None = None  # the load average when the probe started
    busy: list[str] = field(
        default_factory=list
    )  # why the figures carry other processes' work (empty: idle)


@dataclass
class _Setup:
    """One run's resolved inputs: the model, the job each process runs, the machine, and the warnings so far."""

    spec: ModelSpec
    how: str  # how the model was chosen
    job: Job
    nproc: int  # training processes
    machine: _Machine
    warnings: list[str]
    finetune: Any = None  # a FinetuneSpec (--finetune), else None


def _machine(
    device: str,
    precision: str,
    nproc: int,
    threads: int | None,
    cores: int,
    remeasure: bool,
    warnings: list[str],
) -> _Machine:
    """Measure the machine (matmul FLOP/s, memory bandwidth, link; cached): all of it, saved as the
    `local` profile, and one process's share of it (``threads`` CPU threads each, default cores / nproc)."""
    from trilemma.probe import bench
    from trilemma.probe.profile import local_hardware, save_local_profile

    per_proc_threads = (threads or max(1, cores // nproc)) if device == "cpu" else 1
    if device == "cpu" and per_proc_threads * nproc > cores:
        warnings.append(
            f"{nproc} process(es) × {per_proc_threads} threads oversubscribe {cores} cores"
        )
    precs = tuple(dict.fromkeys(("fp32", precision)))
    reading = host.load_reading(cores)
    busy = []
    if device == "cpu" and (why := host.busy_reason(reading, cores)):
        busy.append(f"when the probe started: {why}")
    meas = bench.machine(
        device, precs, threads=cores if device == "cpu" else 1, remeasure=remeasure, reading=reading
    )
    if meas.remeasured_because:
        warnings.append(f"the cached machine profile was measured again: {meas.remeasured_because}")
    if meas.conditions is not None and meas.conditions.busy:
        busy.append(
            f"the machine profile was measured on a busy machine ({meas.conditions.why})"
            + (
                f" on {meas.measured_at} (cached; measured again once the machine is idle, or --remeasure)"
                if meas.from_cache
                else ""
            )
        )
    hw_local = local_hardware(meas)
    if not meas.from_cache or _stale_profile(hw_local):
        save_local_profile(hw_local, meas)
    shared = device == "cpu" and (nproc > 1 or per_proc_threads != cores)
    sliced = (
        bench.machine(device, precs, threads=per_proc_threads, remeasure=remeasure, reading=reading)
        if shared
        else meas
    )
    hw = local_hardware(sliced, share=nproc) if shared else hw_local
    if device == "cpu" and precision != "fp32":
        p16, p32 = meas.peak(precision), meas.peak("fp32")
        if p16 < p32:
            warnings.append(
                f"{precision} on this CPU: no native {precision} matmul path (measured {p16 / GIGA:.0f} "
                f"GFLOP/s vs {p32 / GIGA:.0f} GFLOP/s in fp32), so {precision} runs are kept tiny; "
                "fp32 is the CPU default"
            )
        else:
            warnings.append(
                f"{precision} on this CPU: autocast runs matmuls in {precision} ({p16 / GIGA:.0f} GFLOP/s "
                f"measured vs {p32 / GIGA:.0f} in fp32); weights, gradients and Adam stay fp32"
            )
    return _Machine(
        cores=cores,
        threads=per_proc_threads,
        whole=meas,
        hw_whole=hw_local,
        share=sliced,
        hw=hw,
        load_1min=reading.load_1min,
        busy=busy,
    )


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
    from trilemma.probe.result import ProbeEnvironment, ProbeMachine, ProbeResult, ProbeRun

    job, m, device, nproc = s.job, s.machine, s.job.device, s.nproc
    env = ProbeEnvironment(
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
        finetune=None if s.finetune is None else _finetune_info(s, est, raw),
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


def _finetune_info(s: _Setup, est: Estimate, raw: dict[str, Any]) -> dict[str, Any]:
    """The fine-tune's settings and its trainable parameters, counted by PEFT in the run and by the planner."""
    ft = s.finetune
    planner = est.finetune["trainable_params"] if est.finetune else None
    measured_n = raw.get("trainable_measured")
    if measured_n is not None and planner is not None and int(measured_n) != int(planner):
        s.warnings.append(
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


def _finetune_setup(
    finetune: str,
    model: str | ModelSpec | None,
    dims: dict[str, int | None],
    device: str,
    lora_rank: int | None,
    lora_alpha: float | None,
    lora_targets: str | None,
    trainable_layers: int | None,
) -> tuple[Any, str | ModelSpec, dict[str, int | None], str | None]:
    """A probe fine-tune's FinetuneSpec, model and dims (default: Llama-2-7B scaled down to the probe's default
    size), and how the model was chosen when defaulted. InputError for QLoRA on a CPU."""
    from trilemma.specs.enums import FinetuneMethod
    from trilemma.specs.finetune import make_finetune

    how = None
    if model is None:
        model = "llama2-7b"
        dims = {
            k: (DEFAULTS[k] if k in DEFAULTS and k != "ffn" and v is None else v)
            for k, v in dims.items()
        }
        how = "default for --finetune: Llama-2-7B's shape (SwiGLU, RMSNorm, rotary, untied head) scaled down, byte-level"
    meth = FinetuneMethod.parse(finetune, "finetune")
    if meth == FinetuneMethod.QLORA and device == "cpu":
        raise InputError(
            "finetune",
            "qlora",
            "lora, full or freeze on a CPU: QLoRA's nf4 storage and dequantisation "
            "kernels (bitsandbytes) need a GPU. On a CPU the probe measures the adapters' time and memory "
            "over a 32-bit base (--finetune lora), not the 4-bit base's bytes or its dequantisation cost",
        )
    if meth == FinetuneMethod.QLORA:
        raise InputError(
            "finetune",
            "qlora",
            "lora, full or freeze: the probe does not yet load a 4-bit base "
            "(bitsandbytes) on a GPU either",
        )
    from trilemma.resolve import resolve_model

    base_spec = (
        probe_model(model, **dims)[0]
        if any(v is not None for v in dims.values())
        else resolve_model(model)[0]
    )
    ft = make_finetune(
        meth,
        n_layers=base_spec.n_layers,
        gated=base_spec.ffn_matrices == 3,
        trainable_layers=trainable_layers,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        lora_targets=lora_targets,
    )
    return ft, model, dims, how


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
    model, seq, warmup, precision = req.model, req.seq, req.warmup, req.precision
    layers, d_model, heads, kv_heads = req.layers, req.d_model, req.heads, req.kv_heads
    ffn, vocab, micro_batch, grad_accum = req.ffn, req.vocab, req.micro_batch, req.grad_accum
    steps, recompute, compile, nproc = req.steps, req.recompute, req.compile, req.nproc
    device, fsdp, threads, data = req.device, req.fsdp, req.threads, req.data
    seed, lr, out, remeasure = req.seed, req.lr, req.out, req.remeasure
    finetune, trainable_layers = req.finetune, req.trainable_layers
    lora_rank, lora_alpha, lora_targets = req.lora_rank, req.lora_alpha, req.lora_targets
    try:
        import torch
    except ImportError:
        raise InputError(
            "probe", "torch", "PyTorch installed: pip install 'trilemma[probe]'"
        ) from None
    from trilemma.errors import check_output_file
    from trilemma.probe.result import append_record
    from trilemma.probe.train import Job

    warnings: list[str] = []
    from trilemma.probe.data import check_sources

    device, precision, warmup, cores = settings(
        torch,
        device,
        precision,
        micro_batch,
        grad_accum,
        steps,
        warmup,
        recompute,
        compile,
        nproc,
        fsdp,
        threads,
        warnings,
        lr,
    )
    check_sources(data)
    if out is not None:
        check_output_file("out", out)
    dims = {
        "layers": layers,
        "d_model": d_model,
        "heads": heads,
        "kv_heads": kv_heads,
        "ffn": ffn,
        "vocab": vocab,
    }
    ft, ft_how = None, None
    if finetune is not None:
        ft, model, dims, ft_how = _finetune_setup(
            finetune, model, dims, device, lora_rank, lora_alpha, lora_targets, trainable_layers
        )
    elif any(v is not None for v in (lora_rank, lora_alpha, lora_targets, trainable_layers)):
        raise InputError(
            "finetune",
            None,
            "--finetune lora, full or freeze with --lora-rank, --lora-alpha, "
            "--lora-targets or --trainable-layers",
        )
    spec, how, seq = model_and_seq(model, dims, seq, warnings)
    if ft is not None:
        from trilemma.probe.peft_model import check_llama_style

        check_llama_style(spec)
        how = f"{ft_how}: {how}" if ft_how else how
    machine = _machine(device, precision, nproc, threads, cores, remeasure, warnings)
    job = Job(
        spec=spec.model_dump(mode="json"),
        device=device,
        precision=precision,
        seq=seq,
        micro_batch=micro_batch,
        grad_accum=grad_accum,
        steps=steps,
        warmup=warmup,
        recompute=recompute,
        compile=compile,
        fsdp=fsdp,
        threads=machine.threads if device == "cpu" else 0,
        data=tuple([data] if isinstance(data, str) else data) if data else None,
        seed=seed,
        lr=lr,
        eval_batches=eval_batches,
        progress=progress,
        finetune=None if ft is None else ft.model_dump(mode="json"),
    )
    s = _Setup(
        spec=spec, how=how, job=job, nproc=nproc, machine=machine, warnings=warnings, finetune=ft
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
    if out:
        append_record(out, result)
    return result


def _stale_profile(hw: Any) -> bool:
    """The saved `local` profile is missing, unreadable, or lacks what this version derives from the same
    measurement (a CPU's own GEMM efficiency, added after the first profiles were written)."""
    from trilemma.presets import read_profile
    from trilemma.probe.profile import profile_path

    try:
        saved = read_profile(profile_path())["hardware"]
    except (InputError, KeyError, TypeError):
        return True
    return saved.get("efficiency", {}) != hw.efficiency
