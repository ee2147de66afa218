"""The ladder's predicted times: one run's seconds on this machine's ``local`` profile (shared out
over the parallel workers), and the wall time of a list of runs on the workers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.ladder.plan import RunSpec


def worker_hardware(hw: Any, workers: int) -> Any:
    """A worker's share of a machine profile: 1/workers of its peak FLOP/s and memory bandwidth."""
    if workers == 1:
        return hw
    return hw.replace(
        name=f"{hw.name}/{workers}",
        peak_flop_per_s={p: v / workers for p, v in hw.peak_flop_per_s.items()},
        hbm_bw_bytes_per_s=hw.hbm_bw_bytes_per_s / workers,
        hbm_bytes=hw.hbm_bytes / workers,
        board_power_w=hw.board_power_w / workers,
        price_usd_per_hour=hw.price_usd_per_hour / workers,
    )


def predict_run_s(run: RunSpec, hw: Any) -> float:
    """The planner's training time of ``run`` on ``hw`` (one device, fp32, no goodput loss), s."""
    return predict_run(run, hw)[0]


def predict_run(run: RunSpec, hw: Any, precision: str = "fp32") -> tuple[float, float]:
    """The planner's training time (s) and peak memory per device (bytes) of ``run`` on one ``hw``
    device, no goodput loss: ``fp32`` (the CPU trainer) or ``bf16`` (autocast on a GPU: the
    planner's bf16 mixed-precision dtypes)."""
    from trilemma.estimate.choose import evaluate_layout
    from trilemma.resolve import make_cluster, make_plan
    from trilemma.specs import DtypeSpec, Layout, Recompute

    spec = run.shape.spec(run.seq)
    gbt = float(run.tokens_per_step)
    fp32 = {
        "dtypes": DtypeSpec(
            weight="fp32",
            grad="fp32",
            master=None,
            optimizer_state="fp32",
            frozen_weight="fp32",
            activation="fp32",
        )
    }
    plan = make_plan(
        spec,
        tokens=float(run.tokens),
        seq_len=run.seq,
        global_batch_tokens=gbt,
        precision=precision,
        flash_attention=True,
        goodput=1.0,
        **(fp32 if precision == "fp32" else {}),
    )
    layout = Layout(
        tp=1, pp=1, dp=1, zero=0, recompute=Recompute("none"), micro_batch=run.batch_seqs
    )
    est = evaluate_layout(spec, make_cluster(hw, 1, gpus_per_node=1), plan, layout)
    return float(est.time.step_s) * run.steps, float(est.memory.per_gpu_bytes)


def schedule_s(times: list[float], workers: int) -> float:
    """Longest-first list scheduling of independent runs over ``workers`` (the ladder's order)."""
    loads = [0.0] * max(1, workers)
    for t in sorted(times, reverse=True):
        i = loads.index(min(loads))
        loads[i] += t
    return max(loads)
