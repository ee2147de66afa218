"""Reading a table of training runs (N, D, final loss) for a scaling-law fit: CSV or JSONL, columns
found by name, every value checked with a one-line error naming the row; model sizes grouped."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trilemma.errors import InputError

MIN_RUNS, MIN_SIZES = 5, 3
SIZE_GROUPING = 0.02  # runs whose N differ by < 2% are one model size (digitised points scatter)



@dataclass(frozen=True)
class Runs:
    """A table of runs: parameters N, tokens D, final loss; all positive."""

    n: np.ndarray
    d: np.ndarray
    loss: np.ndarray
    source: str = "runs"
    columns: tuple[str, str, str] = ("N", "D", "loss")

    def __len__(self) -> int:
        return len(self.n)

    def subset(self, idx: np.ndarray) -> Runs:
        return Runs(self.n[idx], self.d[idx], self.loss[idx], self.source, self.columns)


def size_groups(n: np.ndarray) -> np.ndarray:
    """Index of the model size each run belongs to (sizes within 2% are one), in increasing N."""
    order = np.argsort(n)
    group = np.empty(len(n), dtype=int)
    g, last = -1, -math.inf
    for i in order:
        if n[i] > last * (1 + SIZE_GROUPING):
            g += 1
            last = n[i]
        group[i] = g
    return group


def n_sizes(n: np.ndarray) -> int:
    return int(size_groups(n).max()) + 1 if len(n) else 0


def _pick(columns: Sequence[str], wanted: str | None, default: str, flag: str, path: str) -> str:
    target = (wanted or default).strip().lower()
    for c in columns:
        if c.strip().lower() == target:
            return c
    have = ", ".join(columns) if columns else "none"
    raise InputError("runs", path, f"a column named {wanted or default!r} (any case; map another with {flag}); "
                                   f"columns found: {have}")


def _number(v: Any, field_: str, row: int, path: str, count: bool) -> float:
    from trilemma.units import parse_count

    if isinstance(v, bool) or v is None or (isinstance(v, str) and not v.strip()):
        raise InputError("runs", path, f"a value of {field_} in every run (row {row} has none)")
    try:
        f = float(v)
    except (ValueError, TypeError):
        try:
            f = parse_count(v, field_) if count else math.nan  # "1.2B", "7e9"
        except InputError:
            f = math.nan
        if math.isnan(f):
            raise InputError("runs", path, f"numbers in column {field_} (row {row} has {v!r})") from None
    if not math.isfinite(f) or f <= 0:
        raise InputError("runs", path, f"positive values of {field_} (row {row} has {v!r})")
    return float(f)


def read_runs(path: str | Path, n_col: str | None = None, d_col: str | None = None,
              loss_col: str | None = None) -> Runs:
    """Runs from a CSV (header row) or JSONL (one object per line) file; N and D may be written 1.2e9 or 1.2B."""
    p = Path(path)
    where = str(path)
    if not p.is_file():
        raise InputError("runs", where, "an existing CSV or JSONL file with columns N, D, loss")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError("runs", where, f"a readable UTF-8 text file ({exc})") from None
    rows: list[dict[str, Any]]
    is_jsonl = p.suffix.lower() in (".jsonl", ".ndjson", ".json") or text.lstrip().startswith("{")
    if is_jsonl:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError("runs", where, f"one JSON object per line (line {i}: {exc.msg})") from None
            except RecursionError:
                raise InputError("runs", where, f"one JSON object per line (line {i} is nested too deep)") from None
            if not isinstance(obj, dict):
                raise InputError("runs", where, f"one JSON object per line (line {i} is not an object)")
            rows.append(obj)
        columns: list[str] = list(dict.fromkeys(k for r in rows for k in r))
    else:
        reader = csv.DictReader(text.splitlines())
        columns = [c for c in (reader.fieldnames or []) if c is not None]
        rows = list(reader)
    cn = _pick(columns, n_col, "N", "--n-col", where)
    cd = _pick(columns, d_col, "D", "--d-col", where)
    cl = _pick(columns, loss_col, "loss", "--loss-col", where)
    n = np.array([_number(r.get(cn), cn, i, where, True) for i, r in enumerate(rows, 1)], dtype=float)
    d = np.array([_number(r.get(cd), cd, i, where, True) for i, r in enumerate(rows, 1)], dtype=float)
    loss = np.array([_number(r.get(cl), cl, i, where, False) for i, r in enumerate(rows, 1)], dtype=float)
    runs = Runs(n, d, loss, where, (cn, cd, cl))
    check_enough(runs)
    return runs


def check_enough(runs: Runs) -> None:
    k = n_sizes(runs.n)
    if len(runs) < MIN_RUNS or k < MIN_SIZES:
        raise InputError("runs", runs.source, f"at least {MIN_RUNS} runs and {MIN_SIZES} distinct model sizes "
                                              f"(found {len(runs)} runs, {k} sizes)")
