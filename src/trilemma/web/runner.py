"""The computations of `trilemma serve`: one at a time on a worker thread, with two separate limits.

A request first waits for the worker (behind at most ``max_waiting`` others), then runs. The two
are limited apart, each with its own refusal, so that a fast request queued behind slow ones is not
refused as slow:

- more than ``max_waiting`` already waiting: :class:`Busy` (HTTP 429 with Retry-After), at once;
- not started within ``queue_limit_s``: :class:`Queued` (HTTP 503 with Retry-After), the request
  taken off the queue unrun;
- still running ``time_limit_s`` after it started: :class:`TooSlow` (HTTP 422 naming ``search``).
  A search cannot be stopped midway: it finishes on the worker, and what waits behind it is bounded
  by the two refusals above.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

TIME_LIMIT_S = (
    10.0  # one computation once started; the largest allowed solve takes about 5 s on 2 cores
)
QUEUE_LIMIT_S = 30.0  # waiting for the worker: MAX_WAITING searches of ~5 s each fit, with margin
MAX_WAITING = 4  # computations queued behind the running one before a request is told to come back
MAX_CONFIGURATIONS = 40_000  # a solve's (model sizes × GPU types × precisions × GPU counts)


class RetryLater(Exception):
    """A refusal that tells the client when to come back (``retry_after_s``, whole seconds) and with
    which HTTP status."""

    status = 503

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(f"{message}; try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Busy(RetryLater):
    """More computations are waiting than allowed: refused at once."""

    status = 429

    def __init__(self, waiting: int, retry_after_s: int) -> None:
        super().__init__(
            f"busy: {waiting} computations are already waiting, the most `trilemma serve` queues",
            retry_after_s,
        )


class Queued(RetryLater):
    """The request waited ``limit_s`` for the worker and was taken off the queue before it ran."""

    def __init__(self, limit_s: float, retry_after_s: int) -> None:
        super().__init__(
            f"queue: the request waited {limit_s:g} s behind other computations, the limit of "
            "`trilemma serve`, and was not started",
            retry_after_s,
        )


class TooSlow(Exception):
    """The computation ran (not counting its wait in the queue) longer than ``limit_s``."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(
            f"search: the request ran longer than the {limit_s:g} s limit of `trilemma serve` and was "
            "refused; narrow it (fewer model sizes, GPU types, precisions or GPUs) or use the command line"
        )


class Runner:
    """One computation at a time on a worker thread; limits on the wait for it and on its run (s)."""

    def __init__(
        self,
        time_limit_s: float = TIME_LIMIT_S,
        max_waiting: int = MAX_WAITING,
        queue_limit_s: float = QUEUE_LIMIT_S,
    ) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trilemma-serve")
        self.max_waiting = max_waiting
        self.slots = threading.BoundedSemaphore(max_waiting + 1)
        self.time_limit_s, self.queue_limit_s = time_limit_s, queue_limit_s
        # when to come back: one computation's run limit, the longest the one ahead can hold the worker
        self.retry_after_s = max(1, math.ceil(time_limit_s))

    def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the worker thread; Busy, Queued or TooSlow when a limit is reached."""
        if not self.slots.acquire(blocking=False):
            raise Busy(self.max_waiting, self.retry_after_s)
        started = threading.Event()

        def job() -> Any:
            started.set()
            # numpy's overflow warnings are not printed (as the CLI's main): a result that overflowed
            # is refused where it is written (report.jsonout); np.errstate is per thread
            with np.errstate(all="ignore"):
                return fn()

        future = self.pool.submit(job)
        future.add_done_callback(lambda _: self.slots.release())
        # cancel() fails only once the job has started: then it is timed as a run like any other
        if not started.wait(self.queue_limit_s) and future.cancel():
            raise Queued(self.queue_limit_s, self.retry_after_s)
        try:
            return future.result(timeout=self.time_limit_s)
        except FutureTimeout:
            raise TooSlow(self.time_limit_s) from None
