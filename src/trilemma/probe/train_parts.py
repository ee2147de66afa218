"""The parts of one probe training run (trilemma.probe.train.run_training): the progress bar, the
model wrapped for DDP or FSDP2 with its optimizer, the batches, the precision context, one
optimizer step and the held-out loss."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from trilemma.probe.data import Batches
from trilemma.probe.model import build_model
from trilemma.specs import ModelSpec

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.train import Job

#: seeds of different ranks stay this far apart, so their data streams never overlap
SEED_STRIDE = 1000


class Progress:
    """A rich progress bar on stderr (only when asked: the caller checks for a terminal)."""

    def __init__(self, enabled: bool, total: int, tokens_per_step: int) -> None:
        self.bar = None
        self.tokens = tokens_per_step
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            from trilemma.console import console

            self.bar = Progress(
                TextColumn("probe"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[tps]} tokens/s  loss {task.fields[loss]}"),
                TimeRemainingColumn(),
                console=console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task("steps", total=total, tps="…", loss="…")
            self.bar.start()

    def update(self, dt: float, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(
                self.task, advance=1, tps=f"{self.tokens / dt:,.0f}", loss=f"{loss:.3f}"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def wrap_model(
    model: torch.nn.Module, job: Job, spec: ModelSpec, world: int, local_rank: int
) -> torch.nn.Module:
    if world == 1:
        return model
    if job.fsdp:
        try:
            from torch.distributed.fsdp import fully_shard  # FSDP2, torch >= 2.6
        except ImportError:  # pragma: no cover - older torch
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            return FSDP(
                model, device_id=local_rank if job.device == "cuda" else None, use_orig_params=True
            )
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    # the pooler is counted but not in the loss, and MoE experts may see no token in a step
    return DDP(
        model,
        device_ids=[local_rank] if job.device == "cuda" else None,
        find_unused_parameters=spec.pooler or spec.is_moe,
    )


def batches(job: Job, spec: ModelSpec, corpus: Any, rank: int) -> tuple[Batches, Batches]:
    """This rank's training batches (seeded per rank) and its held-out evaluation batches."""
    mask_id = spec.vocab_size - 1  # encoders: the last id stands for [MASK] (bytes use 0-255)
    train_b = Batches(
        corpus.train,
        job.seq,
        job.micro_batch,
        job.seed + SEED_STRIDE * rank,
        spec.causal,
        mask_id,
        job.device,
    )
    eval_b = Batches(
        corpus.eval,
        job.seq,
        job.micro_batch,
        10_000 + job.seed + rank,
        spec.causal,
        mask_id,
        job.device,
    )

    return train_b, eval_b


def model_and_optimizer(
    job: Job, spec: ModelSpec, device: torch.device, world: int, local_rank: int
) -> tuple[nn.Module, int, int | None, torch.optim.Optimizer]:
    """The model (a PEFT fine-tune or the probe's own), wrapped for DDP/FSDP and compiled as
    asked; its parameter count, trainable count (fine-tunes) and AdamW over what trains."""
    trainable = None
    if job.finetune is not None:  # Hugging Face Llama + PEFT (imported above, before the baseline)
        from trilemma.probe.peft_model import build_finetune_model

        model, n_params, trainable = build_finetune_model(
            spec, device, job.finetune, job.recompute == "full"
        )
    else:
        model = build_model(spec, device, recompute=job.recompute == "full")
        n_params = sum(p.numel() for p in model.parameters())
    model = wrap_model(model, job, spec, world, local_rank)
    if job.compile:
        model = torch.compile(model)
    # a fine-tune's optimizer holds what trains only (the adapters, or the last layers)
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=job.lr,
        betas=(0.9, 0.95),
        weight_decay=0.1,
    )
    return model, n_params, trainable, opt


def precision_context(job: Job) -> tuple[Any, Any]:
    """The autocast context of the job's precision and, for fp16 on a GPU, the gradient scaler."""
    amp = (
        contextlib.nullcontext()
        if job.precision == "fp32"
        else torch.autocast(
            job.device, dtype=torch.bfloat16 if job.precision == "bf16" else torch.float16
        )
    )
    scaler = (
        torch.amp.GradScaler("cuda") if (job.precision == "fp16" and job.device == "cuda") else None
    )
    return amp, scaler


def one_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    train_b: Batches,
    job: Job,
    contexts: tuple[Any, Any, Any, Any],
    device: torch.device,
) -> float:
    """One optimizer step over ``job.grad_accum`` micro-batches; its loss (waits for the device).
    ``contexts``: autocast, the gradient scaler, DDP's no_sync and FSDP2's gradient-sync switch."""
    amp, scaler, no_sync, fsdp_sync = contexts
    total = torch.zeros((), device=device)
    for micro in range(job.grad_accum):
        x, y = train_b.next()
        last = micro == job.grad_accum - 1
        if fsdp_sync is not None and job.grad_accum > 1:
            fsdp_sync(last)
        ctx = no_sync() if (no_sync is not None and not last) else contextlib.nullcontext()
        with ctx:
            with amp:
                logits = model(x)  # (B, S, V)
            loss = (
                F.cross_entropy(
                    logits.float().view(-1, logits.shape[-1]),
                    y.reshape(-1),
                    ignore_index=-100,
                )
                / job.grad_accum
            )
            (scaler.scale(loss) if scaler else loss).backward()
        total += loss.detach()
    if scaler:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    opt.zero_grad(set_to_none=True)
    value = total.item()  # waits for the device: the step is done
    return value


def eval_loss(
    model: nn.Module, eval_b: Batches, job: Job, amp: Any, device: torch.device, world: int
) -> float:
    """The held-out loss over ``job.eval_batches`` batches (averaged over ``world`` ranks when
    distributed, ``world`` 0 when not)."""
    model.eval()
    with torch.no_grad(), amp:
        acc = torch.zeros((), device=device)
        for _ in range(job.eval_batches):
            x, y = eval_b.next()
            logits = model(x)
            acc += F.cross_entropy(
                logits.float().view(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100
            )
    if world:
        import torch.distributed as dist

        dist.all_reduce(acc)
        acc /= world
    return float(acc.item()) / job.eval_batches
