"""The planner's memory inventory against PyTorch's own accounting, category by category.

    python benchmarks/memory_vs_torch.py [--out results.csv] [--only N] [--fresh]

For each configuration, ``trilemma.probe.memtrack.track_step`` runs one real training step (forward,
cross-entropy, backward, AdamW) of the probe model on fake tensors under PyTorch's memory tracker
(MemTracker for ZeRO-0, FSDPMemTracker for FSDP2 = ZeRO-3 on a fake process group), and the planner's
``memory_per_device`` predicts the same rank. Compared: weights, gradients, optimizer state, activations
(what embeddings and layers save for backward, at the end of the last layer's forward, against the
planner's per-layer inventory times layers) and total tensor memory (PyTorch's peak against the
planner's weights + gradients + optimizer + activations + logits; the planner's framework overhead and
fragmentation are not tensor memory and are left out). Rows are appended to a CSV as they finish, so an
interrupted run resumes where it stopped. Floors: total median |error| <= 5 %, worst <= 10 %;
activations median <= 8 %.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from trilemma.estimate.activations import activation_bytes_per_layer
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.memory import memory_per_device
from trilemma.estimate.params import param_counts
from trilemma.presets import constants, model_presets
from trilemma.resolve import make_plan
from trilemma.shape import model_for_params
from trilemma.specs import Layout, ModelSpec, Recompute
from trilemma.specs.enums import DTYPE_BYTES


def _kv_heads(n_heads: int, group: int) -> int:
    """The largest K/V head count that divides n_heads with groups of at least ``group`` query heads."""
    return max(k for k in range(1, n_heads + 1) if n_heads % k == 0 and n_heads // k >= group)


def models() -> dict[str, ModelSpec]:
    """Dense MHA and GQA models from 125M to 8B parameters."""
    p = model_presets()
    l1b = model_for_params(1e9)
    return {
        "gpt3-125m": p["gpt3-125m"],  # MHA, learned positions, LayerNorm, GELU, tied
        "llama-350m": model_for_params(350e6),  # Llama-style shape rule (MHA)
        "llama-1b-gqa": l1b.model_copy(
            update={"name": "llama-1b-gqa", "n_kv_heads": _kv_heads(l1b.n_heads, 5)}
        ),
        "gpt3-1.3b": p["gpt3-1.3b"],
        "llama2-7b": p["llama2-7b"],  # MHA, RoPE, RMSNorm, SwiGLU
        "llama3-8b": p["llama3-8b"],  # GQA 32/8, 128k vocabulary
    }


# (model, seq, micro_batch, precision, recompute, world, fsdp)
CONFIGS: list[tuple[str, int, int, str, str, int, bool]] = [
    ("gpt3-125m", 1024, 1, "fp32", "none", 1, False),
    ("gpt3-125m", 2048, 4, "bf16", "none", 1, False),
    ("gpt3-125m", 2048, 2, "bf16", "full", 1, False),
    ("gpt3-125m", 2048, 2, "bf16", "selective", 1, False),
    ("gpt3-125m", 1024, 4, "fp32", "none", 2, True),
    ("gpt3-125m", 2048, 2, "bf16", "none", 8, True),
    ("llama-350m", 1024, 2, "fp32", "none", 1, False),
    ("llama-350m", 4096, 1, "bf16", "none", 1, False),
    ("llama-350m", 4096, 1, "bf16", "full", 1, False),
    ("llama-350m", 2048, 4, "bf16", "selective", 4, True),
    ("llama-350m", 2048, 2, "fp32", "full", 2, True),
    ("llama-1b-gqa", 2048, 1, "bf16", "none", 1, False),
    ("llama-1b-gqa", 8192, 1, "bf16", "none", 1, False),
    ("llama-1b-gqa", 4096, 2, "bf16", "full", 1, False),
    ("llama-1b-gqa", 4096, 1, "fp32", "selective", 1, False),
    ("llama-1b-gqa", 2048, 4, "bf16", "none", 4, True),
    ("llama-1b-gqa", 8192, 1, "bf16", "full", 8, True),
    ("gpt3-1.3b", 2048, 1, "bf16", "none", 1, False),
    ("gpt3-1.3b", 2048, 4, "fp32", "full", 1, False),
    ("gpt3-1.3b", 2048, 2, "bf16", "selective", 2, True),
    ("gpt3-1.3b", 2048, 1, "bf16", "none", 8, True),
    ("llama2-7b", 4096, 1, "bf16", "none", 1, False),
    ("llama2-7b", 4096, 1, "bf16", "full", 1, False),
    ("llama2-7b", 2048, 2, "bf16", "selective", 1, False),
    ("llama2-7b", 4096, 1, "bf16", "none", 8, True),
    ("llama2-7b", 4096, 2, "bf16", "full", 4, True),
    ("llama2-7b", 2048, 1, "fp32", "none", 2, True),
    ("llama3-8b", 8192, 1, "bf16", "none", 1, False),
    ("llama3-8b", 8192, 1, "bf16", "full", 1, False),
    ("llama3-8b", 4096, 2, "bf16", "selective", 1, False),
    ("llama3-8b", 8192, 1, "bf16", "none", 8, True),
    ("llama3-8b", 4096, 4, "bf16", "full", 8, True),
    ("llama3-8b", 2048, 1, "fp32", "none", 4, True),
    ("llama3-8b", 1024, 1, "fp32", "none", 1, False),
]

FIELDS = [
    "config",
    "torch_weights",
    "torch_grads",
    "torch_optimizer",
    "torch_activations",
    "torch_head",
    "torch_temp",
    "torch_peak",
    "peak_phase",
    "plan_weights",
    "plan_grads",
    "plan_optimizer",
    "plan_activations",
    "plan_logits",
    "plan_total",
    "seconds",
]


def label(c: tuple) -> str:
    name, seq, mb, prec, rc, world, fsdp = c
    return f"{name} s{seq} b{mb} {prec} rc={rc} " + (f"fsdp{world}" if fsdp else "zero0")


LOGITS_BYTES: float | None = None  # --logits-bytes: a what-if for memory.logits_bytes_per_element


def planner(
    spec: ModelSpec, seq: int, mb: int, prec: str, rc: str, world: int, fsdp: bool
) -> dict[str, float]:
    """The planner's bytes on one rank (tensor categories; overhead and fragmentation left out)."""
    plan = make_plan(
        spec, tokens=1e9, seq_len=seq, global_batch_tokens=float(seq * mb * world), precision=prec
    )
    layout = Layout(
        tp=1, pp=1, dp=world, zero=3 if fsdp else 0, recompute=Recompute(rc), micro_batch=mb
    )
    L = LayoutArrays.from_layouts([layout])
    consts = dict(constants()["memory"])
    if LOGITS_BYTES is not None:
        consts["logits_bytes_per_element"] = LOGITS_BYTES
    mem = memory_per_device(spec, param_counts(spec), plan, L, seq, np.array([1]), consts)
    e = DTYPE_BYTES[plan.dtypes.activation]
    _full, kept = activation_bytes_per_layer(spec, seq, L, e, plan.flash_attention)
    total = float((mem.weights + mem.gradients + mem.optimizer + mem.activations + mem.logits)[0])
    return {
        "plan_weights": float(mem.weights[0]),
        "plan_grads": float(mem.gradients[0]),
        "plan_optimizer": float(mem.optimizer[0]),
        "plan_activations": float(kept[0]) * spec.n_layers,
        "plan_logits": float(mem.logits[0]),
        "plan_total": total,
    }


def run_one(c: tuple, specs: dict[str, ModelSpec]) -> dict[str, object]:
    from trilemma.probe.memtrack import track_step

    name, seq, mb, prec, rc, world, fsdp = c
    t0 = time.perf_counter()
    r = track_step(specs[name], seq, mb, prec, rc, world=world, fsdp=fsdp)
    row: dict[str, object] = {
        "config": label(c),
        "torch_weights": r.weights_bytes,
        "torch_grads": r.gradients_bytes,
        "torch_optimizer": r.optimizer_bytes,
        "torch_activations": r.forward_layers_bytes,
        "torch_head": r.forward_bytes - r.forward_layers_bytes,
        "torch_temp": r.temporaries_bytes,
        "torch_peak": r.peak_bytes,
        "peak_phase": r.phase,
    }
    row.update(planner(specs[name], seq, mb, prec, rc, world, fsdp))
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def ratio(p: float, t: float) -> float:
    return p / t if t else float("nan")


def report(rows: list[dict[str, str]]) -> tuple[float, float, float, float]:
    """Print the table and the summary; returns (median, worst) |error| on total and on activations."""
    gb = 1e9
    head = (
        f"{'configuration':44s} {'torch GB: W':>11s} {'G':>6s} {'O':>6s} {'A':>6s} {'head':>6s} {'peak':>7s}"
        f" | {'plan/torch: W':>13s} {'G':>5s} {'O':>5s} {'A':>5s} {'total':>6s}  plan logits GB"
    )
    print(head)
    print("-" * len(head))
    tot_err, act_err = [], []
    for r in rows:
        v = {k: float(r[k]) for k in FIELDS if k not in ("config", "peak_phase")}
        rw = ratio(v["plan_weights"], v["torch_weights"])
        rg = ratio(v["plan_grads"], v["torch_grads"])
        ro = ratio(v["plan_optimizer"], v["torch_optimizer"])
        ra = ratio(v["plan_activations"], v["torch_activations"])
        rt = ratio(v["plan_total"], v["torch_peak"])
        tot_err.append(abs(rt - 1))
        act_err.append(abs(ra - 1))
        print(
            f"{r['config']:44s} {v['torch_weights'] / gb:11.2f} {v['torch_grads'] / gb:6.2f} "
            f"{v['torch_optimizer'] / gb:6.2f} {v['torch_activations'] / gb:6.2f} {v['torch_head'] / gb:6.2f} "
            f"{v['torch_peak'] / gb:7.2f} | {rw:13.3f} {rg:5.3f} {ro:5.3f} {ra:5.3f} {rt:6.3f}  "
            f"{v['plan_logits'] / gb:.2f} (peak in {r['peak_phase']})"
        )
    med_t, worst_t = statistics.median(tot_err), max(tot_err)
    med_a, worst_a = statistics.median(act_err), max(act_err)
    print(f"\n{len(rows)} configurations")
    print(
        f"total tensor memory: median |error| {med_t:.1%}, worst {worst_t:.1%}   (floors: 5 %, 10 %)"
    )
    print(
        f"activations alone:   median |error| {med_a:.1%}, worst {worst_a:.1%}   (floor: median 8 %)"
    )
    worst = sorted(range(len(rows)), key=lambda i: -tot_err[i])[:5]
    print("worst on total: " + "; ".join(f"{rows[i]['config']} ({tot_err[i]:.1%})" for i in worst))
    return med_t, worst_t, med_a, worst_a


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "trilemma_memory_vs_torch.csv",
        help="CSV of results, appended row by row; rows already there are not rerun",
    )
    ap.add_argument("--only", type=int, default=None, help="run only the first N configurations")
    ap.add_argument(
        "--fresh", action="store_true", help="discard the CSV's rows and rerun everything"
    )
    ap.add_argument(
        "--replan",
        action="store_true",
        help="recompute the planner's columns of rows already in the CSV (after a planner change)",
    )
    ap.add_argument(
        "--logits-bytes",
        type=float,
        default=None,
        help="what-if: bytes per logit element instead of constants.toml's memory.logits_bytes_per_element",
    )
    a = ap.parse_args(argv)
    global LOGITS_BYTES
    LOGITS_BYTES = a.logits_bytes
    if a.fresh and a.out.exists():
        a.out.unlink()
    done: dict[str, dict[str, str]] = {}
    if a.out.exists():
        with a.out.open() as f:
            done = {r["config"]: r for r in csv.DictReader(f)}
    specs = models()
    configs = CONFIGS[: a.only] if a.only else CONFIGS
    if a.replan:
        for c in configs:
            if label(c) in done:
                done[label(c)].update({k: str(v) for k, v in planner(specs[c[0]], *c[1:]).items()})
    new_file = not a.out.exists()
    with a.out.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new_file:
            w.writeheader()
        for c in configs:
            if label(c) in done:
                continue
            row = run_one(c, specs)
            w.writerow(row)
            f.flush()
            done[label(c)] = {k: str(v) for k, v in row.items()}
            print(f"done {label(c)} in {row['seconds']} s", file=sys.stderr, flush=True)
    report([done[label(c)] for c in configs])
    print(f"\nrows: {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
