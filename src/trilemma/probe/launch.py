"""Running the probe's training: in this process or as torchrun processes, with what else loaded the
machine meanwhile (``run_probe``'s launching side)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError, TrilemmaError
from trilemma.units import KIB

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.train import Job

__all__ = ["BUSY", "OtherLoad", "available_memory", "launch", "median_step", "train"]

BUSY = 0.1  # a share of the machine's CPU time used by other processes worth a warning


def available_memory() -> float:
    """Memory available to a new process, in bytes (/proc/meminfo's MemAvailable; else the RAM)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * KIB  # /proc/meminfo counts kB = KiB
    except OSError:  # pragma: no cover
        pass
    from trilemma.probe.bench import ram_bytes

    return ram_bytes()


class OtherLoad:
    """Share of the machine's CPU time that other processes used while this one ran: busy time
    from /proc/stat minus this process's and its reaped children's (torchrun workers) CPU time."""

    MIN_WINDOW_S = 0.2

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy() -> float | None:
        try:
            v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
            return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
            return None

    @staticmethod
    def _own() -> float:
        import resource

        a, b = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    def wall(self) -> float:
        """Seconds since this meter started."""
        return time.perf_counter() - self.t0

    def share(self) -> float | None:
        """Other processes' CPU time over all cores' time since the start (0 to 1); None off Linux, or
        when less than ``MIN_WINDOW_S`` has passed (/proc/stat counts in clock ticks of 10 ms)."""
        busy = self._busy()
        if busy is None or self.busy0 is None or self.wall() < self.MIN_WINDOW_S:
            return None
        others = (busy - self.busy0) - (self._own() - self.own0)
        return min(1.0, max(0.0, others) / (self.wall() * self.cores))


def launch(job: Job, nproc: int, quiet: bool) -> dict[str, Any]:
    """Run ``job`` as ``nproc`` torchrun processes; rank 0's figures come back as a dict."""
    with tempfile.TemporaryDirectory(prefix="trilemma-probe-") as tmp:
        jobfile, result, logfile = (
            Path(tmp) / "job.json",
            Path(tmp) / "result.json",
            Path(tmp) / "log.txt",
        )
        jobfile.write_text(
            json.dumps({"job": job.to_dict(), "result": str(result)}), encoding="utf-8"
        )
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "trilemma.probe.worker",
            str(jobfile),
        ]
        env = {**os.environ, "OMP_NUM_THREADS": str(max(job.threads, 1))}
        with logfile.open("w") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=logf if quiet else None, env=env)
            try:
                rc = proc.wait()
            except (
                KeyboardInterrupt
            ):  # the workers got SIGINT too: let rank 0 write what it measured
                try:
                    rc = proc.wait(timeout=60)
                except (subprocess.TimeoutExpired, KeyboardInterrupt):
                    proc.kill()
                    rc = proc.wait()
        doc = json.loads(result.read_text()) if result.is_file() else None
        if doc is not None and "error" in doc:
            raise InputError(doc["error"]["field"], doc["error"]["value"], doc["error"]["allowed"])
        if doc is None:
            tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-15:])
            raise TrilemmaError(
                f"probe: torchrun with {nproc} processes failed (exit {rc}):\n{tail}"
            )
        return doc


def train(job: Job, nproc: int, quiet: bool) -> dict[str, Any]:
    """Run ``job``: in this process when it is one process without FSDP, else through torchrun."""
    if nproc == 1 and not job.fsdp:
        from trilemma.probe.train import run_training

        return run_training(job)
    return launch(job, nproc, quiet)


def median_step(raw: dict, warmup: int) -> float:
    """The median step time after the first ``warmup`` steps of a baseline run, in s."""
    from trilemma.probe.result import StepStats

    stats = StepStats.of(raw["step_s"][warmup:])
    if stats is None:
        raise TrilemmaError("probe: the one-process baseline finished no step after its warm-up")
    return stats.median_s
