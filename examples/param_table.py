"""Print trilemma's parameter count of every model preset next to the published figure.

Usage (from the repository root):  PYTHONPATH=src python examples/param_table.py [--full-source]

Published figures and their sources come from tests/data/published_params.csv (tolerance 0: an exact
count; otherwise a rounded or nominal figure). Counts come from the package's presets.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from trilemma.estimate.params import param_counts
from trilemma.presets import model_presets

CSV = Path(__file__).resolve().parents[1] / "tests" / "data" / "published_params.csv"


def _published() -> dict[str, dict[str, str]]:
    with CSV.open(newline="", encoding="utf-8") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def _rel(ours: int, published: int) -> str:
    if ours == published:
        return "exact"
    return f"{(ours - published) / published:+.3%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full-source", action="store_true", help="do not shorten the source column")
    args = ap.parse_args()

    pub = _published()
    header = ("model", "ours", "published", "rel. error", "tol.", "source")
    lines = []
    for name, spec in model_presets().items():
        p = param_counts(spec)
        row = pub.get(name)
        ours = f"{p.total:,}"
        if p.active != p.total:
            ours += f" ({p.active:,} active)"
        if row is None:
            lines.append((name, ours, "-", "-", "-", spec.source))
            continue
        published = int(row["published_total"])
        err = _rel(p.total, published)
        shown = f"{published:,}"
        if row["published_active"]:
            pa = int(row["published_active"])
            shown += f" ({pa:,} active)"
            err += f" / {_rel(p.active, pa)}"
        tol = float(row["tolerance"])
        lines.append((name, ours, shown, err, "0" if tol == 0 else f"{tol:g}", row["source"]))

    if not args.full_source:
        lines = [(*r[:5], r[5] if len(r[5]) <= 90 else r[5][:87] + "...") for r in lines]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    fmt = "  ".join(f"{{:{'<' if i in (0, 5) else '>'}{w}}}" for i, w in enumerate(widths))
    print(fmt.format(*header).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in lines:
        print(fmt.format(*r).rstrip())


if __name__ == "__main__":
    main()
