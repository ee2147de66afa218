"""Training a ladder's runs and fitting its law (trilemma.ladder.run): one worker runs them here,
smallest first; several share a pool, longest first; a cluster (Ray, Slurm) takes them all, longest
first, and this process records each as it comes back; then the fit and the held-out prediction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trilemma.errors import InputError, TrilemmaError
from trilemma.ladder.plan import LadderPlan, PlannedRun
from trilemma.ladder.progress import LadderProgress

__all__ = ["LadderInterrupted", "TrainJob", "fit_and_predict", "train_and_fit"]


class LadderInterrupted(TrilemmaError):
    """Ctrl-C: the runs that finished are in runs.jsonl; the same command resumes (exit status 130)."""

    exit_code = 130


@dataclass(frozen=True)
class TrainJob:
    """What every training of one call shares."""

    plan: LadderPlan
    view: Any  # the corpus (trilemma.ladder.train.corpus_view)
    data: tuple[str, ...] | None  # the corpus paths given, None: the default corpus
    runs_path: Path  # runs.jsonl, where each finished run is appended
    out_dir: Path
    workers: int  # training processes
    threads: int  # torch threads per worker
    power_w: float  # a run's share of the machine's power, W
    backend: str = "local"  # local, ray or slurm (trilemma.ladder.dispatch)
    address: str | None = None  # the Ray cluster to join
    device: str = "cpu"  # where a run trains: cpu, or cuda (--gpu)
    dispatch: dict[str, Any] | None = None  # each run's cluster resources (dispatch_info)
    progress_lines: bool = False  # one JSON line per finished run on stderr (--progress-json)


def train_and_fit(
    job: TrainJob,
    todo: list[PlannedRun],
    by_key: dict[str, dict[str, Any]],
    resumed: set[str],
    warnings: list[str],
    *,
    n_boot: int,
    seed: int,
    dry_run: bool,
    progress: bool,
) -> tuple[Any, Any]:
    """Train ``todo`` (adding each record to ``by_key``), fit the law on the fit runs and predict the held-out run.

    One worker: the fit runs here, smallest first, then the fit, then the held-out run. Several: every run
    on the pool, longest first, then the fit. Returns (fit report, held-out prediction), None each when the
    law could not be fitted. Ctrl-C: LadderInterrupted (the finished runs are in runs.jsonl).
    """
    plan, runs_path = job.plan, job.runs_path
    bar = LadderProgress(
        progress and not dry_run,
        len(todo),
        predicted=[p.predicted_s for p in todo],
        at_once=min(job.workers, max(1, len(todo))),
        lines=job.progress_lines and not dry_run,
    )
    fit_report = prediction = None
    try:
        if not dry_run and todo:
            fit_todo = [p for p in todo if p.run.role == "fit"]
            if job.backend != "local":
                _train_on_cluster(job, todo, by_key, bar, warnings)
            elif job.workers == 1:
                for p in sorted(fit_todo, key=lambda q: q.run.flop):
                    _train_here(job, p, bar, by_key)
            else:
                _train_on_pool(job, todo, by_key, bar)
        if (
            not dry_run
        ):  # a dry run trains nothing and fits nothing (the bootstrap alone is a minute)
            fit_report, prediction, fit_warnings = fit_and_predict(
                plan, by_key, runs_path, job.view, job.out_dir, n_boot, seed, write=True
            )
            warnings.extend(fit_warnings)
        if not dry_run and job.workers == 1 and job.backend == "local":
            for p in [q for q in todo if q.run.role == "held_out"]:
                _train_here(job, p, bar, by_key)
    except KeyboardInterrupt:
        bar.close()
        done_now = len([k for k in by_key if k not in resumed])
        raise LadderInterrupted(
            f"interrupted: {len(by_key)} of {len(plan.runs)} runs are in {runs_path} ({done_now} finished in this call); "
            "run the same command again to resume"
        ) from None
    finally:
        bar.close()
    return fit_report, prediction


def _task(job: TrainJob, p: PlannedRun) -> dict[str, Any]:
    """What a pool worker needs to train run ``p`` and append its record."""
    from trilemma.ladder.train import run_to_dict

    return {
        "run": run_to_dict(p.run),
        "predicted_s": p.predicted_s,
        "hardware": job.plan.hardware,
        "power_w": job.power_w,
        "out": str(job.runs_path),
        "data": list(job.data) if job.data else None,
        "threads": job.threads,
        "device": job.device,
    }


def _train_here(
    job: TrainJob, p: PlannedRun, bar: LadderProgress, by_key: dict[str, dict[str, Any]]
) -> None:
    """Train run ``p`` in this process and append its record (to runs.jsonl and ``by_key``)."""
    from trilemma.ladder.records import append_record
    from trilemma.ladder.train import build_record, train

    bar.start_run(p.run.label, p.run.steps)
    on_gpu = {"device": job.device} if job.device != "cpu" else {}
    raw = train(p.run, job.view, threads=job.threads, on_step=bar.step, **on_gpu)
    rec = build_record(
        p.run,
        raw,
        job.view,
        predicted_s=p.predicted_s,
        hardware=job.plan.hardware,
        power_w=job.power_w,
        worker=0,
    )
    append_record(job.runs_path, rec)
    by_key[p.run.key] = rec
    bar.run_done(p.run.label, rec["loss"], p.run.key, p.predicted_s)


def _train_on_pool(
    job: TrainJob,
    todo: list[PlannedRun],
    by_key: dict[str, dict[str, Any]],
    bar: LadderProgress,
) -> None:
    """Train ``todo`` on ``job.workers`` processes, longest predicted first."""
    from trilemma.ladder.pool import run_pool

    pred = {p.run.key: p.predicted_s for p in todo}

    def done(rec: dict[str, Any]) -> None:
        by_key[rec["key"]] = rec
        bar.run_done(_label(rec["model"]["shape"]), rec["loss"], rec["key"], pred.get(rec["key"]))

    order = _longest_first(todo)
    run_pool([_task(job, p) for p in order], workers=job.workers, threads=job.threads, on_done=done)


def _longest_first(todo: list[PlannedRun]) -> list[PlannedRun]:
    """Runs by predicted time, longest first (by FLOPs where there is no prediction)."""
    return sorted(
        todo,
        key=lambda q: -(q.predicted_s if q.predicted_s is not None else q.run.flop / 1e10),
    )


def _label(shape: dict[str, Any]) -> str:
    """A run's shape as the tables show it: layers x d_model."""
    return f"{shape['layers']}x{shape['d_model']}"


def _train_on_cluster(
    job: TrainJob,
    todo: list[PlannedRun],
    by_key: dict[str, dict[str, Any]],
    bar: LadderProgress,
    warnings: list[str],
) -> None:
    """Train ``todo`` on the job's cluster backend; this process appends each record once."""
    from trilemma.ladder.cluster import run_on_ray, run_on_slurm
    from trilemma.ladder.records import append_record, failed_record

    order = _longest_first(todo)
    pred = {p.run.key: p.predicted_s for p in todo}
    rows = {r["key"]: r for r in (job.dispatch or {"runs": []})["runs"]}
    tasks = [_task(job, p) for p in order]

    def done(rec: dict[str, Any]) -> None:
        if rec["key"] in by_key:  # a run that came back twice is recorded once
            return
        append_record(job.runs_path, rec)
        by_key[rec["key"]] = rec
        bar.run_done(_label(rec["model"]["shape"]), rec["loss"], rec["key"], pred.get(rec["key"]))

    def failed(task: dict[str, Any], error: str) -> None:
        rec = failed_record(task, error)
        if rec["key"] not in by_key:
            append_record(job.runs_path, rec)
            warnings.append(f"run {rec['key']} failed on every try: {error}")
            label = _label(task["run"]["shape"])
            bar.run_failed(label, error, rec["key"], pred.get(rec["key"]))

    kw = {"on_done": done, "on_failed": failed}
    if job.backend == "ray":
        res = [rows[p.run.key]["resources"] for p in order]
        corpus, cap = job.view.corpus, job.workers if job.workers < len(tasks) else None
        run_on_ray(tasks, res, address=job.address, corpus=corpus, at_once=cap, **kw)
    else:
        params = [rows[p.run.key]["submitit"] for p in order]
        run_on_slurm(tasks, params, folder=str(job.out_dir / "slurm"), **kw)


def fit_and_predict(
    plan: LadderPlan,
    by_key: dict[str, dict[str, Any]],
    runs_path: Path,
    view: Any,
    out_dir: Path,
    n_boot: int,
    seed: int,
    write: bool = True,
) -> tuple[Any, Any, list[str]]:
    """Fit the law on the fit runs' records and predict the held-out run (writing law.toml when
    ``write``); (None, None, warnings) when the fit runs are not all in or the fit fails."""
    from trilemma.ladder.fit import fit_ladder, predict_held_out, write_ladder_law

    warnings: list[str] = []
    fit_recs = [by_key[r.key] for r in plan.fit_runs if r.key in by_key]
    usable = [r for r in fit_recs if isinstance(r.get("loss"), (int, float)) and r["loss"] > 0]
    if len(usable) < len(fit_recs):
        warnings.append(
            f"{len(fit_recs) - len(usable)} fit run(s) diverged (no finite loss): left out of the fit"
        )
    if len(fit_recs) < len(plan.fit_runs):
        return None, None, warnings
    try:
        report = fit_ladder(
            usable, source=str(runs_path), data=view.corpus.source, n_boot=n_boot, seed=seed
        )
    except InputError as exc:
        warnings.append(f"the law could not be fitted: {exc}")
        return None, None, warnings
    warnings.extend(f"fit: {w}" for w in report.warnings)
    if write:
        write_ladder_law(report, out_dir / "law.toml")
    return report, predict_held_out(report, plan.held_out), warnings
