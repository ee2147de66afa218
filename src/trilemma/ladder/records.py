"""The ladder's results file: versioned JSONL, one finished training run per line, nothing else.

Writing (``append_record``): the whole record is serialised to one line first, then written with a
single ``write()`` on a descriptor opened with ``O_APPEND``, under an exclusive ``fcntl.flock`` on
that descriptor. O_APPEND makes the kernel place each write at the current end of file, so two
processes never overwrite each other; the lock keeps two writers from interleaving the "end with a
newline?" check with each other's writes, and makes readers that take the shared lock see whole
lines. A write that the kernel cuts short (disk full) is undone by truncating back to the length
before it, so the file only ever grows by whole, newline-terminated records, and is one line naming
the file and the cause (``trilemma.fileio.append_line``, shared with the probe's records). If the file does not
end in a newline (a foreign writer crashed mid-line), the record is written after one, so that the
damaged line stays a single line, reported when read.

Reading (``read_records``): every line is parsed on its own; an empty line is ignored, and a line
that is not JSON, not an object, or not a ladder record of a schema this version reads is skipped
with a warning naming its line number. Nothing in the file is ever fatal.

The record itself (built by ``trilemma.ladder.train``) follows the probe's record style
(``trilemma.probe.result``): a ``schema``, then ``model``, ``run``, ``measured``, ``predicted``,
``environment``, ``data`` blocks, in SI units. It also carries top-level ``N``, ``D`` and ``loss``
so that ``trilemma fit DIR/runs.jsonl`` reads the file as it is.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trilemma.fileio import RECORDS_MAX_BYTES, append_line, open_input, parse_problem

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.ladder.plan import LadderPlan, RunSpec

try:  # POSIX; elsewhere O_APPEND alone keeps whole-record writes apart
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "SCHEMA",
    "RecordsRead",
    "append_record",
    "encode_record",
    "failed_record",
    "record_head",
    "read_records",
    "resume",
]

SCHEMA = "trilemma.ladder/1"
_READABLE = ("trilemma.ladder/1",)
_REQUIRED = ("key", "role", "N", "D", "loss")


def encode_record(record: dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON ending in a newline; refuses what would not read back as a record."""
    if record.get("schema") != SCHEMA:
        raise ValueError(f"not a ladder record: schema {record.get('schema')!r}")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise ValueError(f"ladder record without {', '.join(missing)}")
    # allow_nan=False: NaN is not JSON; a diverged run records its loss as null, never NaN
    line = json.dumps(record, separators=(",", ":"), allow_nan=False, default=str)
    assert "\n" not in line  # json.dumps escapes newlines inside strings
    return (line + "\n").encode("utf-8")


def append_record(path: str | Path, record: dict[str, Any]) -> None:
    """Append ``record`` as exactly one line (``trilemma.fileio.append_line``: O_APPEND, one write()
    under an exclusive flock, cut back if it fails); a failed write is one InputError."""
    data = encode_record(record)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    append_line(p, data, "out")


def record_head(run: RunSpec, loss: float | None) -> dict[str, Any]:
    """The fields every ladder record starts with: schema, run key and role, N, D and the loss
    (nats/byte; None: no finite loss)."""
    return {
        "schema": SCHEMA,
        "key": run.key,
        "role": run.role,
        "N": run.n,
        "D": run.tokens,
        "loss": loss,
    }


def run_from_dict(d: dict[str, Any]) -> RunSpec:
    """A run as its record's ``run`` field holds it (``trilemma.ladder.train.run_to_dict``)."""
    from trilemma.ladder.plan import RunSpec, Shape

    return RunSpec(**{**d, "shape": Shape(**d["shape"])})


def failed_record(task: dict[str, Any], error: str) -> dict[str, Any]:
    """The record of a run that failed on every try on a cluster (``status`` failed, its error, no
    loss): kept for the user to read; a later call trains the run again (``resume`` skips it)."""
    return {
        **record_head(run_from_dict(task["run"]), None),
        "status": "failed",
        "error": error,
        "run": task["run"],
    }


@dataclass(frozen=True)
class RecordsRead:
    """What a results file holds: the readable records in file order, and why other lines were skipped."""

    records: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...]
    lines: int


def _why_not(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return "not a JSON object"
    schema = obj.get("schema")
    if schema not in _READABLE:
        return f"not a ladder record (schema {schema!r}; this version reads {', '.join(_READABLE)})"
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        return f"a ladder record without {', '.join(missing)}"
    for k in ("N", "D"):
        v = obj[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return f"a ladder record whose {k} is not a positive number"
    return None


def read_records(path: str | Path) -> RecordsRead:
    """Every readable record of ``path`` (none if it does not exist); bad lines become warnings."""
    p = Path(path)
    if not os.path.lexists(p):
        return RecordsRead((), (), 0)
    with open_input(
        p, "out", what="results file (runs.jsonl)", max_bytes=RECORDS_MAX_BYTES, named=False
    ) as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)  # never read a record half-written
        try:
            raw = fh.read()
        finally:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    records, warnings = [], []
    lines = raw.split(b"\n")
    torn = lines[-1] != b""  # the last line has no newline: cut short
    n = 0
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        n += 1
        if torn and i == len(lines):
            warnings.append(
                f"{p}:{i}: skipped an unfinished last line (no newline; {len(line)} bytes)"
            )
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            if isinstance(exc, UnicodeDecodeError):
                why = "not UTF-8"
            elif isinstance(exc, json.JSONDecodeError):
                why = exc.msg
            else:
                why = parse_problem(exc, "line") or str(exc)
            warnings.append(f"{p}:{i}: skipped a line that is not JSON ({why})")
            continue
        why = _why_not(obj)
        if why:
            warnings.append(f"{p}:{i}: skipped {why}")
            continue
        records.append(obj)
    return RecordsRead(tuple(records), tuple(warnings), n)


def resume(
    plan: LadderPlan, runs_path: Path, warnings: list[str], notes: list[str]
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The records of ``runs_path`` that belong to ``plan``, by run key, and the set of those keys.

    Unreadable lines, repeated keys and other ladders' records are reported in ``warnings`` / ``notes``.
    """
    got = read_records(runs_path)
    warnings.extend(got.warnings)
    by_key: dict[str, dict[str, Any]] = {}
    planned_keys = {p.run.key for p in plan.runs}
    foreign = 0
    failed: dict[str, str] = {}
    for r in got.records:
        if r["key"] not in planned_keys:
            foreign += 1
        elif r.get("status") == "failed":
            failed[r["key"]] = str(r.get("error"))
        elif r["key"] in by_key:
            warnings.append(
                f"{runs_path}: run {r['key']} appears more than once; the first record is used"
            )
        else:
            by_key[r["key"]] = r
    failed = {k: e for k, e in failed.items() if k not in by_key}
    if failed:
        notes.append(
            f"{len(failed)} run(s) failed on a cluster before (last error: "
            f"{next(iter(failed.values()))}): trained again"
        )
    if foreign:
        notes.append(
            f"{foreign} record(s) in {runs_path} belong to other ladders (other grids, data or rules): not used"
        )
    return by_key, set(by_key)
