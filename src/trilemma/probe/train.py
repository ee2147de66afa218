"""The timed training loop: the same code runs alone in this process or as one torchrun rank.

One optimizer step = ``grad_accum`` micro-batches of ``micro_batch`` sequences, forward and
backward (DDP all-reduces on the last micro-batch only), then AdamW. The clock runs around the
whole step, batch sampling included; on a GPU the step ends with a device synchronisation. The
first ``warmup`` steps (allocator, kernel choice, thread pools, compilation) are timed but left
out of the statistics.

Peak memory: on a GPU the caching allocator's peak (``max_memory_allocated``) and what the
device has in use at the end (``mem_get_info``, which includes the CUDA context); on a CPU the
process's peak resident set (VmHWM), reset just before the model is built (Linux
``/proc/self/clear_refs``), next to the resident set at that moment (the runtime baseline), read after
the warm-up's steps but its last (at least ``MEMORY_STEPS`` steps). During those steps glibc malloc's mmap threshold is
held at 128 KiB, so that freed tensors leave the resident set as they leave a GPU's allocated bytes
(``_mmap_large_allocations``); each such tensor is then a fresh mapping whose pages fault in (about ten
times the page faults of a step, and twice its time, measured on the LoRA probe), so the steps after
them run with the threshold at glibc's maximum, where freed memory is reused as in a process left alone
(the warm-up's last step, in which the heap grows, is not timed).
"""

from __future__ import annotations

import ctypes
import gc
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trilemma.errors import InputError
from trilemma.probe.data import Batches, load_corpus
from trilemma.probe.train_parts import (
    Progress,
    batches,
    eval_loss,
    model_and_optimizer,
    one_step,
    precision_context,
)
from trilemma.specs import ModelSpec
from trilemma.units import KIB, MIB

__all__ = ["Job", "run_training"]


@dataclass(frozen=True)
class Job:
    """Everything one training process needs (JSON-friendly: it travels to torchrun workers)."""

    spec: dict
    device: str  # "cpu" or "cuda"
    precision: str  # fp32, bf16, fp16 (autocast)
    seq: int
    micro_batch: int
    grad_accum: int
    steps: int
    warmup: int
    recompute: str = "none"
    compile: bool = False
    fsdp: bool = False
    threads: int = 0  # CPU threads per process; 0 = torch's default
    data: tuple[str, ...] | None = None
    seed: int = 0
    lr: float = 1e-3
    eval_batches: int = 8
    progress: bool = False
    finetune: dict | None = (
        None  # a FinetuneSpec as JSON: a PEFT fine-tune of a Llama built from spec (peft_model)
    )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Job:
        d = dict(d)
        if d.get("data") is not None:
            d["data"] = tuple(d["data"])
        return cls(**d)


# ------------------------------------------------------------------ memory readings (CPU)


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process; False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


#: glibc mallopt's parameter number for the mmap threshold (<malloc.h>: ``#define M_MMAP_THRESHOLD -3``)
M_MMAP_THRESHOLD = -3
#: allocations from this size up get their own mmap(2) and go back to the OS when freed, bytes: glibc's
#: own initial threshold (mallopt(3): "The default value is 128*1024"), held fixed
MMAP_THRESHOLD_BYTES = 128 * KIB
#: glibc's largest mmap threshold, bytes: DEFAULT_MMAP_THRESHOLD_MAX, "4*1024*1024*sizeof(long) on 64-bit
#: systems" (mallopt(3)), where the dynamic threshold ends once large blocks have been freed
MMAP_THRESHOLD_MAX_BYTES = 4 * MIB * ctypes.sizeof(ctypes.c_long)
#: CPU training has run in this process before (its heap then holds freed blocks, which serve the next run's
#: large tensors ahead of fresh mappings and stay resident when freed: ``run_training`` says so)
_TRAINED_BEFORE = False
#: CPU memory is read after at least this many steps: the first creates AdamW's states, the second is the
#: first to run forward and backward beside them
MEMORY_STEPS = 2


def _mmap_large_allocations(threshold: float = MMAP_THRESHOLD_BYTES) -> bool:
    """Hold glibc malloc's mmap threshold fixed at ``threshold`` bytes in this process (False where it cannot:
    not glibc); at ``MMAP_THRESHOLD_BYTES`` the resident set follows the live tensors as a GPU's allocated
    bytes do.

    glibc serves an allocation of at least the threshold with its own mmap(2), unmapped when freed; below it,
    from the heap, which keeps what is freed. By default the threshold is dynamic: each freed mmapped block
    larger than it raises it to that block's size, up to 32 MiB on 64-bit systems, and the heap's trim
    threshold follows at twice it (mallopt(3), M_MMAP_THRESHOLD and M_TRIM_THRESHOLD; glibc malloc/malloc.c,
    ``free``: "adjust the mmap threshold"). After the first training step freed its activations and
    temporaries, the next steps' tensors up to 32 MiB come from the heap, whose freed chunks stay resident:
    the peak resident set then holds the tensors of one step plus heap the allocator kept, which no memory
    model of tensors predicts. Setting M_MMAP_THRESHOLD "disables dynamic adjustment" (mallopt(3), Notes).
    PyTorch's CPU allocator takes every tensor's storage from malloc (c10/core/impl/alloc_cpu.cpp,
    ``posix_memalign``), so the setting reaches every tensor; tensors under 128 KiB still come from the heap."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, int(threshold)))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False


def _import_step_modules() -> None:
    """Load the modules a training step imports on first use, by one AdamW step on a one-element parameter:
    constructing ``torch.optim.AdamW`` imports ``torch._dynamo`` and what it pulls in (about 800 modules, some
    70 MiB of resident Python objects and code with torch 2.13 — modules, not training memory; a fine-tune's
    probe has them already from importing transformers and peft)."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.AdamW([p])
    (p * 2.0).sum().backward()
    opt.step()


def cpu_memory_baseline() -> tuple[bool, float]:
    """Start measuring a CPU process's memory growth: the training step's modules imported
    (``_import_step_modules``), large allocations mmapped (``_mmap_large_allocations``), garbage collected,
    freed heap given back (``_trim``), the peak mark reset. Returns (whether the peak mark was reset, the
    resident bytes now). The probe's training and the runtime overhead it is compared with
    (``trilemma.probe.bench.runtime_memory``) both start here, so both are measured the same way."""
    _import_step_modules()
    _mmap_large_allocations()
    gc.collect()
    _trim()
    reset = _reset_peak_rss()
    return reset, _rss()[0]


def _trim() -> None:
    """Give freed heap memory back to the OS (glibc ``malloc_trim``), so that memory an earlier
    run in this process freed but kept resident does not hide in the baseline."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _rss() -> tuple[float, float]:
    """(current, peak) resident bytes of this process."""
    try:
        fields = dict(
            line.split(":", 1)
            for line in Path("/proc/self/status").read_text().splitlines()
            if ":" in line
        )
        return float(fields["VmRSS"].split()[0]) * KIB, float(fields["VmHWM"].split()[0]) * KIB
    except (OSError, KeyError, ValueError):  # pragma: no cover - not Linux
        import resource

        peak = (
            float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * KIB
        )  # ru_maxrss is in KiB on Linux
        return peak, peak


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return (
        type(exc).__name__ == "OutOfMemoryError"
        or "out of memory" in text
        or "can't allocate memory" in text
        or "cannot allocate memory" in text
    )


# ------------------------------------------------------------------ the loop


def run_training(job: Job) -> dict[str, Any]:
    """Train ``job.steps`` steps and return the raw figures of this process (rank 0 speaks for all
    where ranks agree; memory is the maximum over ranks)."""
    import torch.distributed as dist

    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if job.device == "cuda" else torch.device("cpu")
    if job.device == "cuda":
        torch.cuda.set_device(device)
    if job.threads and job.device == "cpu":
        torch.set_num_threads(job.threads)
    spec = ModelSpec.model_validate(job.spec)
    corpus = load_corpus(list(job.data) if job.data else None)
    train_b, eval_b = batches(job, spec, corpus, rank)

    # memory baseline: the runtime (interpreter, torch, corpus — and for a fine-tune transformers and peft,
    # imported now so that their modules are not counted as training memory) before the model exists
    if job.finetune is not None:
        from trilemma.probe.peft_model import import_hf

        import_hf(job.finetune["method"])
    global _TRAINED_BEFORE
    trained_before = _TRAINED_BEFORE and job.device == "cpu"
    rss_reset, base_rss = cpu_memory_baseline() if job.device == "cpu" else (False, _rss()[0])
    if job.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)

    torch.manual_seed(job.seed)  # same initial weights on every rank
    model, n_params, trainable, opt = model_and_optimizer(job, spec, device, world, local_rank)
    amp, scaler = precision_context(job)
    no_sync = getattr(
        model, "no_sync", None
    )  # DDP: skip the all-reduce on all but the last micro-batch
    fsdp_sync = getattr(model, "set_requires_gradient_sync", None)  # FSDP2: the same, as a switch

    # memory over the warm-up but its last step, in which the heap grows under the raised threshold
    memory_steps = max(job.warmup - 1, MEMORY_STEPS)
    step_s, losses, interrupted, cpu_peak = _train_loop(
        model,
        opt,
        train_b,
        job,
        (amp, scaler, no_sync, fsdp_sync),
        device,
        (rank, world, spec, memory_steps),
    )
    mem = _memory(job, device, cpu_peak, (rss_reset, base_rss), memory_steps, trained_before)

    held_out = (
        eval_loss(model, eval_b, job, amp, device, world if distributed else 0)
        if not interrupted and job.eval_batches > 0 and step_s
        else None
    )

    if distributed and not interrupted:
        peaks = [None] * world
        dist.all_gather_object(peaks, mem)
        mem = max(peaks, key=lambda m: m["peak_bytes"])
    return {
        "rank": rank,
        "world": world,
        "threads": torch.get_num_threads(),
        "params_measured": n_params,
        "trainable_measured": trainable,
        "step_s": step_s,
        "losses": losses,
        "eval_loss": held_out,
        "interrupted": interrupted,
        "memory": mem,
        "corpus": corpus.describe(),
    }


def _train_loop(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    train_b: Batches,
    job: Job,
    contexts: tuple[Any, Any, Any, Any],
    device: torch.device,
    where: tuple[int, int, ModelSpec, int],
) -> tuple[list[float], list[float], bool, float | None]:
    """``job.steps`` timed steps (``where``: rank, world size, model, the steps memory is read
    over): their seconds and losses,
    whether a Ctrl-C cut them short, and the CPU's peak resident set after the memory steps
    (None on a GPU); InputError when the device runs out of memory."""
    rank, world, spec, memory_steps = where
    step_s: list[float] = []
    losses: list[float] = []
    interrupted = False
    tokens_per_step = job.seq * job.micro_batch * job.grad_accum * world
    bar = Progress(job.progress and rank == 0, job.steps, tokens_per_step)
    cpu_peak = None  # the CPU's peak resident set, read once the memory steps are done
    model.train()
    try:
        for _ in range(job.steps):
            t0 = time.perf_counter()
            value = one_step(model, opt, train_b, job, contexts, device)
            dt = time.perf_counter() - t0
            step_s.append(dt)
            losses.append(value)
            bar.update(dt, value)
            if job.device == "cpu" and len(step_s) == memory_steps:
                cpu_peak = _rss()[1]
                _mmap_large_allocations(
                    MMAP_THRESHOLD_MAX_BYTES
                )  # the timed steps reuse freed memory
            if not math.isfinite(value):
                break
    except KeyboardInterrupt:
        interrupted = True
    except (RuntimeError, MemoryError) as exc:
        if _is_oom(exc):
            raise InputError(
                "memory",
                f"{spec.name}, micro-batch {job.micro_batch}, seq {job.seq}",
                "a configuration that fits this device: a smaller --micro-batch, --seq or model, "
                f"or --recompute full ({str(exc).splitlines()[0][:160]})",
            ) from None
        raise
    finally:
        bar.close()

    return step_s, losses, interrupted, cpu_peak


def _memory(
    job: Job,
    device: torch.device,
    cpu_peak: float | None,
    baseline: tuple[bool, float],
    memory_steps: int,
    trained_before: bool,
) -> dict[str, Any]:
    """The memory figures of this process: the CUDA allocator's peaks, or the CPU's peak resident
    set above the runtime ``baseline`` (whether the peak was reset, its bytes)."""
    global _TRAINED_BEFORE
    rss_reset, base_rss = baseline
    if job.device == "cuda":
        torch.cuda.synchronize(device)
        peak_alloc = float(torch.cuda.max_memory_allocated(device))
        peak_reserved = float(torch.cuda.max_memory_reserved(device))
        free, total_mem = torch.cuda.mem_get_info(device)
        mem = {
            "kind": "cuda allocator peak (training) and device memory in use (with the CUDA context)",
            "peak_bytes": float(total_mem - free),
            "training_bytes": peak_alloc,
            "reserved_bytes": peak_reserved,
            "baseline_bytes": 0.0,
        }
    else:
        peak = _rss()[1] if cpu_peak is None else cpu_peak
        mem = {
            "kind": "peak resident set of the process (VmHWM)"
            + ("" if rss_reset else ", lifetime")
            + (
                f" over the first {memory_steps} steps, glibc's mmap threshold at "
                f"{MMAP_THRESHOLD_BYTES / KIB:.0f} KiB"
                if cpu_peak is not None
                else ""
            ),
            "peak_bytes": peak,
            "training_bytes": max(peak - base_rss, 0.0),
            "reserved_bytes": None,
            "baseline_bytes": base_rss,
            "trained_before": trained_before,
        }
        _TRAINED_BEFORE = True

    return mem
