"""Where a ladder's runs train (``--backend``) and what each run asks of a cluster. No ray here.

- ``local``: processes on this machine (``trilemma.ladder.pool``), the default, unchanged.
- ``ray``: one Ray task per run (``trilemma.ladder.cluster.run_on_ray``), asking for ``num_cpus`` =
  the run's torch threads, ``num_gpus`` = 1 with ``--gpu`` (else 0) and, for a CPU run, ``memory`` =
  the planner's peak memory of the run (``trilemma.ladder.timing.predict_run``; Ray's ``memory`` is
  host memory, so a GPU run's device memory is not asked for there: it has the whole GPU).
- ``slurm``: one submitit job per run (``trilemma.ladder.cluster.run_on_slurm``) with the partition,
  the time limit (twice the planner's time for the run plus the start-up, rounded up to minutes) and
  one GPU per job with ``--gpu``; ``slurm_script`` checks the parameters with submitit's own
  validation, which needs no Slurm.

Every backend's driver (the ``trilemma ladder`` process) is the one writer of ``runs.jsonl`` on a
cluster; local workers append their own records under the same lock.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError
from trilemma.units import HOUR, MINUTE

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.ladder.plan import LadderPlan, PlannedRun
    from trilemma.request.ladder import LadderRequest

__all__ = ["Placement", "dispatch_info", "placement", "slurm_parameters", "slurm_script"]

#: a Slurm job's time limit is this many times the planner's time for its run: the ratio past which
#: a ladder record calls the prediction wrong (``trilemma.ladder.train.build_record``'s 0.5-2 band)
TIME_LIMIT_FACTOR = 2.0


@dataclass(frozen=True)
class Placement:
    """Where the runs train and what the planner predicts for: the hardware profile (None: no
    prediction), the share of it one run has (1/``share``), the precision and the torch device."""

    hw: Any
    share: int
    precision: str  # "fp32" (CPU) or "bf16" (GPU autocast)
    device: str  # "cpu" or "cuda"


def placement(
    req: LadderRequest, local_hw: Any, cores: int, workers: int, threads: int
) -> Placement:
    """The hardware each run is predicted on: ``--gpu``'s preset, one whole GPU per run in bf16 where
    it has bf16 (fp32 where not: the trainer's autocast needs bf16); else the CPU: on ``local``, the
    local profile shared over the workers, on a cluster, ``threads`` cores of a machine like this one."""
    if req.gpu is None:
        share = workers if req.backend == "local" else max(1, cores // threads)
        return Placement(local_hw, share, "fp32", "cpu")
    from trilemma.presets import get_hardware
    from trilemma.specs import Precision

    hw = get_hardware(req.gpu)
    if hw.vendor == "CPU":
        raise InputError("gpu", req.gpu, "a GPU hardware preset (`trilemma presets hardware`)")
    bf16 = Precision.BF16 in hw.peak_flop_per_s
    return Placement(hw, 1, "bf16" if bf16 else "fp32", "cuda")


def check_backend(req: LadderRequest) -> None:
    """InputError for an option of another backend or a missing cluster library."""
    import importlib.util

    if req.address is not None and req.backend != "ray":
        raise InputError("address", req.address, "--backend ray (the Ray cluster to join)")
    for name in ("partition", "time_limit"):
        if getattr(req, name) is not None and req.backend != "slurm":
            raise InputError(name.replace("_", "-"), getattr(req, name), "--backend slurm")
    if req.time_limit is not None and not (math.isfinite(req.time_limit) and req.time_limit >= 1):
        raise InputError("time-limit", req.time_limit, "minutes per job, at least 1")
    if req.backend == "slurm" and not req.dry_run and shutil.which("sbatch") is None:
        raise InputError(
            "backend",
            "slurm",
            "a machine with Slurm's `sbatch` (a login node), or --dry-run to print each run's "
            "sbatch parameters",
        )
    need = {"ray": "ray", "slurm": "submitit"}.get(req.backend)
    if need and not req.dry_run and importlib.util.find_spec(need) is None:
        raise InputError(
            "backend", req.backend, f"{need} installed (pip install 'trilemma[cluster]')"
        )


def time_limit_min(p: PlannedRun, given: float | None) -> int:
    """A Slurm job's time limit in whole minutes: ``given``, else TIME_LIMIT_FACTOR × the planner's
    time for the run plus the ladder's start-up allowance, rounded up; InputError without either."""
    from trilemma.ladder.plan import STARTUP_S

    if given is not None:
        return math.ceil(given)
    if p.predicted_s is None:
        raise InputError(
            "time-limit", None, "minutes per job (the plan has no predicted time to size it from)"
        )
    return math.ceil((TIME_LIMIT_FACTOR * p.predicted_s + STARTUP_S) / MINUTE)


def slurm_parameters(
    p: PlannedRun, *, threads: int, gpu: bool, partition: str | None, time_limit: float | None
) -> dict[str, Any]:
    """submitit's ``SlurmExecutor`` parameters of one run's job (one task on one node)."""
    params: dict[str, Any] = {
        "job_name": f"trilemma-ladder-{p.run.key}",
        "time": time_limit_min(p, time_limit),
        "nodes": 1,
        "ntasks_per_node": 1,
        "cpus_per_task": threads,
    }
    if gpu:
        params["gpus_per_node"] = 1
    if partition:
        params["partition"] = partition
    return params


def slurm_script(params: dict[str, Any], folder: str) -> str:
    """The ``sbatch`` script submitit writes for ``params``, after its own parameter validation: the
    two checks of ``SlurmExecutor.update_parameters`` (known names, then the script built), which
    need no Slurm (the executor itself refuses to start without ``srun``); InputError if refused."""
    try:
        from submitit.slurm.slurm import SlurmExecutor, _make_sbatch_string
    except ImportError:
        raise InputError(
            "backend", "slurm", "submitit installed (pip install 'trilemma[cluster]')"
        ) from None
    unknown = sorted(set(params) - SlurmExecutor._valid_parameters())
    try:
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}")
        return _make_sbatch_string(
            command="python -m submitit.core._submit", folder=folder, **params
        )
    except ValueError as exc:
        raise InputError(
            "backend", "slurm", f"sbatch parameters submitit accepts ({exc})"
        ) from None


def sbatch_lines(script: str) -> list[str]:
    """The ``#SBATCH`` lines of a script, without the prefix (``--time=7``)."""
    return [
        ln.removeprefix("#SBATCH").strip() for ln in script.splitlines() if ln.startswith("#SBATCH")
    ]


def run_resources(p: PlannedRun, *, threads: int, gpu: bool) -> dict[str, Any]:
    """What one Ray task asks for: CPUs, GPUs and (a CPU run) the planner's memory, bytes."""
    res: dict[str, Any] = {"num_cpus": threads, "num_gpus": 1 if gpu else 0}
    if not gpu and p.predicted_bytes:
        res["memory"] = int(math.ceil(p.predicted_bytes))
    return res


def dispatch_info(
    plan: LadderPlan, req: LadderRequest, threads: int, folder: str
) -> dict[str, Any] | None:
    """The plan's cluster block: the backend, each run's resources (ray) or sbatch parameters
    (slurm, validated by submitit), and the planner's device-hours; None for ``local``."""
    if req.backend == "local" and req.gpu is None:
        return None
    gpu = req.gpu is not None
    runs = []
    for p in plan.runs:
        row: dict[str, Any] = {"key": p.run.key, "label": p.run.label, "role": p.run.role}
        if req.backend == "slurm":
            params = slurm_parameters(
                p, threads=threads, gpu=gpu, partition=req.partition, time_limit=req.time_limit
            )
            row["sbatch"] = sbatch_lines(slurm_script(params, folder))
            row["submitit"] = params
        else:
            row["resources"] = run_resources(p, threads=threads, gpu=gpu)
        runs.append(row)
    known = [p.predicted_s for p in plan.runs]
    hours = None if None in known else sum(known) / HOUR
    return {
        "backend": req.backend,
        "address": req.address,
        "gpu": req.gpu,
        "device_per_run": "1 GPU" if gpu else f"{threads} CPU core(s)",
        "predicted_gpu_hours": hours if gpu else None,
        "predicted_core_hours": None if gpu or hours is None else hours * threads,
        "runs": runs,
    }
