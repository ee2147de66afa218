"""``run_ladder``: plan the grid, train what is not done yet, fit, predict the held-out run, check.

1. Plan (``trilemma.ladder.plan``; the options read by ``trilemma.ladder.choose``): the default grid,
   ``--tiny``, explicit ``sizes`` × ``tokens_per_param`` (the largest size is held out), or the largest
   rung of the width ladder that the planner predicts fits in ``minutes``; each run's predicted time
   from the ``local`` hardware profile (measured now, the way the probe does, if there is none yet).
2. Resume: runs whose key is already in ``DIR/runs.jsonl`` are not trained again; unreadable lines
   there are reported and skipped.
3. Train (``trilemma.ladder.train``): in this process one after the other (``workers=1``: the fit runs,
   then the held-out run after the prediction is made), or on ``workers`` processes, longest first,
   the held-out run among them (its result is not read until the prediction is made).
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError, TrilemmaError, check_output_file
from trilemma.fileio import write_text_atomic
from trilemma.ladder.assemble import (
    CPU_WATTS_PER_CORE,
    held_out_row,
    ladder_totals,
    machine_block,
    run_rows,
)
from trilemma.ladder.choose import _cores, choose_grid, local_profile
from trilemma.ladder.lock import directory_lock
from trilemma.ladder.plan import LadderPlan, PlannedRun, make_plan
from trilemma.ladder.progress import LadderProgress
from trilemma.ladder.records import read_records
from trilemma.ladder.result import LadderMachine, LadderResult, LadderTotals
from trilemma.units import MINUTE

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.request.ladder import LadderRequest

__all__ = ["LadderInterrupted", "run_ladder"]

log = logging.getLogger(__name__)

CPU_PRICE_PER_CORE_HOUR = 0.02  # the probe's placeholder price, ditto


class LadderInterrupted(TrilemmaError):
    """Ctrl-C: the runs that finished are in runs.jsonl; the same command resumes (exit status 130)."""

    exit_code = 130


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
    out, data, tiny, minutes, dry_run = req.out, req.data, req.tiny, req.minutes, req.dry_run
    sizes = None if req.sizes is None else list(req.sizes)
    tokens_per_param = None if req.tokens_per_param is None else list(req.tokens_per_param)
    workers, threads, price, plot = req.workers, req.threads, req.price, req.plot
    holdout_tokens_per_param, seed, n_boot = req.holdout_tokens_per_param, req.seed, req.bootstrap
    t_start = time.perf_counter()
    cores = _cores()
    _check_options(
        workers=workers,
        threads=threads,
        seed=seed,
        n_boot=n_boot,
        price=price,
        plot=plot,
        cores=cores,
    )
    out_dir = _out_dir(out)
    runs_path = out_dir / "runs.jsonl"
    data_t = tuple([data] if isinstance(data, str) else data) if data else None

    n_workers = workers or (1 if tiny else cores)
    n_threads = threads or (1 if tiny else max(1, cores // n_workers))
    warnings: list[str] = []
    notes: list[str] = []
    if n_workers * n_threads > cores:
        warnings.append(f"{n_workers} workers × {n_threads} threads oversubscribe {cores} cores")

    hw, hw_note = local_profile(measure=True)
    if hw_note:
        (notes if hw is not None else warnings).append(hw_note)
    grid = choose_grid(
        sizes=sizes,
        tokens_per_param=tokens_per_param,
        holdout_ratio=holdout_tokens_per_param,
        minutes=minutes,
        tiny=tiny,
        hw=hw,
        workers=n_workers,
    )
    from trilemma.ladder.train import corpus_view

    view = corpus_view(data_t)
    plan = make_plan(
        grid,
        hw=hw,
        workers=n_workers,
        threads=n_threads,
        seed=seed,
        data_fingerprint=view.fingerprint,
    )
    n_workers = min(n_workers, len(plan.runs))
    if (
        minutes is not None
        and plan.predicted_wall_s is not None
        and plan.predicted_wall_s > minutes * MINUTE
    ):
        warnings.append(
            f"the planner predicts {plan.predicted_wall_s / MINUTE:.1f} minutes for this grid, more than "
            f"--minutes {minutes:g}"
        )
    price_h = (
        price
        if price is not None
        else (hw.price_usd_per_hour if hw is not None else CPU_PRICE_PER_CORE_HOUR * cores)
    )
    machine_w = hw.board_power_w if hw is not None else CPU_WATTS_PER_CORE * cores
    share = n_threads / cores

    with nullcontext(0.0) if dry_run else directory_lock(out_dir) as waited:
        if waited > 1.0:
            notes.append(
                f"waited {waited:.0f} s for another ladder process on {out_dir}; resumed from what it wrote"
            )
        return _locked_run(
            plan,
            view,
            data_t,
            runs_path,
            out_dir,
            n_workers,
            n_threads,
            machine_w,
            share,
            price_h,
            hw,
            cores,
            plot,
            draw,
            warnings,
            notes,
            n_boot,
            seed,
            dry_run,
            progress,
            on_plan,
            t_start,
        )


def _locked_run(
    plan: LadderPlan,
    view: Any,
    data_t: tuple[str, ...] | None,
    runs_path: Path,
    out_dir: Path,
    n_workers: int,
    n_threads: int,
    machine_w: float,
    share: float,
    price_h: float,
    hw: Any,
    cores: int,
    plot: str | Path | None,
    draw: Callable[[LadderResult, Any, str | Path], Path] | None,
    warnings: list[str],
    notes: list[str],
    n_boot: int,
    seed: int,
    dry_run: bool,
    progress: bool,
    on_plan: Callable[[LadderPlan, dict[str, Any]], None] | None,
    t_start: float,
) -> LadderResult:
    """The part of ``run_ladder`` that reads and writes the directory (under its lock)."""
    by_key, resumed = _resume(plan, runs_path, warnings, notes)
    todo = [p for p in plan.runs if p.run.key not in by_key]
    info = {
        "runs_path": str(runs_path),
        "resumed": len(resumed),
        "to_train": len(todo),
        "cores": cores,
        "workers": n_workers,
        "threads": n_threads,
        "warnings": list(warnings),
        "notes": list(notes),
        "done_keys": set(resumed),
    }
    if on_plan is not None:
        on_plan(plan, info)

    job = _Job(
        plan=plan,
        view=view,
        data=data_t,
        runs_path=runs_path,
        out_dir=out_dir,
        workers=n_workers,
        threads=n_threads,
        power_w=machine_w * share,
    )
    fit_report, prediction = _train_and_fit(
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
        view,
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
    )


def _check_options(
    *,
    workers: int | None,
    threads: int | None,
    seed: int,
    n_boot: int,
    price: float | None,
    plot: str | Path | None,
    cores: int,
) -> None:
    """InputError for a bad option: counts are whole numbers (workers at most ``cores``), ``price`` (USD per
    machine-hour) non-negative, and a ``plot`` needs matplotlib."""
    for name, v in (
        ("workers", workers),
        ("threads", threads),
        ("seed", seed),
        ("bootstrap", n_boot),
    ):
        if v is not None and (
            isinstance(v, bool)
            or not isinstance(v, int)
            or v < (0 if name in ("seed", "bootstrap") else 1)
        ):
            raise InputError(
                name,
                v,
                "a whole number" + ("" if name in ("seed", "bootstrap") else ", at least 1"),
            )
    if workers is not None and workers > cores:
        raise InputError("workers", workers, f"at most {cores}: this machine has {cores} cores")
    if threads is not None and threads > cores:
        raise InputError("threads", threads, f"at most {cores}: this machine has {cores} cores")
    if price is not None and not (isinstance(price, (int, float)) and price >= 0):
        raise InputError("price", price, "a non-negative price in USD per machine-hour")
    if plot is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise InputError(
                "plot", str(plot), "matplotlib installed (pip install 'trilemma[plot]')"
            )
        check_output_file("plot", plot)


def _out_dir(out: str | Path) -> Path:
    """The output directory, created if missing; InputError if it cannot be."""
    if not str(out).strip():
        raise InputError("out", str(out), "a directory for runs.jsonl, law.toml and ladder.json")
    out_dir = Path(out).expanduser()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            "out", str(out), f"a directory that can be created ({exc.strerror})"
        ) from None
    if not out_dir.is_dir():
        raise InputError("out", str(out), "a directory")
    return out_dir


def _resume(
    plan: LadderPlan, runs_path: Path, warnings: list[str], notes: list[str]
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The records of ``runs_path`` that belong to ``plan``, by run key, and the set of those keys.

    Unreadable lines, repeated keys and other ladders' records are reported in ``warnings`` / ``notes``.
    """
    got = read_records(runs_path)
    warnings.extend(got.warnings)
    by_key: dict[str, dict[str, Any]] = {}
    planned_keys = {p.run.key for p in plan.runs}
    foreign = 0
    for r in got.records:
        if r["key"] not in planned_keys:
            foreign += 1
        elif r["key"] in by_key:
            warnings.append(
                f"{runs_path}: run {r['key']} appears more than once; the first record is used"
            )
        else:
            by_key[r["key"]] = r
    if foreign:
        notes.append(
            f"{foreign} record(s) in {runs_path} belong to other ladders (other grids, data or rules): not used"
        )
    return by_key, set(by_key)


@dataclass(frozen=True)
class _Job:
    """What every training of one call shares."""

    plan: LadderPlan
    view: Any  # the corpus (trilemma.ladder.train.corpus_view)
    data: tuple[str, ...] | None  # the corpus paths given, None: the default corpus
    runs_path: Path  # runs.jsonl, where each finished run is appended
    out_dir: Path
    workers: int  # training processes
    threads: int  # torch threads per worker
    power_w: float  # a run's share of the machine's power, W


def _train_and_fit(
    job: _Job,
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
    bar = LadderProgress(progress and not dry_run, len(todo))
    hardware_words = plan.hardware

    def task(p: PlannedRun) -> dict[str, Any]:
        from trilemma.ladder.train import run_to_dict

        return {
            "run": run_to_dict(p.run),
            "predicted_s": p.predicted_s,
            "hardware": hardware_words,
            "power_w": job.power_w,
            "out": str(runs_path),
            "data": list(job.data) if job.data else None,
        }

    def train_here(p: PlannedRun) -> None:
        from trilemma.ladder.records import append_record
        from trilemma.ladder.train import build_record, train

        bar.start_run(p.run.label, p.run.steps)
        raw = train(p.run, job.view, threads=job.threads, on_step=bar.step)
        rec = build_record(
            p.run,
            raw,
            job.view,
            predicted_s=p.predicted_s,
            hardware=hardware_words,
            power_w=job.power_w,
            worker=0,
        )
        append_record(runs_path, rec)
        by_key[p.run.key] = rec
        bar.run_done(p.run.label, rec["loss"])

    fit_report = prediction = None
    try:
        if not dry_run and todo:
            fit_todo = [p for p in todo if p.run.role == "fit"]
            if job.workers == 1:
                for p in sorted(fit_todo, key=lambda q: q.run.flop):
                    train_here(p)
            else:
                from trilemma.ladder.pool import run_pool

                order = sorted(
                    todo,
                    key=lambda q: (
                        -(q.predicted_s if q.predicted_s is not None else q.run.flop / 1e10)
                    ),
                )

                def done(rec: dict[str, Any]) -> None:
                    by_key[rec["key"]] = rec
                    bar.run_done(
                        f"{rec['model']['shape']['layers']}x{rec['model']['shape']['d_model']}",
                        rec["loss"],
                    )

                run_pool(
                    [task(p) for p in order], workers=job.workers, threads=job.threads, on_done=done
                )
        if (
            not dry_run
        ):  # a dry run trains nothing and fits nothing (the bootstrap alone is a minute)
            fit_report, prediction, fit_warnings = _fit_and_predict(
                plan, by_key, runs_path, job.view, job.out_dir, n_boot, seed, write=True
            )
            warnings.extend(fit_warnings)
        if not dry_run and job.workers == 1:
            for p in [q for q in todo if q.run.role == "held_out"]:
                train_here(p)
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


def _fit_and_predict(
    plan: LadderPlan,
    by_key: dict[str, dict[str, Any]],
    runs_path: Path,
    view: Any,
    out_dir: Path,
    n_boot: int,
    seed: int,
    write: bool = True,
) -> tuple[Any, Any, list[str]]:
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
        plan=plan.to_dict(),
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
