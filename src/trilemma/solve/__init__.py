"""`trilemma solve`: pin two corners of (time, cost, loss), optimise the third, show the frontier.

    >>> from trilemma.solve import solve
    >>> r = solve(deadline="30d", budget="$2M")
    >>> r.optimum.to_dict()["time"]["total_s"], r.optimum_loss.mean

Stage 1 (search.py) finds the fastest layout that fits for every (model shape, GPU type,
precision, GPU count) — exhaustive and vectorised; stage 2 (optimize.py) handles tokens in
closed form and applies the pins.

The arguments of ``solve``, beyond the flags of `trilemma solve` they mirror:
``stack``: the software stack every plan runs on (a preset name, trilemma.presets.stacks, or a StackSpec;
TrainingPlan.stack); ``compile``: every plan runs under torch.compile (TrainingPlan.compile); ``async_tp``:
with asynchronous tensor parallelism (TrainingPlan.async_tp) — None for either: the stack's (off without
one); ``task``: causal-lm or classification (TrainingPlan.task).
``max_configurations``:
refuse (InputError, field ``search``) a search over more (model size, GPU type, precision, GPU count)
combinations than this, before any is evaluated (default None: no limit; trilemma.web passes its cap).
``searches``: where to keep the search's table (an object with ``get(key)`` and ``put(key, table)``, such as
trilemma.web's cache of recent searches; trilemma.solve.search.search_kept), so that a solve that changes only
its pins ranks the same table again (default None: searched every time).

``target_score``: "BENCHMARK=SCORE" (mmlu=0.65): the quality pin in a benchmark, met by the plans whose
80% band's lower end reaches the score (trilemma.quality.benchmarks; with ``target_loss`` both must hold).

``finetune``: the fine-tune keyword arguments of trilemma.api.estimate (finetune, lora_rank, …,
optimizer, offload). A fine-tune needs the model and the tokens, has no loss corner (the laws predict
from-scratch losses: FINETUNE_NO_LOSS), so it minimises time or money under the pins — cost when a
deadline is pinned, time when a budget is, cost when neither — and says so in its warnings.

``frontier_all``: the frontier over every plan, not only those that pass ``frontier_filters``
(default FrontierFilters(): at least 1,000 steps and 10 minutes, at most a year).

``deploy`` (a device, trilemma.presets.get_device) pins where the trained model must run: only model sizes
that fit it at ``deploy_precision`` with a KV cache of ``context`` tokens (default: the sequence length) and
decode at ``min_tokens_per_s`` or faster there are searched (trilemma.estimate.deploy). ``inference_tokens``:
the model will serve that many tokens; their cost (Sardana et al. 2023: 2·N FLOPs a token at the plan's
dollars per FLOP, trilemma.solve.optimize.serving_usd) is added to each plan's, and a dollar budget holds
training + serving. With ``deploy`` they are served on the users' devices instead: each model's joules per
chat answer there at ``device_usd_per_kwh`` dollars per kWh (None: constants.toml's, the US residential
average; trilemma.solve.ondevice).

``rank``: "pessimistic" (default) ranks plans at the pessimistic end of each one's 80% band of time and
cost, "point" on the point estimate (trilemma.solve.rank); an optimum on a chip family with no measured
step time comes with the best plan on a calibrated family (``SolveResult.calibrated``).

``provider`` (a provider of presets/prices.toml, or ``all``: each GPU type at its cheapest offer) and
``market`` (on-demand, reserved, spot) price the GPU types searched at those dated offers, leaving out the
types with none; spot adds its preemption rate to every plan's failure rate (trilemma.presets.prices).

``failures_per_gpu_hour``, ``restart_s`` (s) and ``storage_write_bytes_per_s`` (the whole job's checkpoint
write bandwidth, bytes/s): the cluster's reliability (ClusterSpec's fields; None: reliability.toml's
defaults), in every plan's goodput.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trilemma.errors import InfeasibleError, InputError
from trilemma.estimate.result import Estimate
from trilemma.presets import constants
from trilemma.quality.batch import batch_for
from trilemma.quality.distill import distill_of, distilled_loss_fn
from trilemma.solve.distill import solve_distilled
from trilemma.solve.frontier import Frontier, FrontierFilters, frontier
from trilemma.solve.inputs import MAX_LIST_NAMES, law_fn, make_pins, names_list, no_loss
from trilemma.solve.levers import Candidate, candidate, runners_up
from trilemma.solve.methods import check_methods, methods_of, solve_methods
from trilemma.solve.optimize import (
    Choice,
    Corners,
    Pins,
    choose_tokens,
    explain_infeasible,
    rates,
    serving_usd,
    table_goodput,
)
from trilemma.solve.power import row_power_w
from trilemma.solve.rank import DEFAULT_RANK, band_high, calibrated_mask, ranked_best
from trilemma.solve.realise import deployed, plan_maker, solve_warnings
from trilemma.solve.result import SCHEMA, SolveResult, broken_pins, plan_document
from trilemma.solve.search import ConfigTable, search_kept
from trilemma.solve.setup import SolveSetup, solve_setup
from trilemma.specs import ModelSpec
from trilemma.specs.distill import DistillSpec
from trilemma.specs.stack import StackSpec
from trilemma.specs.trainer import TrainerSpec
from trilemma.units import fmt_count, fmt_duration, fmt_energy_kwh, fmt_gpu_hours, fmt_usd


def solve(
    *,
    deadline: str | float | None = None,
    budget: str | float | None = None,
    target_loss: float | None = None,
    minimize: str | None = None,
    target_score: str | None = None,
    model: str | ModelSpec | None = None,
    params: str | None = None,
    tokens: str | float | None = None,
    unique_tokens: str | float | None = None,
    gpu: str | list[str] | None = None,
    max_gpus: int | None = None,
    precision: str | list[str] | None = None,
    seq_len: int | None = None,
    global_batch_tokens: float | None = None,
    law: str | None = None,
    prices: dict[str, float] | None = None,
    layout: dict | None = None,
    want_frontier: bool = True,
    memory_headroom: float | None = None,
    compile: bool | None = None,
    stack: str | StackSpec | None = None,
    trainer: str | TrainerSpec | None = None,
    activation_offload: bool | None = None,
    finetune: dict | None = None,
    host_memory_bytes: float | None = None,
    max_configurations: int | None = None,
    frontier_all: bool = False,
    frontier_filters: FrontierFilters | None = None,
    deploy: str | None = None,
    deploy_precision: str | None = None,
    runtime: str | None = None,
    context: int | None = None,
    min_tokens_per_s: float | None = None,
    inference_tokens: float | None = None,
    device_usd_per_kwh: float | None = None,
    distill: str | DistillSpec | None = None,
    distill_saving: float | None = None,
    async_tp: bool | None = None,
    task: str = "causal-lm",
    failures_per_gpu_hour: float | None = None,
    restart_s: float | None = None,
    storage_write_bytes_per_s: float | None = None,
    rank: str = DEFAULT_RANK,
    provider: str | None = None,
    market: str | None = None,
    max_power: str | float | None = None,
    pue: float | None = None,
    region: str | None = None,
    host_power_w_per_node: float | None = None,
    searches: Any = None,
) -> SolveResult:
    """Pin corners, search everything the arguments allow, return the optimum and its context (the
    arguments: this module's docstring and `trilemma solve --help`)."""
    if distill_saving is not None or (distill is not None and not isinstance(distill, DistillSpec)):
        # a teacher named: training from scratch and distilling from it compared (trilemma.solve.distill)
        args = dict(locals())
        method = finetune.get("finetune") if isinstance(finetune, dict) else None
        args["distill"] = distill_of(distill, distill_saving, method)
        return solve_distilled(args, solve)
    methods = methods_of(finetune.get("finetune") if isinstance(finetune, dict) else None)
    if (
        methods is not None
    ):  # --finetune auto or a list: the method as a lever (trilemma.solve.methods)
        check_methods(methods)
        given = {k: v for k, v in locals().items() if k != "methods"}
        return solve_methods(given, methods, solve)
    return _solved(solve_setup(dict(locals())))


def _solved(s: SolveSetup) -> SolveResult:
    """The search of a set-up solve ``s`` (solve_setup) and its result: the optimum, the
    runners-up (each one lever away), the frontier, the best calibrated alternative and the
    warnings; ``seconds`` the search's wall time from here."""
    t0 = _time.perf_counter()
    _check_size(s, s.args["max_configurations"])
    found = _search(s)
    table, c, ch, best = found.table, found.corners, found.choice, found.best
    best_cand = candidate(ch, best, "optimum")
    # each runner-up differs from the optimum in one lever: (label, configuration, tokens)
    levers = runners_up(table, c, s.pins, found.loss_fn, float(ch.tokens[best]), best)
    plan_at = plan_maker(s, table)
    opt, opt_loss = plan_at(best_cand.row, best_cand.tokens)
    opt, lifetime = deployed(s, opt, c.fixed_usd, best)
    _check_pins(opt, s.pins)
    ups = tuple((why, *plan_at(i, d)) for why, i, d in levers)
    front = _frontier(s, found, best_cand) if s.args["want_frontier"] else None
    alt = _calibrated_alternative(s, found, plan_at)
    warn = solve_warnings(s, table, ch, best) + found.rank_notes
    return SolveResult(
        optimum=opt,
        optimum_loss=opt_loss,
        runners_up=ups,
        pins=s.pins,
        frontier=front,
        table=table,
        candidates=table.candidates,
        seconds=_time.perf_counter() - t0,
        warnings=warn,
        plan_at=plan_at,
        lifetime=lifetime,
        rank=s.args["rank"],
        calibrated=alt,
    )


@dataclass(frozen=True)
class _Found:
    """The search's table, its per-configuration corners, the token choice and the best row (None
    refused before it is built)."""

    table: ConfigTable
    corners: Corners
    loss_fn: Callable[..., np.ndarray]
    choice: Choice
    best: int
    #: per configuration, the high multiplier of its time and cost band (None: ranked on the point)
    high: np.ndarray | None = None
    rank_notes: tuple[str, ...] = ()


def _search(s: SolveSetup) -> _Found:
    """Every configuration that fits (trilemma.solve.search), priced and given its tokens under the
    pins (trilemma.solve.optimize); InfeasibleError when none meets them."""
    a = s.args
    # the batch: the user's, or each model's DeepSeek-LLM optimum for its compute (trilemma.quality.batch)
    batch = a["global_batch_tokens"] or [batch_for(m, s.seq, s.fixed_tokens) for m in s.models]
    table = search_kept(
        a["searches"],
        s.models,
        s.gpus,
        s.precisions,
        s.counts,
        s.seq,
        batch,
        a["layout"],
        memory_headroom=a["memory_headroom"],
        compile=a["compile"],
        plan_fields=s.plan_fields,
        cluster_fields=s.cluster_fields,
    )
    if (
        s.fixed_tokens is not None
        and len(table)
        and s.fixed_tokens < float(table.batch_tokens.min())
    ):
        raise InputError(
            "tokens",
            a["tokens"],
            f"at least one global batch ({fmt_count(float(table.batch_tokens.min()))} "
            "tokens; --global-batch sets a smaller one)",
        )
    table = under_power(table, s)
    goodput = table_goodput(table, s.seq, s.plan_fields, s.cluster_fields)
    c = rates(table, goodput, a["prices"] or {}, constants()["energy"], s.cluster_fields)
    if a["inference_tokens"]:
        c = replace(c, fixed_usd=_serving(s, table, c))
    loss_fn = law_fn(s.law, s.unique_tokens, s.models) if not s.is_ft else no_loss
    if s.plan_fields.get("distill") is not None:
        loss_fn = distilled_loss_fn(loss_fn, s.law, s.plan_fields["distill"])
    ch = choose_tokens(c, s.pins, loss_fn, s.fixed_tokens)
    high = None
    if s.args["rank"] == "pessimistic" and len(table):
        st = s.plan_fields.get("stack")
        high = band_high(table, st is not None, s.is_ft, st.name if st is not None else None)
    best, at_worst = ranked_best(ch, c, high, s.pins, loss_fn, s.fixed_tokens)
    if best is None:
        raise InfeasibleError(
            "no plan meets the pins: "
            + explain_infeasible(table, c, s.pins, loss_fn, s.law_E, s.fixed_tokens)
        )
    notes = ()
    if high is not None and not at_worst:
        notes = (
            "no plan meets the pins at the pessimistic end of its band: the plans that meet them "
            "at the point are ranked on the high end of their bands",
        )
    return _Found(table, c, loss_fn, ch, best, high, notes)


def _serving(s: SolveSetup, table: ConfigTable, c: Corners) -> np.ndarray:
    """Dollars of serving ``inference_tokens`` per configuration: on the --deploy device at its owners'
    electricity price (trilemma.solve.ondevice), else at datacentre dollars per FLOP (serving_usd)."""
    tokens = float(s.args["inference_tokens"])
    if s.deploy_answer_j is None:
        return serving_usd(c, tokens)
    from trilemma.solve.ondevice import device_serving_usd

    answer_j = np.asarray(s.deploy_answer_j, dtype=float)[table.model_idx]
    return np.asarray(device_serving_usd(tokens, answer_j, s.args["device_usd_per_kwh"]))


def _calibrated_alternative(
    s: SolveSetup, found: _Found, plan_at: Callable
) -> tuple[Estimate, Any] | None:
    """Beside an optimum on a chip family with no measured step time: the best plan, ranked the
    same way, on a family the calibration measured (its Estimate and loss), or None."""
    t, ch = found.table, found.choice
    ok = calibrated_mask(t)
    if ok[found.best]:
        return None
    i, _ = ranked_best(ch, found.corners, found.high, s.pins, found.loss_fn, s.fixed_tokens, ok)
    return None if i is None else plan_at(i, float(ch.tokens[i]))


def under_power(table: ConfigTable, s: SolveSetup) -> ConfigTable:
    """The configurations whose facility power while training (row_power_w) is within the --max-power
    pin: the pin depends on the configuration alone, so the others are dropped before anything is priced
    and no optimum, runner-up or frontier point exceeds it; InfeasibleError naming the least when none is."""
    from trilemma.units import fmt_power

    cap = s.pins.max_power_w
    if cap is None or not len(table):
        return table
    watts = row_power_w(table, constants()["energy"], s.cluster_fields)
    keep = watts <= cap * (1 + 1e-9)
    if not keep.any():
        i = int(np.argmin(watts))
        raise InfeasibleError(
            f"no plan meets the pins: the least power of any plan searched is {fmt_power(watts[i])} "
            f"({int(table.n_gpus[i])}× {table.gpus[int(table.gpu_idx[i])].name}) against the "
            f"--max-power of {fmt_power(cap)}"
        )
    return table.take(keep)


def _frontier(s: SolveSetup, found: _Found, best: Candidate) -> Frontier:
    """The Pareto frontier of the search (the optimum ``best`` always on it); a fine-tune's keeps
    FrontierFilters.FINETUNE unless filters are given."""
    filters = s.args["frontier_filters"]
    if filters is None and s.is_ft:
        filters = FrontierFilters.FINETUNE
    return frontier(
        found.table,
        found.corners,
        s.pins,
        found.loss_fn,
        s.fixed_tokens,
        filters=filters,
        keep_all=s.args["frontier_all"],
        include=((best.row, best.tokens),),
    )


def _check_size(s: SolveSetup, max_configurations: int | None) -> None:
    """Refuse (InputError, field ``search``) a search over more (model size, GPU type, precision,
    GPU count) combinations than ``max_configurations`` (None: no limit)."""
    size = len(s.models) * len(s.gpus) * len(s.precisions) * len(s.counts)
    if max_configurations is not None and size > max_configurations:
        raise InputError(
            "search",
            f"{len(s.models)} model sizes × {len(s.gpus)} GPU types × {len(s.precisions)} precisions × "
            f"{len(s.counts)} GPU counts = {size:,} configurations",
            f"at most {max_configurations:,} configurations: narrow --params, --gpu, --precision or "
            "--max-gpus",
        )


def _check_pins(est: Estimate, p: Pins) -> None:
    """The realised optimum meets every pin (1% slack). The search prices a run at the goodput of runs
    longer than one checkpoint interval; a run of seconds is dominated by its one checkpoint write, so
    a pin that only such a run fits is infeasible: say so rather than print a plan that breaks it."""

    def gpu_h(x: float) -> str:
        return f"{fmt_gpu_hours(x)} GPU-hours"

    over = [
        (name, got, limit, fmt)
        for name, got, limit, fmt in (
            ("deadline", est.time.total_s, p.deadline_s, fmt_duration),
            ("budget", est.cost.usd, p.budget_usd, fmt_usd),
            ("budget", est.time.gpu_hours, p.budget_gpu_hours, gpu_h),
            ("budget", est.cost.energy_kwh, p.budget_kwh, fmt_energy_kwh),
        )
        if limit is not None and got > limit * 1.01
    ]
    if over:
        name, got, limit, fmt = over[0]
        raise InfeasibleError(
            f"no plan meets the pins: the best the search finds needs {fmt(got)} against the "
            f"{name} of {fmt(limit)} once its checkpoint write is counted; the {name} is too "
            "small for a training run with a checkpoint"
        )


__all__ = [
    "MAX_LIST_NAMES",
    "SCHEMA",
    "SolveResult",
    "broken_pins",
    "make_pins",
    "names_list",
    "plan_document",
    "solve",
]
