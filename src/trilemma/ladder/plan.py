"""The ladder's plan: which models, how many tokens, which hyperparameters, how long (no torch here).

Models — the shape rule (Llama-style byte-level decoders, d_model / layers = 16, head width 16) and
how N is counted (non-embedding parameters, as Kaplan 2020 §3.1) are in ``trilemma.ladder.shapes``.

Each run is trained "done right" (``trilemma.ladder.train``), with rules fixed before any run:

- tokens D = tokens-per-parameter × N, rounded to whole optimizer steps;
- batch: BATCH_SEQS sequences of SEQ bytes (512 tokens) for every run: these runs are limited by
  optimizer steps, and on the sweep a 512-token batch beat 1024 and 2048 by 0.06-0.2 nats/byte at
  the same tokens (lr_sweep.md), for ~1.4× the time per token on a CPU;
- learning rate: LR_RULE (``trilemma.ladder.shapes.lr_for``), a power law in N fitted once on a
  sweep of the fit-sized models (the sweep, its data and the fit are in ``lr_sweep.md`` beside this
  file); no run of a held-out size took part in it;
- schedule: linear warm-up over the first N tokens (one token per parameter: Porian et al. 2024,
  arXiv 2406.19146 §3.3; at least MIN_WARMUP_STEPS steps, at most a quarter of the run), then a
  cosine decay to LR_FINAL_RATIO of the peak, ending exactly at the run's own last step
  (Hoffmann et al. 2022 §3.1 and App. B: the cosine cycle matched to each run's token budget,
  decaying 10×). On the sweep, a 5%-of-steps warm-up cost the 5-tokens-per-parameter runs up to
  0.3 nats/byte at the higher learning rates, and warm-up over N tokens removed it;
- AdamW (β 0.9, 0.95; weight decay 0.1 on matrices, the tied embedding included, none on norm
  gains, as nanoGPT), gradient clipping at 1.0, fp32;
- evaluation on a fixed held-out split: the same EVAL_TOKENS bytes (fixed, evenly spaced windows of
  the probe's held-out documents) for every run.

Time: each run's predicted time is the planner's own (``trilemma.api.evaluate_layout``) with the
``local`` hardware profile shared out over the workers (a worker is given 1/workers of the measured
peak FLOP/s and memory bandwidth); the ladder's predicted wall time is the longest-first schedule of
those predictions over the workers.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from trilemma.errors import InputError
from trilemma.ladder.shapes import (
    ASPECT,
    HEAD_WIDTH,
    LR_C,
    LR_P,
    MAX_HEADS,
    MIN_LAYERS,
    SEQ,
    VOCAB,
    Shape,
    _counts,
    lr_for,
    params_of,
    shape_for_params,
    shape_for_width,
)
from trilemma.ladder.timing import predict_run, schedule_s, worker_hardware
from trilemma.units import SI

__all__ = [
    "DEFAULT",
    "TINY",
    "WIDTHS",
    "GridChoice",
    "LadderPlan",
    "RunSpec",
    "Shape",
    "lr_for",
    "make_plan",
    "params_of",
    "shape_for_params",
    "shape_for_width",
]

BATCH_SEQS = 4  # sequences per optimizer step, every run (512 tokens)
LR_FINAL_RATIO = 0.1  # cosine to 10% of the peak (Hoffmann 2022 App. B)
WARMUP_TOKENS_PER_PARAM = 1.0  # warm-up lasts N tokens (Porian et al. 2024)
MIN_WARMUP_STEPS = 5
WEIGHT_DECAY = 0.1
GRAD_CLIP = 1.0
BETAS = (0.9, 0.95)
EVAL_TOKENS = 131072  # 1024 windows of SEQ bytes
#: the width ladder the default grid and --minutes climb: rung k fits on WIDTHS[k:k+4] and holds out
#: WIDTHS[k+4] (1.7× to 3.4× the largest fitted size)
WIDTHS = (16, 24, 32, 40, 48, 64, 80, 96, 128, 192, 256, 384, 512)
FIT_SIZES = 4
MAX_HELD_OUT_RATIO = 4.0  # the held-out model is at most this many times the largest fitted size
STARTUP_S = 5.0  # importing torch, reading the corpus (predicted-time overhead of the whole ladder)


# ------------------------------------------------------------------ runs


@dataclass(frozen=True)
class RunSpec:
    """One training run, fully determined (its ``key`` names it in the results file)."""

    role: str  # "fit" or "held_out"
    shape: Shape
    tokens_per_param: float
    steps: int
    seq: int = SEQ
    batch_seqs: int = BATCH_SEQS
    lr: float = 0.0
    lr_final_ratio: float = LR_FINAL_RATIO
    warmup_steps: int = MIN_WARMUP_STEPS
    weight_decay: float = WEIGHT_DECAY
    grad_clip: float = GRAD_CLIP
    beta2: float = BETAS[1]
    seed: int = 0
    eval_tokens: int = EVAL_TOKENS
    data_fingerprint: str = ""  # sha256 of the corpus text (train and eval split), by the runner

    @property
    def n(self) -> int:
        """Non-embedding parameters (the law's N)."""
        return params_of(self.shape)

    @property
    def params_total(self) -> int:
        return _counts(self.shape, self.seq)[1]

    @property
    def tokens_per_step(self) -> int:
        return self.seq * self.batch_seqs

    @property
    def tokens(self) -> int:
        return self.steps * self.tokens_per_step

    @property
    def model_flop_per_token(self) -> float:
        return _counts(self.shape, self.seq)[2]

    @property
    def flop(self) -> float:
        """Model FLOPs of training (PaLM convention: trilemma.estimate.flops.model_flop_per_token)."""
        return self.tokens * self.model_flop_per_token

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same run: everything that changes the result (not the role)."""
        d = asdict(self)
        d.pop("role")
        d["shape"] = asdict(self.shape)
        d["model"] = "llama-style bytes"
        d["optimizer"] = {"name": "AdamW", "beta1": BETAS[0], "schedule": "linear warm-up, cosine"}
        return d

    @property
    def key(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"{self.shape.name} N={self.n / SI['k']:.0f}k D/N={self.tokens_per_param:g}"


def make_run(
    role: str,
    shape: Shape,
    ratio: float,
    *,
    seed: int = 0,
    eval_tokens: int = EVAL_TOKENS,
    data_fingerprint: str = "",
) -> RunSpec:
    """A run from the rules: tokens, steps, learning rate, warm-up."""
    n = params_of(shape)
    steps = max(1, round(ratio * n / (SEQ * BATCH_SEQS)))
    warm = max(MIN_WARMUP_STEPS, round(WARMUP_TOKENS_PER_PARAM * n / (SEQ * BATCH_SEQS)))
    warm = min(warm, max(1, steps // 4))
    return RunSpec(
        role=role,
        shape=shape,
        tokens_per_param=float(ratio),
        steps=steps,
        lr=round(lr_for(n), 6),
        warmup_steps=warm,
        seed=seed,
        eval_tokens=eval_tokens,
        data_fingerprint=data_fingerprint,
    )


# ------------------------------------------------------------------ grids


@dataclass(frozen=True)
class GridChoice:
    """Sizes (widths) × tokens-per-parameter to fit on, and the held-out width and ratio."""

    fit_widths: tuple[int, ...]
    ratios: tuple[float, ...]
    held_out_width: int
    held_out_ratio: float
    eval_tokens: int = EVAL_TOKENS
    name: str = "custom"


#: the default ladder (rung 1): 4 sizes (≈14k, 25k, 40k, 83k non-embedding parameters) × 4 token budgets
#: (5, 10, 20, 40 tokens per parameter) to fit on, and a held-out model of ≈2.4× the largest (201k) at 10
#: tokens per parameter; 3.2 to 6.8 minutes measured on this project's 2-core machine, depending on how busy it was
#: (the planner's prediction is shown before it starts)
DEFAULT = GridChoice(
    fit_widths=(24, 32, 40, 48),
    ratios=(5.0, 10.0, 20.0, 40.0),
    held_out_width=64,
    held_out_ratio=10.0,
    name="default",
)
#: `--tiny`: 10 trainings in about a minute (≈7k, 14k, 25k parameters × 3 budgets; held out ≈83k)
TINY = GridChoice(
    fit_widths=(16, 24, 32),
    ratios=(5.0, 10.0, 20.0),
    held_out_width=48,
    held_out_ratio=10.0,
    eval_tokens=32768,
    name="tiny",
)


def rung(
    k: int,
    ratios: tuple[float, ...] = DEFAULT.ratios,
    held_out_ratio: float = DEFAULT.held_out_ratio,
) -> GridChoice:
    """The k-th grid of the width ladder: fit on WIDTHS[k:k+4], hold out WIDTHS[k+4]."""
    return GridChoice(
        fit_widths=WIDTHS[k : k + FIT_SIZES],
        ratios=ratios,
        held_out_width=WIDTHS[k + FIT_SIZES],
        held_out_ratio=held_out_ratio,
        name=f"rung {k} (widths {WIDTHS[k]}-{WIDTHS[k + FIT_SIZES]})",
    )


@dataclass(frozen=True)
class PlannedRun:
    run: RunSpec
    predicted_s: float | None = None  # the planner's time for this run on its device (s)
    predicted_bytes: float | None = None  # the planner's peak memory of this run's device (bytes)


@dataclass(frozen=True)
class LadderPlan:
    grid: GridChoice
    runs: tuple[PlannedRun, ...]
    workers: int
    threads: int
    hardware: str | None  # the profile the predictions come from, in words; None: unavailable
    predicted_wall_s: float | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def fit_runs(self) -> tuple[RunSpec, ...]:
        return tuple(p.run for p in self.runs if p.run.role == "fit")

    @property
    def held_out(self) -> RunSpec:
        return next(p.run for p in self.runs if p.run.role == "held_out")

    def to_dict(self) -> dict[str, Any]:
        return {
            "grid": asdict(self.grid),
            "workers": self.workers,
            "threads_per_worker": self.threads,
            "hardware": self.hardware,
            "predicted_wall_s": self.predicted_wall_s,
            "rules": rules(),
            "runs": [
                {
                    "key": p.run.key,
                    "role": p.run.role,
                    "shape": p.run.shape.name,
                    "N": p.run.n,
                    "params_total": p.run.params_total,
                    "D": p.run.tokens,
                    "tokens_per_param": p.run.tokens_per_param,
                    "steps": p.run.steps,
                    "lr": p.run.lr,
                    "warmup_steps": p.run.warmup_steps,
                    "flop": p.run.flop,
                    "predicted_s": p.predicted_s,
                    "predicted_bytes": p.predicted_bytes,
                }
                for p in self.runs
            ],
            "warnings": list(self.warnings),
        }


def rules() -> dict[str, Any]:
    """The hyperparameter rules, in words and numbers (written into the plan and the law file)."""
    return {
        "model": f"Llama block (RMSNorm, SwiGLU 8/3·d, RoPE, no biases), tied embeddings, bytes (vocab {VOCAB}); "
        f"layers = max({MIN_LAYERS}, d_model/{ASPECT}), heads = divisor of d_model nearest d_model/{HEAD_WIDTH} (2 to {MAX_HEADS})",
        "N": "non-embedding parameters (Kaplan 2020 §3.1)",
        "seq": SEQ,
        "batch_seqs": BATCH_SEQS,
        "tokens_per_step": SEQ * BATCH_SEQS,
        "lr": f"{LR_C:g} · (N/1e5)^-{LR_P:g}",
        "lr_final_ratio": LR_FINAL_RATIO,
        "warmup": f"linear over N tokens (at least {MIN_WARMUP_STEPS} steps, at most 1/4 of the run); then cosine to "
        f"{LR_FINAL_RATIO:g} × peak at the run's last step",
        "optimizer": f"AdamW betas {BETAS}, weight decay {WEIGHT_DECAY:g} (matrices), clip {GRAD_CLIP:g}, fp32",
        "eval": "fixed evenly spaced windows of the held-out documents (every 20th file), same for every run",
    }


def make_plan(
    grid: GridChoice,
    *,
    hw: Any | None,
    workers: int,
    threads: int,
    seed: int = 0,
    data_fingerprint: str = "",
    share: int | None = None,
    precision: str = "fp32",
) -> LadderPlan:
    """Every run of ``grid`` with the rules' hyperparameters and the planner's predicted times on
    1/``share`` of ``hw`` each (default: 1/``workers``) in ``precision``; ``workers`` runs at once."""
    fit_shapes = [shape_for_width(w) for w in grid.fit_widths]
    held = shape_for_width(grid.held_out_width)
    check_grid(grid, fit_shapes, held)
    same = {"seed": seed, "eval_tokens": grid.eval_tokens, "data_fingerprint": data_fingerprint}
    runs = [make_run("fit", s, r, **same) for s in fit_shapes for r in grid.ratios]
    runs.append(make_run("held_out", held, grid.held_out_ratio, **same))
    parts = workers if share is None else share
    dev = None if hw is None else worker_hardware(hw, parts)
    planned = tuple(
        PlannedRun(r) if dev is None else PlannedRun(r, *predict_run(r, dev, precision))
        for r in runs
    )
    wall = (
        None if dev is None else STARTUP_S + schedule_s([p.predicted_s for p in planned], workers)
    )
    where = (
        None
        if hw is None
        else (f"{hw.name}" + (f", 1/{parts} of it per worker" if parts > 1 else ""))
    )
    return LadderPlan(
        grid=grid,
        runs=planned,
        workers=workers,
        threads=threads,
        hardware=where,
        predicted_wall_s=wall,
    )


def check_grid(grid: GridChoice, fit_shapes: list[Shape], held: Shape) -> None:
    from trilemma.quality.runs import MIN_RUNS, MIN_SIZES

    sizes = sorted({params_of(s) for s in fit_shapes})
    for flag, rs in (
        ("tokens-per-param", grid.ratios),
        ("holdout-tokens-per-param", (grid.held_out_ratio,)),
    ):
        for r in rs:
            if not (isinstance(r, (int, float)) and math.isfinite(r) and 0.5 <= r <= 1000):
                raise InputError(flag, r, "ratios between 0.5 and 1000 tokens per parameter")
    if len(sizes) < MIN_SIZES or len(sizes) * len(grid.ratios) < MIN_RUNS:
        few_ratios = len(sizes) >= MIN_SIZES  # enough sizes: the distinct ratios are what is short
        raise InputError(
            "tokens-per-param" if few_ratios else "sizes",
            ",".join(f"{r:g}" for r in grid.ratios)
            if few_ratios
            else ",".join(f"{s:,}" for s in sizes),
            f"at least {MIN_SIZES} distinct model sizes below the held-out one and {MIN_RUNS} runs to fit "
            f"(the largest size is held out); have {len(sizes)} sizes × {len(grid.ratios)} distinct ratios",
        )
    if not min(grid.ratios) <= grid.held_out_ratio <= max(grid.ratios):
        raise InputError(
            "holdout-tokens-per-param",
            grid.held_out_ratio,
            f"a ratio the grid covers ({min(grid.ratios):g} to {max(grid.ratios):g})",
        )
    n_h = params_of(held)
    if n_h <= sizes[-1]:
        raise InputError("sizes", f"{n_h:,}", "a held-out model larger than every fitted one")
    if n_h > MAX_HELD_OUT_RATIO * sizes[-1] * 1.0001:
        raise InputError(
            "sizes",
            f"{n_h:,}",
            f"a held-out size at most {MAX_HELD_OUT_RATIO:g}× the largest fitted "
            f"size ({sizes[-1]:,}): add an intermediate size",
        )
