"""`trilemma fit` at scale: wall time and peak memory of a fit of 10^4, 10^5 and 10^6 runs.

    python benchmarks/fit_scale.py            # 1e4, 1e5, 1e6 runs
    python benchmarks/fit_scale.py 1e6 2e6    # chosen sizes

Each size is a CSV of synthetic runs from a known law (Besiroglu et al. 2024's refit, arXiv 2404.10102:
E = 1.82, A = 482.01, B = 2085.43, α = 0.3478, β = 0.3658) with 1% log-normal noise, N log-uniform
in [1e7, 1e10] and D in [1e9, 1e12]. `trilemma fit FILE --json` runs in a child process (start-up,
reading, point fit, 200 bootstrap refits, leave-out check, law file); the child's peak resident memory
is its `ru_maxrss` (resource.getrusage(RUSAGE_CHILDREN)). Floor: 10^6 runs in < 30 s and
< 1 GB. Before the fix: 10^5 runs > 150 s; 10^6 runs past 17 GB, then `_ArrayMemoryError`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TRUTH = {"E": 1.82, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}


def write_runs(path: Path, rows: int, seed: int = 1) -> None:
    """``rows`` synthetic runs of ``TRUTH`` with 1% multiplicative noise, as a CSV with columns N, D, loss."""
    rng = np.random.default_rng(seed)
    n = np.exp(rng.uniform(np.log(1e7), np.log(1e10), rows))
    d = np.exp(rng.uniform(np.log(1e9), np.log(1e12), rows))
    loss = (
        TRUTH["E"] + TRUTH["A"] / n ** TRUTH["alpha"] + TRUTH["B"] / d ** TRUTH["beta"]
    ) * np.exp(rng.normal(0.0, 0.01, rows))
    with open(path, "w") as f:
        f.write("N,D,loss\n")
        np.savetxt(f, np.c_[n, d, loss], fmt="%.6g", delimiter=",")


def fit_in_child(csv: Path) -> tuple[float, float, int, dict]:
    """(wall s, child's peak RSS in bytes, exit status, the JSON document) of `trilemma fit csv --json`."""
    cmd = [
        sys.executable,
        "-c",
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)",
        sys.executable,
        "-m",
        "trilemma.cli",
        "fit",
        str(csv),
        "--json",
        "--out",
        str(csv.with_suffix(".law.toml")),
    ]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    kib = int(p.stderr.strip().splitlines()[-1])  # Linux reports ru_maxrss in KiB
    doc = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.strip().splitlines()[0]}
    return wall, kib * 1024.0, p.returncode, doc


def main(sizes: list[int]) -> None:
    print(
        f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'runs':>10} {'wall s':>8} {'peak MB':>8}  {'E':>7} {'A':>8} {'B':>8} {'alpha':>7} {'beta':>7}  converged"
    )
    print(
        f"{'truth':>10} {'':>8} {'':>8}  "
        + " ".join(
            f"{TRUTH[k]:>{w}.4g}"
            for k, w in (("E", 7), ("A", 8), ("B", 8), ("alpha", 7), ("beta", 7))
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        for rows in sizes:
            csv = Path(tmp) / f"runs_{rows}.csv"
            write_runs(csv, rows)
            wall, rss, code, doc = fit_in_child(csv)
            if code != 0:
                print(f"{rows:>10,} {wall:>8.1f} {rss / 1e6:>8.0f}  exit {code}: {doc['error']}")
                continue
            law = doc["law"]
            print(
                f"{rows:>10,} {wall:>8.1f} {rss / 1e6:>8.0f}  "
                + " ".join(
                    f"{law[k]:>{w}.4g}"
                    for k, w in (("E", 7), ("A", 8), ("B", 8), ("alpha", 7), ("beta", 7))
                )
                + f"  {doc['convergence']['converged']}"
            )


if __name__ == "__main__":
    main([int(float(a)) for a in sys.argv[1:]] or [10_000, 100_000, 1_000_000])
