"""Regenerate ``trilemma/presets/benchmarks.toml``: the benchmark curves fitted afresh on
``trilemma/data/benchmarks.csv`` (trilemma.quality.bench_fit.fit_all; tests/test_benchmarks.py checks the
shipped file equals a fresh fit).

    python scripts/fit_benchmarks.py
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from trilemma.fileio import write_text_atomic
from trilemma.quality.bench_fit import HEADER, fit_all
from trilemma.tomlw import toml_dumps


def main() -> None:
    path = Path(str(resources.files("trilemma.presets").joinpath("benchmarks.toml")))
    write_text_atomic(path, HEADER + toml_dumps(fit_all()), "benchmarks.toml")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
