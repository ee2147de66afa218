"""Start-up time of the CLI: `trilemma estimate` on its embedded defaults, beside `python -c pass`
and the bare import of the CLI module, median wall-clock seconds over repeated fresh processes.

    python benchmarks/startup.py [--repeat 15]

Each figure is a new interpreter (what a user pays per call in a shell loop); the median is
quoted because the first runs warm the page cache. Bytecode caching is on, as on a user's machine:
PYTHONDONTWRITEBYTECODE is removed from the children's environment (some sandboxes set it, and then
every run recompiles the package from source), and the warm-up run writes the caches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str], repeat: int) -> float:
    """Median wall-clock seconds of running ``cmd`` ``repeat`` times (after one warm-up run)."""

    def run():
        return subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV
        )  # noqa: E731

    run()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    py = sys.executable
    exe = (
        shutil.which("trilemma", path=os.path.dirname(py)) or shutil.which("trilemma") or "trilemma"
    )
    rows = [
        ("python -c pass", [py, "-c", "pass"]),
        # the floor: the libraries the CLI cannot run without (numerics, specs, CLI, tables)
        (
            "numpy+pydantic+typer+rich",
            [py, "-c", "import numpy, pydantic, typer, rich.console, rich.table"],
        ),
        ("import trilemma.cli", [py, "-c", "import trilemma.cli"]),
        ("trilemma estimate", [exe, "estimate"]),
        ("trilemma estimate --json", [exe, "estimate", "--json"]),
    ]
    print(f"median wall over {args.repeat} fresh processes")
    for label, cmd in rows:
        print(f"  {label:28s} {wall(cmd, args.repeat):6.3f} s")


if __name__ == "__main__":
    main()
