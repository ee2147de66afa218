"""The probe on a GPU machine: the same figures as on a CPU, in under 5 minutes.

    python benchmarks/probe_gpu.py [--quick] [--out probe_gpu.jsonl]

Runs `trilemma probe` (the Python API, so nothing but torch is needed beyond the package) on
three sizes — the default small model, GPT-2 124M at full size, and a Llama-style model scaled to
~0.4B — in bf16 (the GPU default), then GPT-2 124M in fp32 and with full recompute, and, when
there are two or more GPUs, DDP over NCCL on two of them. For each it prints predicted beside
measured step time, tokens/s and memory, MFU against the measured matmul peak and against the
datasheet peak of a known GPU, and the losses. The machine's figures are written to a temporary
config directory unless TRILEMMA_CONFIG_DIR is set.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

RUNS = [  # (label, run_probe keyword arguments)
    ("default small model, bf16", {}),
    ("gpt2-124m, bf16, seq 1024 x 16", {"model": "gpt2-124m", "seq": 1024, "micro_batch": 16}),
    (
        "llama-style ~0.4B, bf16, seq 1024 x 8",
        {
            "model": "llama2-7b",
            "layers": 16,
            "d_model": 1280,
            "heads": 10,
            "vocab": 32000,
            "seq": 1024,
            "micro_batch": 8,
        },
    ),
    ("gpt2-124m, fp32", {"model": "gpt2-124m", "seq": 1024, "micro_batch": 8, "precision": "fp32"}),
    (
        "gpt2-124m, bf16, recompute full",
        {"model": "gpt2-124m", "seq": 1024, "micro_batch": 16, "recompute": "full"},
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (smoke test)")
    ap.add_argument("--out", default=None, help="append the records to this JSONL file")
    a = ap.parse_args()
    os.environ.setdefault("TRILEMMA_CONFIG_DIR", tempfile.mkdtemp(prefix="trilemma-gpu-"))

    import torch

    from trilemma.cli_probe import print_probe
    from trilemma.probe import run_probe

    if not torch.cuda.is_available():
        raise SystemExit(
            "no CUDA device: this script is for a GPU machine (the CPU figures come from `trilemma probe`)"
        )
    steps = 12 if a.quick else 30
    runs = list(RUNS)
    if torch.cuda.device_count() >= 2:
        runs.append(
            (
                "gpt2-124m, bf16, DDP over NCCL on 2 GPUs",
                {"model": "gpt2-124m", "seq": 1024, "micro_batch": 16, "nproc": 2},
            )
        )
    t_all = time.perf_counter()
    for label, kw in runs:
        t0 = time.perf_counter()
        print(f"\n=== {label}", flush=True)
        try:
            r = run_probe(device="cuda", steps=steps, out=a.out, **kw)
        except Exception as exc:  # noqa: BLE001 - keep going: one failed configuration should not hide the others
            print(f"failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        print_probe(r)
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"\nall runs: {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
