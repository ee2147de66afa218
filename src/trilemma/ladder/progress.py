"""The ladder's progress on a terminal: runs done, and the run in training (``rich``, imported only when shown)."""

from __future__ import annotations

__all__ = ["LadderProgress"]


class LadderProgress:
    """A progress bar on stderr (rich): the runs done, and the steps and loss of the run in training.

    Disabled (every method a no-op) unless ``enabled`` and there are runs to train.
    """

    def __init__(self, enabled: bool, total_runs: int) -> None:
        self.bar = None
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
            self.runs = self.bar.add_task("ladder runs", total=total_runs, info="")
            self.steps = None
            self.bar.start()

    def start_run(self, label: str, steps: int) -> None:
        """A run starts: a bar of its ``steps`` optimizer steps."""
        if self.bar is not None:
            if self.steps is not None:
                self.bar.remove_task(self.steps)
            self.steps = self.bar.add_task(f"  {label}", total=steps, info="")

    def step(self, k: int, loss: float) -> None:
        """Step ``k`` done with training ``loss`` (nats/byte); the bar moves every 10 steps."""
        if self.bar is not None and self.steps is not None and (k % 10 == 0):
            self.bar.update(self.steps, completed=k, info=f"loss {loss:.3f}")

    def run_done(self, label: str, loss: float | None) -> None:
        """A run finished with held-out ``loss`` (nats/byte; None if it diverged)."""
        if self.bar is not None:
            self.bar.update(
                self.runs,
                advance=1,
                info=f"last: {label} loss {loss if loss is None else round(loss, 4)}",
            )

    def run_failed(self) -> None:
        """A run failed on every try on a cluster: counted as finished, shown as failed."""
        if self.bar is not None:
            self.failed = getattr(self, "failed", 0) + 1
            self.bar.update(self.runs, advance=1, info=f"{self.failed} failed")

    def close(self) -> None:
        """Stop the bar (safe to call more than once)."""
        if self.bar is not None:
            self.bar.stop()
