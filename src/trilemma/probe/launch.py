"""Running the probe's training: in this process or as torchrun processes, with what else loaded the
machine meanwhile (``run_probe``'s launching side)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError, TrilemmaError

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.train import Job

__all__ = ["launch", "median_step", "train"]


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
