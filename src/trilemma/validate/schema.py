"""The column schema of backtest rows (``trilemma/data/{runs,throughput,memory}.csv`` and a user's own
file for ``trilemma validate --data``), and reading a CSV into typed, checked rows.

Every column the mapper reads is listed once in :data:`COLUMNS` with its type, allowed values, unit
and whether it is required; ``data/SCHEMA.md`` documents the same list for people. A bad cell is an
:class:`RowError` naming the file, the row, the column, the value and what is allowed. Columns of
the published record (``*_published``, ``*_reported``, ``params`` …) are carried and ignored.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from typing import Any

from trilemma.errors import InputError
from trilemma.fileio import read_bytes
from trilemma.units import MIB
from trilemma.validate.columns import BY_NAME, COLUMNS, PUBLISHED

__all__ = [
    "Row",
    "RowError",
    "parse_row",
    "read_csv",
    "read_text",
]

#: The most rows `validate --data` reads: each row is a full estimate (a few ms), so 5,000 rows take
#: ~15-25 s; the byte cap keeps a file without line breaks from being read whole into memory.
MAX_DATA_ROWS = 5_000
MAX_DATA_BYTES = int(16 * MIB)


class RowError(InputError):
    """One bad cell: ``FILE row N (line L), column C: 'V' is not allowed; expected …`` (exit status 2).

    Rows count data rows from 1; the line counts the header too."""

    def __init__(self, where: str, row: int, column: str, value: object, allowed: str) -> None:
        self.row, self.column = row, column
        super().__init__(f"{where} row {row} (line {row + 1}), column {column}", value, allowed)


@dataclass(frozen=True)
class Row:
    """One data row: its 0-based index, its label and its typed cells (empty cells left out)."""

    index: int
    label: str
    cells: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        return self.cells.get(name, default)


def parse_row(raw: dict[str, str], index: int, where: str) -> Row:
    """Typed cells of one CSV row; a bad cell raises :class:`RowError` (row numbers count from 1)."""
    cells: dict[str, Any] = {}
    for name, value in raw.items():
        col = BY_NAME.get(name)
        text = (value or "").strip()
        if col is None or not text:
            continue
        try:
            v = col.parse(text)
        except ValueError:
            raise RowError(where, index + 1, name, text, col.allowed) from None
        cells[name] = v
    label = (raw.get("model") or raw.get("model_or_size") or "").strip() or f"row {index + 1}"
    if not cells.get("skip_reason"):
        for col in COLUMNS:
            if col.required and col.name not in cells:
                raise RowError(where, index + 1, col.name, None, col.allowed)
    return Row(index=index, label=label, cells=cells)


def read_text(text: str, where: str) -> list[dict[str, str]]:
    """The raw rows of CSV text; a header with unknown or missing columns is an :class:`InputError`."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    doubled = sorted({h for h in header if header.count(h) > 1})
    if doubled:
        raise InputError(
            f"{where} columns",
            ", ".join(doubled),
            "each column once (a repeated column would keep only its last cell)",
        )
    unknown = [h for h in header if h not in BY_NAME and h not in PUBLISHED]
    if unknown:
        raise InputError(
            f"{where} columns",
            ", ".join(unknown),
            "the backtest schema's columns (data/SCHEMA.md in the package), e.g. metric, reported, "
            "gpu, n_gpus, model_preset, seq_len, tp, pp, dp",
        )
    missing = [c.name for c in COLUMNS if c.required and c.name not in header]
    if missing:
        raise InputError(
            f"{where} columns",
            ", ".join(header) or "(none)",
            f"a header with the required columns {', '.join(missing)} (data/SCHEMA.md)",
        )
    rows = list(reader)
    for i, r in enumerate(rows):
        if None in r:
            raise InputError(
                f"{where} row {i + 1}",
                f"{len(header) + len(r[None])} cells",
                f"{len(header)} cells, one per header column",
            )
        if any(v is None for v in r.values()):
            short = sum(v is not None for v in r.values())
            raise InputError(
                f"{where} row {i + 1}",
                f"{short} cells",
                f"{len(header)} cells, one per header column (empty cells are written as ,,)",
            )
    return rows


def read_csv(path: str) -> tuple[str, list[dict[str, str]]]:
    """(file name for messages, raw rows) of a user's CSV; any problem reading it is one InputError."""
    where = os.path.basename(path) or path
    # a regular file (never a FIFO or a device) of at most MAX_DATA_BYTES, read no further
    data = read_bytes(path, "--data", what="CSV file", max_bytes=MAX_DATA_BYTES)
    if data.count(b"\n") > MAX_DATA_ROWS + 1:
        raise InputError(
            "--data",
            path,
            f"a CSV file of at most {MAX_DATA_ROWS:,} rows and {MAX_DATA_BYTES / MIB:.0f} "
            "MiB (each row is a full estimate, a few ms; split a larger file)",
        )
    if b"\0" in data:
        raise InputError("--data", path, "a text CSV file (this one is binary)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("--data", path, "a UTF-8 text CSV file") from None
    if not text.strip():
        raise InputError(
            "--data", path, "a CSV file with a header and at least one row (this one is empty)"
        )
    rows = read_text(text, where)
    if not rows:
        raise InputError(
            "--data",
            path,
            "a CSV file with a header and at least one row (this one has a header only)",
        )
    return where, rows
