"""Reading a table of training runs (N, D, final loss) for a scaling-law fit: CSV or JSONL, columns
found by name, every value checked with a one-line error naming the row; model sizes grouped."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.fileio import RUNS_MAX_BYTES, open_input, parse_problem

MIN_RUNS, MIN_SIZES = 5, 3
SIZE_GROUPING = 0.02  # runs whose N differ by < 2% are one model size (digitised points scatter)
#: The most runs one fit reads: 3 columns of 8-byte floats stay under 100 MB, and a fit of this many
#: runs stays under ~1 GB and ~30 s (benchmarks/fit_scale.py); above it the file is refused.
MAX_RUNS = 2_000_000
CHUNK = 65_536  # rows converted to floats at a time


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
    """Index of the model size each run belongs to (sizes within 2% are one), in increasing N.

    A size starts at the smallest N not yet grouped and takes every N up to 2% above it: one
    ``searchsorted`` per size, so a million runs of a few hundred sizes group in milliseconds.
    """
    n = np.asarray(n, dtype=float)
    order = np.argsort(n, kind="stable")
    s = n[order]
    first = np.zeros(len(s), dtype=int)
    i = 0
    while i < len(s):
        first[i] = 1
        i = int(np.searchsorted(s, s[i] * (1 + SIZE_GROUPING), side="right"))
    group = np.empty(len(n), dtype=int)
    group[order] = np.cumsum(first) - 1
    return group


def n_sizes(n: np.ndarray) -> int:
    return int(size_groups(n).max()) + 1 if len(n) else 0


def _pick(columns: Sequence[str], wanted: str | None, default: str, flag: str, path: str) -> str:
    target = (wanted or default).strip().lower()
    for c in columns:
        if c.strip().lower() == target:
            return c
    have = ", ".join(columns) if columns else "none"
    raise InputError(
        "runs",
        path,
        f"a column named {wanted or default!r} (any case; map another with {flag}); "
        f"columns found: {have}",
    )


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
            raise InputError(
                "runs", path, f"numbers in column {field_} (row {row} has {v!r})"
            ) from None
    if not math.isfinite(f) or f <= 0:
        raise InputError("runs", path, f"positive values of {field_} (row {row} has {v!r})")
    return float(f)


def _first_line(f: Any) -> str:
    for line in f:
        if line.strip():
            return line
    return ""


def _jsonl_rows(f: Any, where: str) -> Iterator[dict[str, Any]]:
    for i, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else parse_problem(exc, "line")
            if why is None:
                raise
            raise InputError("runs", where, f"one JSON object per line (line {i}: {why})") from None
        if not isinstance(obj, dict):
            raise InputError("runs", where, f"one JSON object per line (line {i} is not an object)")
        yield obj


def _column(values: list[Any], first_row: int, field_: str, where: str, count: bool) -> np.ndarray:
    """A chunk of one column as floats: numpy's conversion, or row by row (``_number``) for the exact error."""
    try:
        out = np.array(values, dtype=float)
        if not any(type(v) is bool for v in values) and np.all(out > 0) and np.isfinite(out).all():
            return out
    except (ValueError, TypeError):
        pass
    return np.array(
        [_number(v, field_, first_row + k, where, count) for k, v in enumerate(values)], dtype=float
    )


def _gather(
    rows: Iterator[Sequence[Any]], names: tuple[str, str, str], where: str
) -> list[np.ndarray]:
    """N, D, loss of ``rows`` (one tuple of 3 cells each), converted ``CHUNK`` rows at a time, so that a
    million runs never become a million dicts; more than ``MAX_RUNS`` rows are refused."""
    parts: list[list[np.ndarray]] = [[], [], []]
    done = 0
    while chunk := list(itertools.islice(rows, CHUNK)):
        if done + len(chunk) > MAX_RUNS:
            raise InputError(
                "runs",
                where,
                f"at most {MAX_RUNS:,} runs in one fit (this file has more; fit a "
                "sample of its rows, or average repeats of one N and D)",
            )
        for j, (part, name) in enumerate(zip(parts, names)):
            part.append(_column([r[j] for r in chunk], done + 1, name, where, j < 2))
        done += len(chunk)
    return [np.concatenate(p) if p else np.empty(0) for p in parts]


def read_runs(
    path: str | Path,
    n_col: str | None = None,
    d_col: str | None = None,
    loss_col: str | None = None,
) -> Runs:
    """Runs from a CSV (header row) or JSONL (one object per line) file; N and D may be written 1.2e9 or 1.2B.

    The file is streamed: CSV in one pass, JSONL in two (its columns are the union of every object's
    keys); at most ``MAX_RUNS`` runs.
    """
    p = Path(path)
    where = str(path)
    if not os.path.exists(p):
        raise InputError("runs", where, "an existing CSV or JSONL file with columns N, D, loss")
    raw = open_input(p, "runs", what="CSV or JSONL file", max_bytes=RUNS_MAX_BYTES)
    try:
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
            is_jsonl = p.suffix.lower() in (".jsonl", ".ndjson", ".json") or _first_line(
                f
            ).lstrip().startswith("{")
            f.seek(0)
            if is_jsonl:
                columns: list[str] = list(
                    dict.fromkeys(k for r in _jsonl_rows(f, where) for k in r)
                )
                f.seek(0)
                rows: Iterator[Any] = _jsonl_rows(f, where)
            else:
                reader = csv.reader(f)
                columns = next(reader, [])
                rows = (
                    r for r in reader if r
                )  # csv.DictReader's rule: a row with no fields is skipped
            names = (
                _pick(columns, n_col, "N", "--n-col", where),
                _pick(columns, d_col, "D", "--d-col", where),
                _pick(columns, loss_col, "loss", "--loss-col", where),
            )
            if is_jsonl:
                cells: Iterator[Sequence[Any]] = (tuple(r.get(c) for c in names) for r in rows)
            else:
                # a repeated column name holds its last occurrence's value (as csv.DictReader reads it)
                i, j, k = (len(columns) - 1 - columns[::-1].index(c) for c in names)
                last = max(i, j, k)
                cells = (
                    (r[i], r[j], r[k])
                    if len(r) > last
                    else tuple(r[x] if x < len(r) else None for x in (i, j, k))
                    for r in rows
                )
            n, d, loss = _gather(cells, names, where)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError("runs", where, f"a readable UTF-8 text file ({exc})") from None
    runs = Runs(n, d, loss, where, names)
    check_enough(runs)
    return runs


def check_enough(runs: Runs) -> None:
    k = n_sizes(runs.n)
    if len(runs) < MIN_RUNS or k < MIN_SIZES:
        raise InputError(
            "runs",
            runs.source,
            f"at least {MIN_RUNS} runs and {MIN_SIZES} distinct model sizes "
            f"(found {len(runs)} runs, {k} sizes)",
        )
