"""Independent runs in parallel processes, each pinned to its share of the cores.

Each worker is a fresh interpreter, ``python -m trilemma.ladder.pool THREADS INDEX`` (torch is imported
there, never forked from a parent with OpenMP threads, and the caller's ``__main__`` is never
re-imported, so scripts need no ``if __name__ == "__main__"`` guard). A worker sets OMP_NUM_THREADS
and ``torch.set_num_threads`` to its share, then reads one task per line on stdin, trains it, appends
its record itself (``trilemma.ladder.records.append_record``: one O_APPEND write under an fcntl lock)
and answers one line on stdout. The parent hands the next task to whichever worker answers first.

Workers ignore SIGINT. On Ctrl-C the parent terminates them (SIGTERM): a run cut short leaves no
record, and a record is written by one write() system call, which a signal does not split, so the
results file stays whole lines of finished runs.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from trilemma.errors import InputError, TrilemmaError

__all__ = ["run_pool"]


def _serve(threads: int, index: int) -> int:
    """A worker's loop: one JSON task per stdin line, one JSON answer per stdout line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    out = os.fdopen(os.dup(1), "w")  # answers only: anything a library prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch

    torch.set_num_threads(threads)
    from trilemma.ladder.train import execute

    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        try:
            record = execute({**task, "threads": threads, "worker": index})
            answer = {"kind": "ok", "record": record}
        except InputError as exc:
            answer = {"kind": "input", "error": [exc.field, str(exc.value), exc.allowed]}
        except Exception:  # noqa: BLE001 - reported to the parent, which raises
            answer = {"kind": "error", "error": traceback.format_exc(limit=8)}
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()
    return 0


class _Worker:
    def __init__(self, index: int, threads: int) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        self.log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - closed by _stop
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trilemma.ladder.pool", str(threads), str(index)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            start_new_session=False,
        )
        self.buf = b""
        self.busy = False

    def send(self, task: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(task) + "\n").encode())
        self.proc.stdin.flush()
        self.busy = True

    def stderr_tail(self) -> str:
        self.log.seek(0)
        return "\n".join(self.log.read().decode(errors="replace").splitlines()[-15:])


def run_pool(
    tasks: Iterable[dict[str, Any]],
    *,
    workers: int,
    threads: int,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``tasks`` (``trilemma.ladder.train.execute`` arguments) on ``workers`` processes, started in the
    given order; returns the records as they finished. Ctrl-C terminates the workers and re-raises."""
    pending = list(tasks)
    total = len(pending)
    pending.reverse()  # pop() from the end takes them in the given order
    pool = [_Worker(i, threads) for i in range(max(1, min(workers, total)))]
    sel = selectors.DefaultSelector()
    done: list[dict[str, Any]] = []
    try:
        for w in pool:
            assert w.proc.stdout is not None
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
            if pending:
                w.send(pending.pop())
        while len(done) < total:
            events = sel.select(timeout=1.0)
            if not events and not any(w.proc.poll() is None for w in pool if w.busy):
                raise TrilemmaError(
                    "ladder: a worker process exited with runs left:\n"
                    + "\n".join(w.stderr_tail() for w in pool if w.busy)
                )
            for key, _ in events:
                w: _Worker = key.data
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:  # the worker died
                    sel.unregister(key.fileobj)
                    if w.busy:
                        raise TrilemmaError(
                            f"ladder: a worker process exited during a run (status "
                            f"{w.proc.wait()}):\n{w.stderr_tail()}"
                        )
                    continue
                w.buf += chunk
                while b"\n" in w.buf:
                    line, w.buf = w.buf.split(b"\n", 1)
                    answer = json.loads(line)
                    w.busy = False
                    if answer["kind"] == "input":
                        raise InputError(*answer["error"])
                    if answer["kind"] != "ok":
                        raise TrilemmaError(
                            f"ladder: a training run failed in a worker process:\n{answer['error']}"
                        )
                    done.append(answer["record"])
                    if on_done is not None:
                        on_done(answer["record"])
                    if pending:
                        w.send(pending.pop())
    finally:
        sel.close()
        _stop(pool)
    return done


def _stop(pool: list[_Worker]) -> None:
    for w in pool:
        if w.proc.stdin is not None and not w.proc.stdin.closed:
            try:
                w.proc.stdin.close()  # a worker between runs exits at end of input
            except OSError:
                pass
        if w.busy and w.proc.poll() is None:
            w.proc.terminate()  # a run cut short: no record
    for w in pool:
        try:
            w.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            w.proc.kill()
            w.proc.wait()
        if w.proc.stdout is not None:
            w.proc.stdout.close()
        w.log.close()


if __name__ == "__main__":  # a worker (see module docstring)
    sys.exit(_serve(int(sys.argv[1]), int(sys.argv[2])))
