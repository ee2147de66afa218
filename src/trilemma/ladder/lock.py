"""One ladder process per output directory at a time: an exclusive ``fcntl.flock`` on ``<out>/.lock``.

A second ``trilemma ladder`` on the same ``--out`` waits for the first to finish, then resumes from its
``runs.jsonl`` (the runs already there are not trained again). The kernel drops the lock when the
holding process ends, however it ends, so a killed ladder leaves no stale lock. Where ``fcntl`` does
not exist (Windows) nothing is locked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


@contextmanager
def directory_lock(out_dir: Path) -> Iterator[float]:
    """Hold ``out_dir``'s lock for the ``with`` block; yields the seconds spent waiting for it (0 when free)."""
    if fcntl is None:  # pragma: no cover
        yield 0.0
        return
    with open(out_dir / LOCK_NAME, "a+", encoding="utf-8") as f:
        t0 = time.perf_counter()
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # another ladder holds it: wait until it is done
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
