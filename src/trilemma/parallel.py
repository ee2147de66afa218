"""Independent work on every core: the one way the package starts worker processes."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes: nothing is inherited from the caller (no forked torch or
    thread state), so a job's result is the one the serial loop would give; a script that starts one
    needs the ``if __name__ == "__main__":`` guard."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
