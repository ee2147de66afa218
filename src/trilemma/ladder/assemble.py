"""The parts of a ladder's result (trilemma.ladder.run): one row per planned run (measured,
resumed or pending, with the fitted law's loss), the held-out check, the totals and the machine."""

from __future__ import annotations

from typing import Any

from trilemma.estimate.cost import gpu_hours
from trilemma.ladder.plan import LadderPlan
from trilemma.ladder.result import HeldOut, RunRow

#: a CPU core's stated power, W: the probe's stated estimate (trilemma.probe.profile), used when
#: there is no profile
CPU_WATTS_PER_CORE = 10.0


def run_rows(
    plan: LadderPlan,
    by_key: dict[str, dict[str, Any]],
    resumed: set[str],
    report: Any,
    cores: int,
    price_h: float,
) -> list[RunRow]:
    """One row per planned run: its plan, the fitted law's loss there (nats/byte), and what was
    measured (``by_key``: the run records; ``price_h``: dollars per machine-hour)."""
    from trilemma.quality.forms import chinchilla_loss as law_predict

    rows = []
    for p in plan.runs:
        r, rec = p.run, by_key.get(p.run.key)
        law_loss = None
        if report is not None:
            law_loss = float(law_predict(report.point.constants, r.n, r.tokens))
        base = {
            "key": r.key,
            "role": r.role,
            "shape": r.shape.name,
            "n": r.n,
            "params_total": r.params_total,
            "tokens": r.tokens,
            "tokens_per_param": r.tokens_per_param,
            "steps": r.steps,
            "lr": r.lr,
            "flop": r.flop,
            "predicted_s": p.predicted_s,
            "law_loss": law_loss,
        }
        if rec is None:
            rows.append(RunRow(status="pending", **base))
            continue
        m = rec["measured"]
        on_gpu = str(rec["run"].get("device", "cpu")).startswith("cuda")  # a whole GPU per run
        rec_share = 1.0 if on_gpu else (rec["environment"].get("threads") or 1) / cores
        rows.append(
            RunRow(
                status="resumed" if r.key in resumed else "done",
                loss=rec["loss"],
                train_loss=m.get("train_loss"),
                train_s=m.get("train_s"),
                wall_s=m.get("wall_s"),
                tokens_per_s=m.get("tokens_per_s"),
                energy_j=m.get("energy_j"),
                cost_usd=None
                if m.get("wall_s") is None
                else gpu_hours(rec_share, m["wall_s"]) * price_h,
                **base,
            )
        )
    return rows


def held_out_row(
    plan: LadderPlan, by_key: dict[str, dict[str, Any]], prediction: Any
) -> HeldOut | None:
    """The held-out run: the law's prediction with its band against the measured loss."""
    held = None
    if prediction is not None:
        h = plan.held_out
        rec = by_key.get(h.key)
        measured = rec["loss"] if rec is not None else None
        err = None if measured is None else (prediction.mean - measured) / measured
        largest = max(r.n for r in plan.fit_runs)
        held = HeldOut(
            key=h.key,
            shape=h.shape.name,
            n=h.n,
            tokens=h.tokens,
            tokens_per_param=h.tokens_per_param,
            n_over_largest_fitted=h.n / largest,
            predicted=prediction.mean,
            low=prediction.low,
            high=prediction.high,
            interval=prediction.interval,
            measured=measured,
            error=err,
            within_band=None
            if measured is None
            else bool(prediction.low <= measured <= prediction.high),
        )
    return held


def ladder_totals(rows: list[RunRow], plan: LadderPlan, wall_s: float) -> dict[str, Any]:
    """Runs finished, resumed and trained now; their seconds, energy (J), dollars and FLOPs."""
    done_rows = [r for r in rows if r.wall_s is not None]
    totals = {
        "runs": len(rows),
        "finished": len(done_rows),
        "resumed": sum(r.status == "resumed" for r in rows),
        "trained_now": sum(r.status == "done" for r in rows),
        "train_s": sum(r.train_s or 0.0 for r in done_rows),
        "wall_s_runs": sum(r.wall_s or 0.0 for r in done_rows),
        "energy_j": sum(r.energy_j or 0.0 for r in done_rows),
        "cost_usd": sum(r.cost_usd or 0.0 for r in done_rows),
        "flop": sum(r.flop for r in done_rows),
        "wall_s": wall_s,
        "predicted_wall_s": plan.predicted_wall_s,
    }
    return totals


def machine_block(
    plan: LadderPlan, cores: int, hw: Any, machine_w: float, price_h: float
) -> dict[str, Any]:
    """The machine the ladder ran on: cores, workers and their threads, power (W) and price."""
    return {
        "cores": cores,
        "workers": plan.workers,
        "threads_per_worker": plan.threads,
        "hardware_profile": None if hw is None else hw.name,
        "power_w": machine_w,
        "power_source": (
            hw.notes.split(". ")[-1]
            if hw is not None
            else f"stated estimate, {CPU_WATTS_PER_CORE:.0f} W per core"
        ),
        "price_usd_per_hour": price_h,
    }
