"""A probe's inputs resolved before it trains (trilemma.probe.run.run_probe): the settings and the
model of its request (a fine-tune's too), this machine measured as a whole and per process, and
the job each training process runs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError
from trilemma.probe import machine as host
from trilemma.probe.inputs import DEFAULTS, model_and_seq, probe_model, settings
from trilemma.specs import ModelSpec
from trilemma.units import GIGA

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.profile import MachineMeasurement
    from trilemma.probe.train import Job
    from trilemma.request.probe import ProbeRequest
    from trilemma.specs.hardware import HardwareSpec

log = logging.getLogger(__name__)


@dataclass
class Machine:
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


def machine_for(
    device: str,
    precision: str,
    nproc: int,
    threads: int | None,
    cores: int,
    remeasure: bool,
    warnings: list[str],
) -> Machine:
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
    if not meas.from_cache or stale_profile(hw_local):
        save_local_profile(hw_local, meas)
    shared = device == "cpu" and (nproc > 1 or per_proc_threads != cores)
    sliced = (
        bench.machine(device, precs, threads=per_proc_threads, remeasure=remeasure, reading=reading)
        if shared
        else meas
    )
    if device == "cpu" and nproc > 1:  # processes that all-reduce: time gloo's collective too
        from trilemma.probe.bench_cache import with_collective

        sliced = with_collective(sliced)
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
    return Machine(
        cores=cores,
        threads=per_proc_threads,
        whole=meas,
        hw_whole=hw_local,
        share=sliced,
        hw=hw,
        load_1min=reading.load_1min,
        busy=busy,
    )


def stale_profile(hw: Any) -> bool:
    """The saved `local` profile is missing, unreadable, or lacks what this version derives from the same
    measurement (a CPU's own GEMM efficiency, added after the first profiles were written)."""
    from trilemma.presets import read_profile
    from trilemma.probe.profile import profile_path

    try:
        saved = read_profile(profile_path())["hardware"]
    except (InputError, KeyError, TypeError):
        return True
    return saved.get("efficiency", {}) != hw.efficiency


def finetune_setup(
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


def probe_inputs(
    req: ProbeRequest, torch: Any, warnings: list[str]
) -> tuple[str, str, int, int, ModelSpec, str, int, Any]:
    """The request's settings checked (device, precision, warm-up steps, usable cores), its data and
    output checked, and the model: (device, precision, warmup, cores, spec, how it was chosen,
    sequence length, the FinetuneSpec or None); appends to ``warnings``."""
    from trilemma.errors import check_output_file
    from trilemma.probe.data import check_sources

    model, seq, warmup, precision = req.model, req.seq, req.warmup, req.precision
    device, data, out = req.device, req.data, req.out
    lora_rank, lora_alpha, lora_targets = req.lora_rank, req.lora_alpha, req.lora_targets
    finetune, trainable_layers = req.finetune, req.trainable_layers
    device, precision, warmup, cores = settings(
        torch,
        device,
        precision,
        req.micro_batch,
        req.grad_accum,
        req.steps,
        warmup,
        req.recompute,
        req.compile,
        req.nproc,
        req.fsdp,
        req.threads,
        warnings,
        req.lr,
    )
    check_sources(data)
    if out is not None:
        check_output_file("out", out)
    dims = {
        "layers": req.layers,
        "d_model": req.d_model,
        "heads": req.heads,
        "kv_heads": req.kv_heads,
        "ffn": req.ffn,
        "vocab": req.vocab,
    }
    ft, ft_how = None, None
    if finetune is not None:
        ft, model, dims, ft_how = finetune_setup(
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
    return device, precision, warmup, cores, spec, how, seq, ft


def make_job(
    req: ProbeRequest,
    spec: ModelSpec,
    run: tuple[str, str, int, int],
    threads: int,
    ft: Any,
    extras: tuple[int, bool],
) -> Job:
    """The job each training process runs: ``run`` (device, precision, warm-up steps, sequence
    length), ``threads`` per process on a CPU, the fine-tune, and ``extras`` (held-out batches,
    whether to draw a progress bar)."""
    from trilemma.probe.train import Job

    device, precision, warmup, seq = run
    eval_batches, progress = extras
    return Job(
        spec=spec.model_dump(mode="json"),
        device=device,
        precision=precision,
        seq=seq,
        micro_batch=req.micro_batch,
        grad_accum=req.grad_accum,
        steps=req.steps,
        warmup=warmup,
        recompute=req.recompute,
        compile=req.compile,
        fsdp=req.fsdp,
        threads=threads if device == "cpu" else 0,
        data=tuple([req.data] if isinstance(req.data, str) else req.data) if req.data else None,
        seed=req.seed,
        lr=req.lr,
        eval_batches=eval_batches,
        progress=progress,
        finetune=None if ft is None else ft.model_dump(mode="json"),
    )
