"""The probe's figures on this CPU: three model sizes in fp32, bf16 on a tiny one, and --nproc 2.

    python benchmarks/probe_cpu.py [--out probe_cpu.jsonl] [--skip-nproc]

Each run waits (up to --wait seconds) for the machine to be idle — on a shared 2-core machine
another process's work lands inside the timings — and the table reports how busy the machine
was just before the run. The machine's figures go to a temporary config directory unless
TRILEMMA_CONFIG_DIR is set; the first run measures it afresh (--remeasure).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = [  # (label, run_probe keyword arguments)
    ("default (L4 d256)", {}),
    ("L6 d384", {"layers": 6, "d_model": 384, "heads": 6, "ffn": 1536}),
    ("L8 d512", {"layers": 8, "d_model": 512, "heads": 8, "ffn": 2048}),
    (
        "tiny bf16 (L2 d128)",
        {"layers": 2, "d_model": 128, "heads": 2, "ffn": 512, "precision": "bf16"},
    ),
    ("default, --nproc 2", {"nproc": 2}),
]


def busy_fraction(window_s: float = 1.0) -> float:
    """Share of CPU time not idle over a short window (every process, this one included)."""

    def snap() -> tuple[int, int]:
        v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait

    t0, i0 = snap()
    time.sleep(window_s)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_for_quiet(max_wait_s: float, threshold: float = 0.1) -> float:
    end = time.monotonic() + max_wait_s
    b = busy_fraction()
    while b > threshold and time.monotonic() < end:
        b = busy_fraction(2.0)
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="append the records to this JSONL file")
    ap.add_argument(
        "--wait",
        type=float,
        default=120.0,
        help="seconds to wait for an idle machine before each run",
    )
    ap.add_argument("--skip-nproc", action="store_true")
    ap.add_argument("--only", default=None, help="run only the labels containing this text")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads per process (default: all cores / nproc)",
    )
    a = ap.parse_args()
    os.environ.setdefault("TRILEMMA_CONFIG_DIR", tempfile.mkdtemp(prefix="trilemma-cpu-"))

    from trilemma.probe import read_records

    out = a.out or str(Path(os.environ["TRILEMMA_CONFIG_DIR"]) / "probe_cpu.jsonl")
    first = True
    for label, kw in RUNS:
        if (a.skip_nproc and "nproc" in kw) or (a.only and a.only not in label):
            continue
        busy = wait_for_quiet(a.wait)
        # a fresh process per run: memory freed by one run stays resident and would hide in the next one's
        code = (
            "import sys, json; from trilemma.probe import run_probe; "
            f"run_probe(device='cpu', remeasure={first}, out={out!r}, threads={a.threads}, **json.loads(sys.argv[1]))"
        )
        subprocess.run([sys.executable, "-c", code, json.dumps(kw)], check=True)
        r = read_records(out)[-1]
        first = False
        c, m = r.comparison, r.measured
        sc = r.scaling
        print(
            f"{label:22s} params {m.params / 1e6:6.2f}M  busy {busy:4.0%}  step pred {c['step_time'].predicted:7.3f} s"
            f" meas {c['step_time'].measured:7.3f} s ratio {c['step_time'].ratio:5.2f}  tok/s meas "
            f"{m.tokens_per_s:8,.0f}  mem pred {c['memory'].predicted / 2**20:6.0f} MiB meas "
            f"{c['memory'].measured / 2**20:6.0f} MiB ratio {c['memory'].ratio:4.2f}  training-state ratio "
            f"{c['memory_training'].ratio:4.2f}  MFU {m.mfu:5.1%} (pred {r.predicted.mfu:5.1%})  spread "
            f"{m.step_time.spread:4.0%}  loss {m.loss_first:.2f}->{m.train_loss:.2f} eval {m.eval_loss:.2f}"
            + (
                f"  scaling eff {sc.efficiency:.1%} (pred {sc.predicted_efficiency:.1%}), vs whole machine "
                f"{sc.speedup_vs_whole_machine:.2f}x (pred {sc.predicted_speedup_vs_whole_machine:.2f}x)"
                if sc
                else ""
            )
            + (f"  [{'; '.join(r.warnings)}]" if r.warnings else ""),
            flush=True,
        )


if __name__ == "__main__":
    main()
