"""A ladder's runs on a cluster: Ray tasks or Slurm jobs; the driver is the one writer of runs.jsonl.

Each run is ``trilemma.ladder.train.execute`` with no results file: the worker trains it and returns
its record, and the driver (``trilemma ladder``, holding the output directory's lock) appends it,
once per run key (``trilemma.ladder.training``). ``ray`` and ``submitit`` are imported here only,
when a cluster backend runs.

- Ray: the corpus is read once by the driver and shipped once through the object store
  (``ray.put``): workers need trilemma installed, not the data. A task whose worker dies, or that
  raises, is retried ``RETRIES`` time(s) by Ray (``max_retries``, ``retry_exceptions``); a run that
  fails on every try is reported to ``on_failed`` with its error and the ladder goes on. Ctrl-C
  cancels the tasks not finished. A driver killed outright takes its tasks with it (Ray ends a
  job's tasks when its driver exits); the same command again resumes from runs.jsonl.
- Slurm: one job per run through submitit; the corpus is read from the paths given on a shared
  file system (the jobs read ``--data`` themselves). A failed job is submitted again ``RETRIES``
  time(s), then reported as failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trilemma.errors import InputError

__all__ = ["RETRIES", "run_on_ray", "run_on_slurm"]

RETRIES = 1  # a run is tried at most twice, then recorded as failed
POLL_S = 1.0  # how often the drivers look for finished runs, s

Done = Callable[[dict[str, Any]], None]
Failed = Callable[[dict[str, Any], str], None]


def _ray_train(task: dict[str, Any], corpus: Any) -> dict[str, Any]:
    """A Ray task: one run trained on the shipped corpus; its record returned, not written."""
    from trilemma.ladder.train import execute

    return execute({**task, "out": None, "corpus": corpus})


def _one_line(exc: BaseException) -> str:
    """The last line of an error's text (a Ray error carries the worker's whole traceback)."""
    cause = getattr(exc, "cause", None) or exc
    lines = [ln for ln in str(cause).splitlines() if ln.strip()]
    return f"{type(cause).__name__}: {lines[-1] if lines else ''}"


def _connect(address: str | None) -> tuple[Any, bool]:
    """``ray`` connected to ``address`` (None: RAY_ADDRESS, else a Ray started here); whether this
    call started the connection (and so ends it)."""
    import logging
    import os

    try:
        import ray
    except ImportError:
        raise InputError(
            "backend", "ray", "ray installed (pip install 'trilemma[cluster]')"
        ) from None
    if ray.is_initialized():
        return ray, False
    kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address is None and not os.environ.get("RAY_ADDRESS"):
        kw["include_dashboard"] = False  # a Ray of our own: no dashboard server
    try:
        ray.init(address=address, **kw)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise InputError(
            "address", address or "(local)", f"a Ray cluster that answers ({_one_line(exc)})"
        ) from None
    return ray, True


def run_on_ray(
    tasks: list[dict[str, Any]],
    resources: list[dict[str, Any]],
    *,
    address: str | None,
    corpus: Any,
    on_done: Done,
    on_failed: Failed,
    at_once: int | None = None,
) -> None:
    """Run ``tasks`` as Ray tasks asking for ``resources`` (``num_cpus``, ``num_gpus``, ``memory``),
    at most ``at_once`` in flight (None: all; Ray places them as resources free up), in the order
    given; ``on_done(record)`` in this process as each finishes, ``on_failed(task, error)`` after
    the last try."""
    ray, started = _connect(address)
    pending: dict[Any, dict[str, Any]] = {}
    queue = list(zip(tasks, resources, strict=True))[::-1]  # pop() takes them in order
    try:
        gpus = max((r.get("num_gpus", 0) for r in resources), default=0)
        have = ray.cluster_resources().get("GPU", 0)
        if gpus > have:  # such a task would wait for ever
            raise InputError(
                "gpu",
                f"{gpus:g} per run",
                f"a Ray cluster with GPUs (the one at {address or 'this machine'} has {have:g})",
            )
        shipped = ray.put(corpus)
        remote = ray.remote(_ray_train)

        def submit() -> None:
            while queue and (at_once is None or len(pending) < at_once):
                task, res = queue.pop()
                opts = {**res, "max_retries": RETRIES, "retry_exceptions": True}
                pending[remote.options(**opts).remote(task, shipped)] = task

        submit()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                task = pending.pop(ref)
                submit()
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    on_failed(task, _one_line(exc))
                    continue
                on_done(record)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()


def run_on_slurm(
    tasks: list[dict[str, Any]],
    params: list[dict[str, Any]],
    *,
    folder: str,
    on_done: Done,
    on_failed: Failed,
) -> None:
    """Submit one Slurm job per task (submitit ``params``), then collect them as they finish
    (``trilemma.ladder.dispatch.check_backend`` has refused a machine without ``sbatch``)."""
    import submitit

    from trilemma.ladder.train import execute

    def submit(task: dict[str, Any], p: dict[str, Any]) -> Any:
        ex = submitit.SlurmExecutor(folder=folder)
        ex.update_parameters(**p)
        return ex.submit(execute, {**task, "out": None})

    jobs = {submit(t, p): (t, p, 0) for t, p in zip(tasks, params, strict=True)}
    try:
        while jobs:
            for job in [j for j in jobs if j.done()]:
                task, p, tries = jobs.pop(job)
                try:
                    record = job.result()
                except Exception as exc:  # noqa: BLE001 - a failed job: retried, then reported
                    if tries < RETRIES:
                        jobs[submit(task, p)] = (task, p, tries + 1)
                    else:
                        on_failed(task, _one_line(exc))
                    continue
                on_done(record)
            if jobs:
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        for job in jobs:
            job.cancel(check=False)
        raise
