"""One ladder run, trained and evaluated the same way every time (torch is imported here only).

The model comes from ``trilemma.probe.model.build_model`` (re-initialised at fan-in scale here), the text from
``trilemma.probe.data.load_corpus`` (bytes; every 20th document held out) and the training batches
from ``trilemma.probe.data.Batches`` (seeded random windows of the training split). What the probe
does not have and the ladder needs is here:

- the learning-rate schedule: linear warm-up, then cosine decay to ``lr_final_ratio`` × peak at the
  run's own last step (Hoffmann et al. 2022 §3.1, App. B);
- AdamW with weight decay on matrices only (biases and norm gains undecayed, as nanoGPT), gradient
  clipping;
- a fixed evaluation: ``eval_tokens`` // seq windows evenly spaced over the held-out split, in the
  same order for every run, so every loss is measured on the same bytes (the probe samples random
  eval windows);
- the record (``trilemma.ladder.records``), built in the process that trained, and appended there.

``execute(task)`` is what a worker process runs: train one run, append its record, return it.
"""

from __future__ import annotations

import itertools
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from trilemma.errors import InputError
from trilemma.estimate.cost import energy_j
from trilemma.ladder.plan import BETAS, RunSpec
from trilemma.ladder.records import append_record, record_head, run_from_dict

__all__ = ["CorpusView", "corpus_view", "execute", "lr_at", "run_from_dict", "run_to_dict", "train"]

CURVE_POINTS = 64  # points of the training-loss curve kept in a record
_SHIPPED: dict[tuple, CorpusView] = {}  # the corpus a cluster shipped to this worker, by identity


def lr_at(step: int, run: RunSpec) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up, cosine to the final ratio."""
    w, n = run.warmup_steps, run.steps
    if step < w:
        return run.lr * (step + 1) / w
    progress = min(1.0, (step - w) / max(1, n - w - 1))
    return run.lr * (
        run.lr_final_ratio + (1 - run.lr_final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    )


def run_to_dict(run: RunSpec) -> dict[str, Any]:
    d = asdict(run)
    d["shape"] = asdict(run.shape)
    return d


# ------------------------------------------------------------------ data


class CorpusView:
    """The corpus as the ladder uses it: bytes, its fingerprint, and the fixed evaluation windows."""

    def __init__(self, data: tuple[str, ...] | None, corpus: Any = None) -> None:
        import hashlib

        from trilemma.probe.data import load_corpus

        self.corpus = corpus if corpus is not None else load_corpus(list(data) if data else None)
        h = hashlib.sha256()
        h.update(self.corpus.train)
        h.update(b"\x00eval\x00")
        h.update(self.corpus.eval)
        self.fingerprint = h.hexdigest()[:16]

    @classmethod
    def of(cls, corpus: Any) -> CorpusView:
        """The view of a corpus already read (``trilemma.probe.data.Corpus``), kept for the next
        run on the same worker."""
        key = (corpus.source, len(corpus.train), len(corpus.eval), hash(corpus.train))
        if key not in _SHIPPED:
            _SHIPPED.clear()  # one corpus per worker at a time
            _SHIPPED[key] = cls(None, corpus)
        return _SHIPPED[key]

    def describe(self) -> dict[str, Any]:
        return {**self.corpus.describe(), "fingerprint": self.fingerprint}

    def eval_windows(self, seq: int, tokens: int) -> Any:
        """(n, seq + 1) uint8 windows, n = tokens // seq, evenly spaced over the held-out split."""
        import torch

        text = self.corpus.eval
        if len(text) < seq + 2:
            raise InputError(
                "data",
                self.corpus.source,
                f"a held-out split of at least {seq + 2} bytes (it has {len(text)})",
            )
        n = max(1, tokens // seq)
        data = torch.frombuffer(bytearray(text), dtype=torch.uint8)
        last = len(text) - seq - 1
        starts = [round(i * last / max(1, n - 1)) for i in range(n)]
        return torch.stack([data[s : s + seq + 1] for s in starts])


@lru_cache(maxsize=4)
def corpus_view(data: tuple[str, ...] | None) -> CorpusView:
    return CorpusView(data)


# ------------------------------------------------------------------ training


def init_fan_in(model: Any) -> None:
    """Fan-in initialisation: every matrix N(0, 1/fan_in) (LeCun et al. 1998; the hidden weights of
    muP, Yang et al. 2021), the residual output projections further scaled by 1/sqrt(2·layers)
    (GPT-2, Radford 2019 §2.3); norm gains one, biases zero. The probe's GPT-2 default N(0, 0.02) is
    sized for d_model ≈ 768: at d_model 32 it is 9× below fan-in scale, and on the sweep it left
    2-layer runs stuck early for a seed-dependent time (eval loss 1.84-2.09 over three seeds at
    25k parameters, 20 tokens/parameter; fan-in: 1.68-1.70). See lr_sweep.md."""
    import torch

    resid = 1.0 / math.sqrt(2 * model.spec.n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2:
                (torch.nn.init.ones_ if name.endswith("weight") else torch.nn.init.zeros_)(p)
                continue
            std = 1.0 / math.sqrt(p.shape[1])
            if name.endswith(("attn.out.weight", "down.weight")):
                std *= resid
            torch.nn.init.normal_(p, 0.0, std)


def _evaluate(model: Any, windows: Any, cast: Any, batch: int = 64) -> float:
    import torch
    import torch.nn.functional as F

    model.eval()
    total, count = 0.0, 0
    device = next(model.parameters()).device
    with torch.no_grad(), cast():
        for i in range(0, len(windows), batch):
            w = windows[i : i + batch].to(device).long()
            x, y = w[:, :-1], w[:, 1:]
            logits = model(x)
            total += float(
                F.cross_entropy(
                    logits.float().view(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"
                )
            )
            count += y.numel()
    model.train()
    return total / count


def _curve(losses: list[float], points: int = CURVE_POINTS) -> dict[str, list]:
    """The training loss as up to ``points`` bucket means (step = the bucket's last step, 1-based)."""
    n = len(losses)
    if n == 0:
        return {"step": [], "loss": []}
    edges = sorted({round(i * n / min(points, n)) for i in range(min(points, n) + 1)})
    steps, vals = [], []
    for a, b in itertools.pairwise(edges):
        chunk = [v for v in losses[a:b] if math.isfinite(v)]
        steps.append(b)
        vals.append(sum(chunk) / len(chunk) if chunk else None)
    return {"step": steps, "loss": vals}


def device_and_cast(device: str) -> tuple[Any, Callable[[], Any], str]:
    """The torch device, a context of its autocast and the precision in words: ``cpu`` is fp32;
    ``cuda`` is bf16 autocast where the GPU supports bf16 (compute capability 8.0 and later), else
    fp32. A ``cuda`` task on a worker without a GPU is one InputError."""
    import contextlib
    import functools

    import torch

    if device == "cpu":
        return torch.device("cpu"), contextlib.nullcontext, "fp32"
    if not torch.cuda.is_available():
        raise InputError("gpu", device, "a worker with a CUDA GPU (this one has none)")
    if torch.cuda.is_bf16_supported():
        cast = functools.partial(torch.autocast, "cuda", dtype=torch.bfloat16)
        return torch.device("cuda"), cast, "bf16 autocast (fp32 weights and optimizer)"
    return torch.device("cuda"), contextlib.nullcontext, "fp32"  # pragma: no cover - pre-Ampere


def _optimizer(model: Any, run: RunSpec) -> Any:
    """AdamW over ``model``'s parameters at ``run``'s learning rate and beta2: weight decay on the
    matrices, none on the vectors (norms, biases); the fused kernel where torch has it."""
    import torch

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": run.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    try:  # one fused kernel per step (torch >= 2.4 on a CPU): ~10% of a tiny model's step
        return torch.optim.AdamW(groups, lr=run.lr, betas=(BETAS[0], run.beta2), fused=True)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - older torch
        return torch.optim.AdamW(groups, lr=run.lr, betas=(BETAS[0], run.beta2))


def train(
    run: RunSpec,
    view: CorpusView,
    *,
    threads: int | None = None,
    on_step: Callable[[int, float], None] | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train ``run`` and evaluate it on ``device`` (cpu or cuda); the raw figures (no record yet).
    Ctrl-C propagates."""
    import torch
    import torch.nn.functional as F

    from trilemma.probe.data import Batches
    from trilemma.probe.model import build_model

    if threads:
        torch.set_num_threads(threads)
    spec = run.shape.spec(run.seq)
    windows = view.eval_windows(run.seq, run.eval_tokens)
    batches = Batches(view.corpus.train, run.seq, run.batch_seqs, seed=run.seed)
    torch.manual_seed(run.seed)
    dev, cast, precision = device_and_cast(device)
    model = build_model(spec, dev, init=False)
    init_fan_in(model)
    n_measured = sum(p.numel() for p in model.parameters())
    opt = _optimizer(model, run)
    losses: list[float] = []
    diverged = False
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    model.train()
    for step in range(run.steps):
        lr = lr_at(step, run)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = (t.to(dev, non_blocking=True) for t in batches.next())
        with cast():
            logits = model(x)  # (B, S, 256)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = float(loss.detach())
        losses.append(value)
        if on_step is not None:
            on_step(step + 1, value)
        if not math.isfinite(value):
            diverged = True
            break
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    eval_loss = None if diverged else _evaluate(model, windows, cast)
    eval_s = time.perf_counter() - t1
    tail = [v for v in losses[-max(1, len(losses) // 20) :] if math.isfinite(v)]
    return {
        "params_measured": int(n_measured),
        "losses": losses,
        "diverged": diverged,
        "eval_loss": eval_loss,
        "eval_tokens": int(windows.shape[0] * run.seq),
        "train_loss": sum(tail) / len(tail) if tail else None,
        "train_s": train_s,
        "eval_s": eval_s,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "device": "cpu" if dev.type == "cpu" else f"cuda ({torch.cuda.get_device_name(dev)})",
        "precision": precision,
        "started_at": started,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average_start": load0,
        "load_average_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def build_record(
    run: RunSpec,
    raw: dict[str, Any],
    view: CorpusView,
    *,
    predicted_s: float | None,
    hardware: str | None,
    power_w: float,
    worker: int,
) -> dict[str, Any]:
    """The versioned record of one finished run (``trilemma.ladder.records`` format)."""
    spec = run.shape.spec(run.seq)
    wall = raw["train_s"] + raw["eval_s"]
    tokens_done = len(raw["losses"]) * run.tokens_per_step
    warnings = []
    if raw["diverged"]:
        warnings.append(f"diverged at step {len(raw['losses'])} of {run.steps} (loss not finite)")
    if predicted_s and raw["train_s"] > 0 and not 0.5 <= predicted_s / raw["train_s"] <= 2:
        warnings.append(
            f"the planner predicted {predicted_s:.1f} s of training, measured {raw['train_s']:.1f} s"
        )
    return {
        **record_head(run, raw["eval_loss"]),
        "model": {
            "name": spec.name,
            "shape": asdict(run.shape),
            "params_non_embedding": run.n,
            "params_total": run.params_total,
            "params_measured": raw["params_measured"],
            "spec": spec.model_dump(mode="json"),
        },
        "run": {
            **run_to_dict(run),
            "tokens": run.tokens,
            "tokens_per_step": run.tokens_per_step,
            "steps_done": len(raw["losses"]),
            "tokens_done": tokens_done,
            "optimizer": f"AdamW (betas {BETAS[0]}, {run.beta2}; weight decay {run.weight_decay} on matrices)",
            "schedule": f"linear warm-up {run.warmup_steps} steps, cosine to {run.lr_final_ratio:g}× peak at step {run.steps}",
            "precision": raw.get("precision", "fp32"),
            "device": raw.get("device", "cpu"),
            "worker": worker,
        },
        "measured": {
            "eval_loss": raw["eval_loss"],
            "eval_tokens": raw["eval_tokens"],
            "train_loss": raw["train_loss"],
            "diverged": raw["diverged"],
            "train_s": raw["train_s"],
            "eval_s": raw["eval_s"],
            "wall_s": wall,
            "tokens_per_s": tokens_done / raw["train_s"] if raw["train_s"] > 0 else None,
            "model_flop_per_token": run.model_flop_per_token,
            "model_flop": tokens_done * run.model_flop_per_token,
            "power_w": power_w,
            "energy_j": energy_j(1, wall, power_w),
        },
        "predicted": {"train_s": predicted_s, "hardware": hardware},
        "environment": {
            "torch": raw["torch"],
            "python": platform.python_version(),
            "platform": platform.platform(),
            "threads": raw["threads"],
            "cores": os.cpu_count(),
            "pid": os.getpid(),
            "started_at": raw["started_at"],
            "finished_at": raw["finished_at"],
            "load_average_start": raw["load_average_start"],
            "load_average_end": raw["load_average_end"],
        },
        "data": view.describe(),
        "curve": _curve(raw["losses"]),
        "warnings": warnings,
    }


def execute(task: dict[str, Any]) -> dict[str, Any]:
    """Train one run, append its record to ``task['out']`` (when given: a cluster's driver appends it
    instead) and return the record (a worker's job). ``task['corpus']``: the corpus itself, shipped
    by a cluster's object store, else it is read from ``task['data']``."""
    run = run_from_dict(task["run"])
    if task.get("corpus") is not None:
        view = CorpusView.of(task["corpus"])
    else:
        view = corpus_view(tuple(task["data"]) if task.get("data") else None)
    if (
        run.data_fingerprint and run.data_fingerprint != view.fingerprint
    ):  # pragma: no cover - the corpus changed
        raise InputError(
            "data",
            view.corpus.source,
            "the same text the ladder was planned on (it changed on disk)",
        )
    on_gpu = {"device": task["device"]} if task.get("device", "cpu") != "cpu" else {}
    raw = train(run, view, threads=task.get("threads"), **on_gpu)
    record = build_record(
        run,
        raw,
        view,
        predicted_s=task.get("predicted_s"),
        hardware=task.get("hardware"),
        power_w=float(task.get("power_w", 0.0)),
        worker=int(task.get("worker", 0)),
    )
    if task.get("out"):
        append_record(task["out"], record)
    return record
