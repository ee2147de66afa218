"""The ladder's progress: runs done, running and failed, the elapsed time and the planner's time left.

On a terminal, a progress bar on stderr (``rich``, imported only when shown); for scripts
(``--progress-json``), one JSON line on stderr per run that finishes or fails. The time left is the
planner's: the predicted times of the runs not finished, scheduled longest first over the runs that
train at once (``trilemma.ladder.timing.schedule_s``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from trilemma.ladder.timing import schedule_s
from trilemma.units import MINUTE

__all__ = ["LadderProgress"]


class LadderProgress:
    """Progress of ``total_runs`` runs, ``at_once`` of them training at a time (their planned
    seconds ``predicted``, None where unknown): a bar when ``enabled``, JSON lines when ``lines``;
    every method a no-op otherwise."""

    def __init__(
        self,
        enabled: bool,
        total_runs: int,
        *,
        predicted: Sequence[float | None] = (),
        at_once: int = 1,
        lines: bool = False,
    ) -> None:
        self.bar = None
        self.lines = lines and total_runs > 0
        self.total, self.done, self.failed = total_runs, 0, 0
        self.left = list(predicted)
        self.at_once = max(1, at_once)
        self.t0 = time.perf_counter()
        self.steps = None
        if enabled and total_runs:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            from trilemma.console import console

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=console(stderr=True),
                transient=True,
            )
            self.runs = self.bar.add_task("ladder runs", total=total_runs, info=self._counts())
            self.bar.start()

    def remaining_s(self) -> float | None:
        """The planner's seconds left for the runs not finished; None without predictions."""
        if None in self.left:
            return None
        return schedule_s([float(t) for t in self.left], self.at_once) if self.left else 0.0

    def _counts(self) -> str:
        running = min(self.at_once, self.total - self.done - self.failed)
        left = self.remaining_s()
        eta = "" if left is None else f", ~{left / MINUTE:.1f} min left (planner)"
        return f"{running} running, {self.failed} failed{eta}"

    def _finished(self, predicted_s: float | None, event: dict, last: str) -> None:
        if predicted_s in self.left:
            self.left.remove(predicted_s)
        if self.bar is not None:
            self.bar.update(self.runs, advance=1, info=f"{self._counts()}; {last}")
        if self.lines:
            out = {
                **event,
                "done": self.done,
                "failed": self.failed,
                "total": self.total,
                "elapsed_s": round(time.perf_counter() - self.t0, 3),
                "remaining_s": self.remaining_s(),
            }
            sys.stderr.write(json.dumps(out, allow_nan=False) + "\n")
            sys.stderr.flush()

    def start_run(self, label: str, steps: int) -> None:
        """A run starts in this process: a bar of its ``steps`` optimizer steps."""
        if self.bar is not None:
            if self.steps is not None:
                self.bar.remove_task(self.steps)
            self.steps = self.bar.add_task(f"  {label}", total=steps, info="")

    def step(self, k: int, loss: float) -> None:
        """Step ``k`` done with training ``loss`` (nats/byte); the bar moves every 10 steps."""
        if self.bar is not None and self.steps is not None and (k % 10 == 0):
            self.bar.update(self.steps, completed=k, info=f"loss {loss:.3f}")

    def run_done(
        self, label: str, loss: float | None, key: str = "", predicted_s: float | None = None
    ) -> None:
        """A run finished with held-out ``loss`` (nats/byte; None if it diverged)."""
        self.done += 1
        shown = loss if loss is None else round(loss, 4)
        event = {"event": "run_done", "key": key, "run": label, "loss": loss}
        self._finished(predicted_s, event, f"last: {label} loss {shown}")

    def run_failed(
        self, label: str, error: str, key: str = "", predicted_s: float | None = None
    ) -> None:
        """A run failed on every try on a cluster: counted as finished, shown as failed."""
        self.failed += 1
        event = {"event": "run_failed", "key": key, "run": label, "error": error}
        self._finished(predicted_s, event, f"failed: {label}")

    def close(self) -> None:
        """Stop the bar (safe to call more than once)."""
        if self.bar is not None:
            self.bar.stop()
