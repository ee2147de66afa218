"""``run_ladder``: plan the grid, train what is not done yet, fit, predict the held-out run, check.

1. Plan (``trilemma.ladder.plan``; the options read by ``trilemma.ladder.choose``): the default grid,
   ``--tiny``, explicit ``sizes`` × ``tokens_per_param`` (the largest size is held out), or the largest
   rung of the width ladder that the planner predicts fits in ``minutes``; each run's predicted time
   from the ``local`` hardware profile (measured now, the way the probe does, if there is none yet).
2. Resume: runs whose key is already in ``DIR/runs.jsonl`` are not trained again; unreadable lines
   there are reported and skipped.
3. Train (``trilemma.ladder.train``): in this process one after the other (``workers=1``: the fit runs,
   then the held-out run after the prediction is made), or on ``workers`` processes, longest first,
   the held-out run among them (its result is not read until the prediction is made); or on a Ray
   cluster or Slurm (``backend``; ``trilemma.ladder.dispatch``), this process recording each run.
4. Fit on the fit runs only (``trilemma.ladder.fit``), predict the held-out run with the law's band,
   write ``DIR/law.toml``, compare with the measured loss. The error is a figure, never a failure.
5. Report each run's measured time, energy and dollars (price per machine-hour overridable) and loss;
   ``DIR/ladder.json`` holds the whole result; ``draw`` plots it to ``plot`` (the CLI passes
   ``trilemma.report.ladder_plot.plot_ladder``: presentation stays in report/).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trilemma.fileio import write_text_atomic
from trilemma.ladder import options as opts
from trilemma.ladder.assemble import held_out_row, ladder_totals, machine_block, run_rows
from trilemma.ladder.choose import _cores, choose_grid, local_profile
from trilemma.ladder.dispatch import Placement, check_backend, dispatch_info, placement
from trilemma.ladder.lock import directory_lock
from trilemma.ladder.plan import LadderPlan, make_plan
from trilemma.ladder.records import resume
from trilemma.ladder.result import LadderMachine, LadderResult, LadderTotals
from trilemma.ladder.training import TrainJob, train_and_fit
from trilemma.units import MINUTE

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.request.ladder import LadderRequest

__all__ = ["run_ladder"]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ the ladder


def run_ladder(
    req: LadderRequest,
    *,
    draw: Callable[[LadderResult, Any, str | Path], Path] | None = None,
    progress: bool = False,
    on_plan: Callable[[LadderPlan, dict[str, Any]], None] | None = None,
) -> LadderResult:
    """Run the ladder into directory ``out`` (resuming what ``out/runs.jsonl`` already holds).

    ``workers``: parallel training processes (default: one per core; ``tiny``: one, in this process).
    ``threads``: torch threads per worker (default: the cores shared out over the workers, at most one
    per worker for ``tiny``). ``price``: USD per machine-hour (default: the ``local`` profile's).
    ``on_plan(plan, info)`` is called once the plan is made, before any training.
    Raises InputError (exit 2) for bad input and LadderInterrupted (exit 130) on Ctrl-C.
    ``req`` is a :class:`trilemma.request.LadderRequest` (the flags of `trilemma ladder`, typed).
    """
    data, tiny, dry_run = req.data, req.tiny, req.dry_run
    workers, threads, price, plot = req.workers, req.threads, req.price, req.plot
    seed, n_boot = req.seed, req.bootstrap
    t_start = time.perf_counter()
    cores = _cores()
    local = req.backend == "local"
    out_dir = _checked_out_dir(req, cores, local)
    runs_path = out_dir / "runs.jsonl"
    data_t = tuple([data] if isinstance(data, str) else data) if data else None

    # a cluster runs every run at once unless --workers caps it; a local GPU, one at a time
    n_workers = workers or ((1 if tiny or req.gpu else cores) if local else 10**6)
    n_threads = threads or (1 if tiny else max(1, cores // min(n_workers, cores)))
    warnings: list[str] = []
    notes: list[str] = []
    if local and n_workers * n_threads > cores and req.gpu is None:
        warnings.append(f"{n_workers} workers × {n_threads} threads oversubscribe {cores} cores")

    hw, hw_note = (None, None) if req.gpu else local_profile(measure=True)
    if hw_note:
        (notes if hw is not None else warnings).append(hw_note)
    place = placement(req, hw, cores, min(n_workers, cores), n_threads)
    plan, view = _grid_plan(req, place, n_workers, n_threads, data_t, warnings)
    n_workers = min(n_workers, len(plan.runs))
    price_h, machine_w = opts.price_and_power(price, place.hw, cores)
    share = 1.0 if req.gpu else n_threads / cores
    cluster = dispatch_info(plan, req, n_threads, str(out_dir / "slurm"))

    with nullcontext(0.0) if dry_run else directory_lock(out_dir) as waited:
        if waited > 1.0:
            notes.append(
                f"waited {waited:.0f} s for another ladder process on {out_dir}; resumed from what it wrote"
            )
        job = TrainJob(
            plan=plan,
            view=view,
            data=data_t,
            runs_path=runs_path,
            out_dir=out_dir,
            workers=n_workers,
            threads=n_threads,
            power_w=machine_w * share,
            backend=req.backend,
            address=req.address,
            device=place.device,
            dispatch=cluster,
            progress_lines=req.progress_json,
        )
        return _locked_run(
            job,
            (machine_w, share, price_h, hw, cores),
            (plot, draw, on_plan),
            warnings,
            notes,
            n_boot=n_boot,
            seed=seed,
            dry_run=dry_run,
            progress=progress,
            t_start=t_start,
        )


def _checked_out_dir(req: LadderRequest, cores: int, local: bool) -> Path:
    """The ladder's output directory, once ``req``'s options (workers, threads, seed, bootstrap
    draws, price in USD per machine-hour, plot) and backend are checked against the ``cores`` of
    this machine and whether it runs ``local``ly."""
    opts.check_options(
        workers=req.workers,
        threads=req.threads,
        seed=req.seed,
        n_boot=req.bootstrap,
        price=req.price,
        plot=req.plot,
        cores=cores,
        local=local,
    )
    check_backend(req)
    return opts.out_dir(req.out)


def _locked_run(
    job: TrainJob,
    machine: tuple[float, float, float, Any, int],
    callbacks: tuple[str | Path | None, Callable[..., Path] | None, Callable[..., None] | None],
    warnings: list[str],
    notes: list[str],
    *,
    n_boot: int,
    seed: int,
    dry_run: bool,
    progress: bool,
    t_start: float,
) -> LadderResult:
    """The part of ``run_ladder`` that reads and writes the directory (under its lock).
    ``machine``: power (W), this run's share of it, price ($/machine-hour), the profile and the
    cores; ``callbacks``: the plot's path, the function that draws it, and ``on_plan``."""
    machine_w, share, price_h, hw, cores = machine
    plot, draw, on_plan = callbacks
    plan, runs_path, out_dir = job.plan, job.runs_path, job.out_dir
    by_key, resumed = resume(plan, runs_path, warnings, notes)
    todo = [p for p in plan.runs if p.run.key not in by_key]
    info = {
        "runs_path": str(runs_path),
        "resumed": len(resumed),
        "to_train": len(todo),
        "cores": cores,
        "workers": job.workers,
        "threads": job.threads,
        "warnings": list(warnings),
        "notes": list(notes),
        "done_keys": set(resumed),
        "cluster": job.dispatch,
    }
    if on_plan is not None:
        on_plan(plan, info)

    fit_report, prediction = train_and_fit(
        job,
        todo,
        by_key,
        resumed,
        warnings,
        n_boot=n_boot,
        seed=seed,
        dry_run=dry_run,
        progress=progress,
    )
    return _result(
        plan,
        by_key,
        resumed,
        fit_report,
        prediction,
        job.view,
        out_dir,
        runs_path,
        price_h,
        machine_w,
        share,
        hw,
        cores,
        None if plot is None or draw is None else (lambda r, rep: draw(r, rep, plot)),
        warnings,
        notes,
        time.perf_counter() - t_start,
        dry_run,
        job.dispatch,
    )


def _grid_plan(
    req: LadderRequest,
    place: Placement,
    n_workers: int,
    n_threads: int,
    data_t: tuple[str, ...] | None,
    warnings: list[str],
) -> tuple[LadderPlan, Any]:
    """The grid the request asks for, the corpus view of ``data_t``, and the plan on ``n_workers``
    × ``n_threads``; a warning when the plan is predicted to outrun ``--minutes``."""
    from trilemma.ladder.train import corpus_view

    grid = choose_grid(
        sizes=None if req.sizes is None else list(req.sizes),
        tokens_per_param=None if req.tokens_per_param is None else list(req.tokens_per_param),
        holdout_ratio=req.holdout_tokens_per_param,
        minutes=req.minutes,
        tiny=req.tiny,
        hw=place.hw if req.gpu is None else None,
        workers=min(n_workers, _cores()),
    )
    view = corpus_view(data_t)
    plan = make_plan(
        grid,
        hw=place.hw,
        workers=min(n_workers, len(grid.fit_widths) * len(grid.ratios) + 1),
        threads=n_threads,
        seed=req.seed,
        data_fingerprint=view.fingerprint,
        share=place.share,
        precision=place.precision,
    )
    if (
        req.minutes is not None
        and plan.predicted_wall_s is not None
        and plan.predicted_wall_s > req.minutes * MINUTE
    ):
        warnings.append(
            f"the planner predicts {plan.predicted_wall_s / MINUTE:.1f} minutes for this grid, more than "
            f"--minutes {req.minutes:g}"
        )
    return plan, view


def _result(
    plan: LadderPlan,
    by_key: dict[str, dict[str, Any]],
    resumed: set[str],
    report: Any,
    prediction: Any,
    view: Any,
    out_dir: Path,
    runs_path: Path,
    price_h: float,
    machine_w: float,
    share: float,
    hw: Any,
    cores: int,
    plotter: Callable[[LadderResult, Any], Path] | None,
    warnings: list[str],
    notes: list[str],
    wall_s: float,
    dry_run: bool,
    cluster: dict[str, Any] | None = None,
) -> LadderResult:
    rows = run_rows(plan, by_key, resumed, report, cores, price_h)
    held = held_out_row(plan, by_key, prediction)
    totals = ladder_totals(rows, plan, wall_s)
    complete = held is not None and held.measured is not None
    files: dict[str, str | None] = {
        "runs": str(runs_path),
        "law": str(out_dir / "law.toml") if report is not None and not dry_run else None,
        "result": str(out_dir / "ladder.json"),
        "plot": None,
    }
    if not complete and not dry_run:
        warnings.append(
            "the ladder is not complete: "
            + (
                "the law could not be fitted"
                if report is None
                else "the held-out run has not finished"
            )
        )
    machine = machine_block(plan, cores, hw, machine_w, price_h)
    notes = notes + [
        (
            "loss = mean cross-entropy in nats per byte on fixed windows of the corpus's held-out files; absolute values "
            "are specific to this corpus and the byte tokenizer"
        ),
        (
            "time, energy and dollars are measured wall time × the share of the machine a run had "
            f"({plan.threads} of {cores} cores); energy uses the profile's stated power, dollars the price per machine-hour"
        ),
    ]
    result = LadderResult(
        out_dir=str(out_dir),
        files=files,
        plan={**plan.to_dict(), "cluster": cluster},
        runs=tuple(rows),
        fit=None if report is None else report.to_dict(),
        held_out=held,
        totals=LadderTotals(**totals),
        machine=LadderMachine(**machine),
        data=view.describe(),
        price_usd_per_hour=price_h,
        complete=complete,
        warnings=tuple(dict.fromkeys(warnings)),
        notes=tuple(dict.fromkeys(notes)),
    )
    if plotter is not None and report is not None and not dry_run:
        files["plot"] = str(plotter(result, report))
    if not dry_run:
        doc = result.to_dict()
        write_text_atomic(out_dir / "ladder.json", json.dumps(doc, indent=1, default=str), "out")
    else:
        files["result"] = None
    return result
