"""`trilemma solve`: pin two corners of (time, cost, loss), optimise the third, show the frontier.

    >>> from trilemma.solve import solve
    >>> r = solve(deadline="30d", budget="$2M")
    >>> r.optimum.to_dict()["time"]["total_s"], r.optimum_loss.mean

Stage 1 (search.py) finds the fastest layout that fits for every (model shape, GPU type,
precision, GPU count) — exhaustive and vectorised; stage 2 (optimize.py) handles tokens in
closed form and applies the pins.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from trilemma.errors import InfeasibleError, InputError
from trilemma.estimate.result import Estimate
from trilemma.estimate.stability import stability_flag
from trilemma.presets import constants, hardware_presets
from trilemma.quality.batch import batch_for, non_embedding_flop_per_token, optimal_batch_tokens
from trilemma.quality.optimal import check_target_loss
from trilemma.quality.predict import LossPrediction, check_unique_tokens, predict_loss_block
from trilemma.solve.optimize import (
    Frontier,
    FrontierFilters,
    Pins,
    best_index,
    candidate,
    choose_tokens,
    default_objective,
    explain_infeasible,
    frontier,
    rates,
    runners_up,
    serving_usd,
    table_goodput,
)
from trilemma.solve.search import ConfigTable, search_configs
from trilemma.specs import HardwareSpec, ModelSpec, Objective, Precision, Task
from trilemma.specs.bounds import BOUNDS
from trilemma.units import (
    KWH,
    SI,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_energy_kwh,
    fmt_gpu_hours,
    fmt_usd,
    parse_budget,
    parse_count,
    parse_duration,
)

SCHEMA = "trilemma.solve/1"
DEFAULT_PARAMS = (5e7, 1e12)  # model sizes searched when no --model / --params is given
SIZES_PER_DECADE = 4
DEFAULT_MAX_GPUS = 16384
DEFAULT_SEQ = 4096


@dataclass(frozen=True)
class SolveResult:
    """The optimum (re-evaluated through estimate), runners-up, pins and frontier of one solve."""

    SCHEMA: ClassVar[str] = SCHEMA
    optimum: Estimate
    optimum_loss: LossPrediction | None  # None for a fine-tune (no loss corner)
    runners_up: tuple[tuple[str, Estimate, LossPrediction | None], ...]  # (why, Estimate, its loss)
    pins: Pins
    frontier: Frontier | None
    table: ConfigTable
    candidates: int
    seconds: float
    warnings: tuple[str, ...] = field(default=())
    #: --inference-tokens: training and serving dollars of the optimum (Sardana et al. 2023), or None
    lifetime: dict[str, Any] | None = None
    #: the plan of config-table row ``i`` trained on ``tokens`` tokens, realised through estimate as the optimum
    #: is: ``plan_at(i, tokens) -> (Estimate, LossPrediction or None for a fine-tune)`` (a frontier point's plan)
    plan_at: Callable[[int, float], tuple[Estimate, LossPrediction | None]] | None = field(
        default=None, repr=False, compare=False
    )

    def frontier_plan(self, point: int) -> Estimate:
        """Frontier point ``point`` (the 0-based row of ``--frontier``'s CSV) as a full estimate."""
        n = 0 if self.frontier is None else int(self.frontier.time_s.size)
        if (
            isinstance(point, bool)
            or not isinstance(point, (int, np.integer))
            or not 0 <= point < n
            or self.plan_at is None
        ):
            raise InputError(
                "point",
                point,
                f"a frontier index from 0 to {n - 1}" if n else "a solve with a frontier",
            )
        return self.plan_at(int(self.frontier.config[point]), float(self.frontier.tokens[point]))[0]

    def change(self, e: Estimate, loss: LossPrediction | None) -> dict[str, Any]:
        """A runner-up against the optimum: Δ time (s), Δ cost ($), Δ loss (nats/token; None for a fine-tune,
        which has no loss corner), and the pins it breaks (``deadline``, ``budget``, ``target loss``; 1% slack,
        as the optimum's own check)."""
        d_loss = (
            None
            if loss is None or self.optimum_loss is None
            else loss.mean - self.optimum_loss.mean
        )
        return {
            "delta": {
                "time_s": e.time.total_s - self.optimum.time.total_s,
                "usd": e.cost.usd - self.optimum.cost.usd,
                "loss": d_loss,
            },
            "breaks": broken_pins(self.pins, e, loss),
        }

    def to_dict(self) -> dict[str, Any]:
        plan = plan_document
        doc: dict[str, Any] = {"optimum": plan(self.optimum, self.optimum_loss)}
        doc["schema"] = self.SCHEMA
        doc["runners_up"] = [
            {"differs_in": why, **self.change(e, loss), **plan(e, loss)}
            for why, e, loss in self.runners_up
        ]
        doc["pins"] = self.pins.as_dict()
        if self.frontier is not None:
            f = self.frontier
            doc["frontier"] = {
                "points": int(f.time_s.size),
                "feasible": int(f.feasible.sum()),
                "time_s": [float(f.time_s.min()), float(f.time_s.max())] if f.time_s.size else [],
                "usd": [float(f.usd.min()), float(f.usd.max())] if f.usd.size else [],
                "loss": [float(f.loss.min()), float(f.loss.max())]
                if f.loss.size and self.optimum_loss is not None
                else [],
                # what the frontier keeps (FrontierFilters), and how many points of the frontier
                # over every plan each filter removes
                "filters": {**f.filters.as_dict(), "applied": not f.keep_all},
                "unfiltered_points": f.unfiltered_points,
                "removed": dict(f.removed),
            }
        doc["lifetime"] = self.lifetime
        doc["search"] = {
            "candidates": self.candidates,
            "configurations": len(self.table),
            "seconds": self.seconds,
        }
        doc["warnings"] = list(self.warnings) + list(self.optimum.warnings)
        return doc


_MAX_CONFIGURATIONS: ContextVar[int | None] = ContextVar(
    "trilemma_max_configurations", default=None
)


@contextmanager
def search_limit(max_configurations: int) -> Iterator[None]:
    """Inside this block (this thread or task only) ``solve`` refuses a search over more than
    ``max_configurations`` (model size, GPU type, precision, GPU count) combinations: trilemma.web caps
    what one request may cost while running the CLI's own command."""
    token = _MAX_CONFIGURATIONS.set(int(max_configurations))
    try:
        yield
    finally:
        _MAX_CONFIGURATIONS.reset(token)


def broken_pins(p: Pins, e: Estimate, loss: LossPrediction | None) -> list[str]:
    """The pins a plan misses: deadline, budget (dollars, GPU-hours or energy) by more than 1% (the slack of
    the optimum's own check), target loss by more than 1e-4 (a fine-tune has no loss: never that one)."""
    out = []
    if p.deadline_s is not None and e.time.total_s > p.deadline_s * 1.01:
        out.append("deadline")
    if any(
        limit is not None and got > limit * 1.01
        for got, limit in (
            (e.cost.usd, p.budget_usd),
            (e.time.gpu_hours, p.budget_gpu_hours),
            (e.cost.energy_kwh, p.budget_kwh),
        )
    ):
        out.append("budget")
    if p.target_loss is not None and loss is not None and loss.mean > p.target_loss + 1e-4:
        out.append("target loss")
    return out


def plan_document(
    e: Estimate, loss: LossPrediction | None, why: str | None = None
) -> dict[str, Any]:
    """One plan of a solve as its JSON document: the estimate's, with the loss of the plan's tokens (None for
    a fine-tune: no from-scratch loss) and, for a runner-up, what it differs in."""
    d = e.to_dict()
    d["loss"] = None if loss is None else loss.to_dict()
    # a documented training-stability risk of the plan's precision at its size (estimate.stability), or None
    d["stability"] = stability_flag(str(e.plan.precision), e.params.total) or None
    if why:
        d = {"differs_in": why, **d}
    d.pop("schema", None)
    d.pop("warnings", None)
    return d


def _law_fn(law: Any, unique_tokens: float | None):
    from trilemma.quality.predict import loss_mean

    def fn(
        n_tot: np.ndarray, n_non: np.ndarray, tokens: np.ndarray, precision: np.ndarray
    ) -> np.ndarray:
        return np.asarray(
            loss_mean(law, n_tot, n_non, tokens, unique_tokens=unique_tokens, precision=precision)
        )

    return fn


def _models(
    model: str | ModelSpec | None, params: str | tuple[float, float] | None
) -> list[ModelSpec]:
    from trilemma.resolve import resolve_model
    from trilemma.shape import model_for_params

    if model is not None:
        if params is not None:
            raise InputError(
                "params", params, "no range with --model (the model given has its own size)"
            )
        return [resolve_model(model)[0]]
    lo, hi = DEFAULT_PARAMS
    if params is not None:
        if isinstance(params, str):
            parts = params.replace("...", "..").split("..")
            if len(parts) == 1:
                lo = hi = parse_count(parts[0], "params")
            elif len(parts) == 2:
                lo, hi = parse_count(parts[0], "params"), parse_count(parts[1], "params")
            else:
                raise InputError("params", params, "a size (7B) or a range such as 1B..70B")
        else:
            lo, hi = params
        if lo > hi:
            raise InputError("params", params, "a range low..high with low ≤ high")
    n = max(1, int(round(math.log10(hi / lo) * SIZES_PER_DECADE)) + 1)
    sizes = np.geomspace(lo, hi, n)
    out: dict[tuple, ModelSpec] = {}
    for s in sizes:
        m = model_for_params(float(s), field="params")
        out.setdefault((m.n_layers, m.d_model, m.ffn_dim), m)
    return list(out.values())


#: The most names one list of GPU types or precisions may hold (CLI, scenario, web and Python API all
#: reach them here): every preset and precision fits several times over; longer is a generated list,
#: not a search (200,000 repeats of one GPU searched it 200,000 times and hung).
MAX_LIST_NAMES = 64


def names_list(value: str | list[str], field: str) -> list[str]:
    """A comma-separated string or a list as stripped, non-empty names, at most MAX_LIST_NAMES."""
    names = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    if len(names) > MAX_LIST_NAMES:
        raise InputError(
            field,
            f"a list of {len(names):,} names",
            f"at most {MAX_LIST_NAMES} (each searched once: list every type once)",
        )
    return [n.strip() for n in names if n.strip()]


def _gpus(gpu: str | list[str] | None) -> list[HardwareSpec]:
    """The GPU types to search, each once (an alias of a type already listed adds nothing)."""
    from trilemma.resolve import resolve_hardware

    if gpu is None:
        return [h for name, h in hardware_presets().items() if name != "local"]
    out = list({h.name: h for h in map(resolve_hardware, names_list(gpu, "gpu"))}.values())
    if not out:
        raise InputError(
            "gpu",
            gpu,
            "a hardware preset or a comma-separated list of them (`trilemma presets "
            "hardware` lists them)",
        )
    return out


def _precisions(precision: str | list[str] | None) -> list[Precision]:
    """The precisions to search, each once, in the order given but bf16 before fp16: the two run at the same
    speed and memory and reach the same loss, so a tie goes to the first, and bf16 needs no loss scaling
    (fp16's overflow risk: presets/precision.toml [fp16])."""
    names = ["bf16"] if precision is None else names_list(precision, "precision")
    out: list[Precision] = []
    for n in names:
        try:
            p = Precision(n.strip().lower())
        except ValueError:
            raise InputError(
                "precision", n, "bf16, fp16, fp32, tf32 or fp8 (a comma-separated list)"
            ) from None
        if p not in out:
            out.append(p)
    if (
        Precision.BF16 in out
        and Precision.FP16 in out
        and out.index(Precision.FP16) < out.index(Precision.BF16)
    ):
        out.remove(Precision.BF16)
        out.insert(out.index(Precision.FP16), Precision.BF16)
    return out


def make_pins(
    deadline: str | float | None = None,
    budget: str | float | None = None,
    target_loss: float | None = None,
    minimize: str | None = None,
) -> Pins:
    usd = gpuh = kwh = None
    if budget is not None:
        kind, value = parse_budget(budget, "budget")
        if not value > 0:
            raise InputError(
                "budget",
                budget,
                "a positive budget: dollars ($2M), GPU-hours (100k GPUh) or energy (500MWh)",
            )
        usd, gpuh, kwh = (value if kind == k else None for k in ("usd", "gpu_hours", "kwh"))
    dl = None if deadline is None else parse_duration(deadline, "deadline")
    if target_loss is not None and not (
        isinstance(target_loss, (int, float)) and math.isfinite(target_loss) and target_loss > 0
    ):
        raise InputError(
            "target-loss", target_loss, "a positive loss in the law's unit (nats/token)"
        )
    if target_loss is not None:
        check_target_loss(float(target_loss))
    p = Pins(
        deadline_s=dl,
        budget_usd=usd,
        budget_gpu_hours=gpuh,
        budget_kwh=kwh,
        target_loss=target_loss,
    )
    if minimize is not None and not isinstance(minimize, str):
        raise InputError("minimize", minimize, "time, cost, loss or energy")
    obj = minimize.strip().lower() if minimize is not None else default_objective(p)
    choices = ", ".join(o.value for o in Objective)
    if not obj and minimize is not None:
        raise InputError("minimize", minimize, choices.replace(", energy", " or energy"))
    if not obj:
        raise InputError(
            "minimize",
            None,
            f"{choices.replace(', energy', ' or energy')} (pin two of --deadline, "
            "--budget and --target-loss, or say what to minimise)",
        )
    try:
        objective = Objective(obj)
    except ValueError:
        raise InputError("minimize", obj, choices.replace(", energy", " or energy")) from None
    return Pins(
        deadline_s=dl,
        budget_usd=usd,
        budget_gpu_hours=gpuh,
        budget_kwh=kwh,
        target_loss=target_loss,
        minimize=objective,
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


def _no_loss(
    n_tot: np.ndarray, n_non: np.ndarray, tokens: np.ndarray, precision: np.ndarray
) -> np.ndarray:
    """A fine-tune's loss corner: none (zeros keep the frontier's arithmetic; never printed)."""
    return np.zeros(np.broadcast(n_tot, tokens).shape)


def _finetune_objective(
    model: Any, tokens: Any, target_loss: Any, minimize: str | None, deadline: Any, budget: Any
) -> str:
    """The corner a fine-tune's solve minimises: time or cost (the flag's, else cost with a deadline, time
    with a budget, cost with neither); InputError naming the flag for what a fine-tune cannot take."""
    if model is None:
        raise InputError("model", None, "the base model to fine-tune (--model) with --finetune")
    if tokens is None:
        raise InputError(
            "tokens", None, "the fine-tuning tokens (--tokens, e.g. 100M) with --finetune"
        )
    if target_loss is not None:
        raise InputError(
            "target-loss",
            target_loss,
            "no value with --finetune (a fine-tune has no predicted loss; "
            "pin a --deadline or a --budget)",
        )
    if minimize is not None and minimize not in ("time", "cost"):
        raise InputError(
            "minimize", minimize, "time or cost with --finetune (a fine-tune has no loss corner)"
        )
    return minimize or ("time" if budget is not None and deadline is None else "cost")


def _checked_arguments(
    gpu: Any,
    precision: Any,
    seq_len: Any,
    params: Any,
    prices: Any,
    global_batch_tokens: Any,
    inference_tokens: Any,
    layout: Any,
    finetune: Any,
) -> tuple:
    """``solve``'s Python arguments of the wrong type refused as InputError naming the argument (as the CLI's
    are), counts given as text ("4M", "1T", "4k") parsed; the arguments back, in order."""
    for name, v in (("gpu", gpu), ("precision", precision)):
        if v is not None and not (
            isinstance(v, str)
            or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))
        ):
            raise InputError(name, v, f"a {name} name or a list of them")
    if seq_len is not None:
        if isinstance(seq_len, str):
            seq_len = parse_count(seq_len, "seq")
        if isinstance(seq_len, bool) or not float(seq_len).is_integer() or seq_len < 1:
            raise InputError("seq", seq_len, "a positive whole number of tokens")
        seq_len = BOUNDS["seq_len"].check(int(seq_len))
    if (
        params is not None
        and not isinstance(params, str)
        and not (
            isinstance(params, (list, tuple))
            and len(params) == 2
            and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in params
            )
        )
    ):
        raise InputError(
            "params",
            params,
            "a size ('7B'), a range ('1B..70B') or a pair (low, high) of parameters",
        )
    if prices is not None:
        if not isinstance(prices, dict) or not all(
            isinstance(k, str)
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and v >= 0
            for k, v in prices.items()
        ):
            raise InputError(
                "prices", prices, "a dict of GPU name → non-negative dollars per GPU-hour"
            )
    if isinstance(global_batch_tokens, str):
        global_batch_tokens = parse_count(global_batch_tokens, "global-batch")
    if isinstance(inference_tokens, str):
        inference_tokens = parse_count(inference_tokens, "inference-tokens")
    for name, v in (("layout", layout), ("finetune", finetune)):
        if v is not None and not isinstance(v, dict):
            raise InputError(name, v, "a dict of its fields")
    return (
        gpu,
        precision,
        seq_len,
        params,
        prices,
        global_batch_tokens,
        inference_tokens,
        layout,
        finetune,
    )


def solve(
    *,
    deadline: str | float | None = None,
    budget: str | float | None = None,
    target_loss: float | None = None,
    minimize: str | None = None,
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
    compile: bool = False,
    finetune: dict | None = None,
    host_memory_bytes: float | None = None,
    max_configurations: int | None = None,
    frontier_all: bool = False,
    frontier_filters: FrontierFilters | None = None,
    deploy: str | None = None,
    deploy_precision: str = "int4",
    context: int | None = None,
    min_tokens_per_s: float | None = None,
    inference_tokens: float | None = None,
    async_tp: bool = False,
    task: str = "causal-lm",
    failures_per_gpu_hour: float | None = None,
    restart_s: float | None = None,
    storage_write_bytes_per_s: float | None = None,
) -> SolveResult:
    """Pin corners, search everything the arguments allow, return the optimum and its context.
    ``compile``: every plan runs under torch.compile (TrainingPlan.compile); ``async_tp``: with asynchronous
    tensor parallelism (TrainingPlan.async_tp); ``task``: causal-lm or classification (TrainingPlan.task).
    ``max_configurations``:
    refuse (InputError, field ``search``) a search over more (model size, GPU type, precision, GPU count)
    combinations than this, before any is evaluated (default: the ``search_limit`` in force, else none).

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
    training + serving.

    ``failures_per_gpu_hour``, ``restart_s`` (s) and ``storage_write_bytes_per_s`` (the whole job's checkpoint
    write bandwidth, bytes/s): the cluster's reliability (ClusterSpec's fields; None: reliability.toml's
    defaults), in every plan's goodput."""
    from trilemma.estimate.choose import estimate_plan
    from trilemma.quality.laws import get_law
    from trilemma.resolve import finetune_fields, make_cluster, make_plan

    (
        gpu,
        precision,
        seq_len,
        params,
        prices,
        global_batch_tokens,
        inference_tokens,
        layout,
        finetune,
    ) = _checked_arguments(
        gpu,
        precision,
        seq_len,
        params,
        prices,
        global_batch_tokens,
        inference_tokens,
        layout,
        finetune,
    )

    t0 = _time.perf_counter()
    ft_args = {k: v for k, v in (finetune or {}).items() if v is not None}
    is_ft = ft_args.get("finetune") is not None
    if is_ft:
        minimize = _finetune_objective(model, tokens, target_loss, minimize, deadline, budget)
        if unique_tokens is not None:
            raise InputError(
                "unique-tokens",
                unique_tokens,
                "no value with --finetune (it sets the loss corner's "
                "repetition; a fine-tune has no loss corner)",
            )
    if str(task) == Task.CLASSIFICATION and not is_ft:
        raise InputError(
            "task",
            task,
            "causal-lm without --finetune: the scaling laws predict next-token loss, so a "
            "classifier has no loss corner to trade (with --finetune, solve trades time "
            "and cost alone)",
        )
    pins = make_pins(deadline, budget, target_loss, minimize)
    fixed_tokens = None if tokens is None else parse_count(tokens, "tokens")
    if (
        fixed_tokens is not None and fixed_tokens > SI["E"]
    ):  # the plan's limit (trilemma.specs.plan.Stage.tokens)
        raise InputError("tokens", tokens, "at most 1E (10^18) tokens")
    uniq = (
        None
        if unique_tokens is None
        else check_unique_tokens(parse_count(unique_tokens, "unique-tokens"))
    )
    the_law = get_law(law)
    law_E = float(the_law.constants.get("E", 0.0) or 0.0)
    if pins.target_loss is not None and pins.target_loss <= law_E:
        raise InfeasibleError(
            f"target loss (--target-loss) {pins.target_loss} is at or below the law's irreducible loss "
            f"E = {law_E:.3f} ({getattr(the_law, 'name', law)}): no plan reaches it"
        )
    models = _models(model, params)
    seq = seq_len or DEFAULT_SEQ
    deploy_of: dict[str, Any] = {}
    if deploy is not None or min_tokens_per_s is not None:
        models, deploy_of = _deployable(
            models, deploy, deploy_precision, context or seq, min_tokens_per_s
        )
    if inference_tokens is not None and (
        not math.isfinite(float(inference_tokens)) or float(inference_tokens) < 0
    ):
        raise InputError(
            "inference-tokens", inference_tokens, "a non-negative number of tokens, e.g. 10T"
        )
    plan_fields = finetune_fields(models[0], **ft_args) if ft_args else {}
    plan_fields = plan_fields | {"async_tp": async_tp, "task": task}
    cluster_fields = {
        k: v
        for k, v in (
            ("host_memory_bytes", host_memory_bytes),
            ("failures_per_gpu_hour", failures_per_gpu_hour),
            ("restart_s", restart_s),
            ("storage_write_bytes_per_s", storage_write_bytes_per_s),
        )
        if v is not None
    }
    gpus = _gpus(gpu)
    make_cluster(
        gpus[0], 1, **cluster_fields
    )  # the cluster's own figures checked before the search
    precs = _precisions(precision)
    if not any(p in g.peak_flop_per_s for g in gpus for p in precs):
        runs = "; ".join(
            f"{g.name}: {', '.join(sorted(str(q) for q in g.peak_flop_per_s))}" for g in gpus[:6]
        )
        raise InputError(
            "precision",
            ",".join(str(p) for p in precs),
            f"a precision the hardware searched runs ({runs}{'; …' if len(gpus) > 6 else ''})",
        )
    max_n = DEFAULT_MAX_GPUS if max_gpus is None else int(max_gpus)
    if max_n < 1:
        raise InputError("max-gpus", max_gpus, "a positive whole number")
    # GPU counts: powers of two and the 1.5× steps between them (3·2^k: 24, 48, 96, 384 … — clusters
    # and reservations are not only powers of two), and the cap itself
    counts = sorted(
        {c for k in range(int(math.log2(max_n)) + 1) for c in (2**k, 3 * 2**k) if c <= max_n}
        | {max_n}
    )
    size = len(models) * len(gpus) * len(precs) * len(counts)
    max_configurations = (
        _MAX_CONFIGURATIONS.get() if max_configurations is None else max_configurations
    )
    if max_configurations is not None and size > max_configurations:
        raise InputError(
            "search",
            f"{len(models)} model sizes × {len(gpus)} GPU types × {len(precs)} precisions × "
            f"{len(counts)} GPU counts = {size:,} configurations",
            f"at most {max_configurations:,} configurations: narrow --params, --gpu, --precision "
            "or --max-gpus",
        )
    # the batch: the user's, or each model's DeepSeek-LLM optimum for its compute (trilemma.quality.batch)
    batch = global_batch_tokens or [batch_for(m, seq, fixed_tokens) for m in models]
    table = search_configs(
        models,
        gpus,
        precs,
        counts,
        seq,
        batch,
        layout,
        memory_headroom=memory_headroom,
        compile=compile,
        plan_fields=plan_fields,
        cluster_fields=cluster_fields,
    )
    if fixed_tokens is not None and len(table) and fixed_tokens < float(table.batch_tokens.min()):
        raise InputError(
            "tokens",
            tokens,
            f"at least one global batch ({fmt_count(float(table.batch_tokens.min()))} "
            "tokens; --global-batch sets a smaller one)",
        )
    e = constants()["energy"]
    c = rates(table, table_goodput(table, seq, plan_fields, cluster_fields), prices or {}, e)
    if inference_tokens:
        c = replace(c, fixed_usd=serving_usd(c, float(inference_tokens)))
    loss_fn = _law_fn(the_law, uniq) if not is_ft else _no_loss
    ch = choose_tokens(c, pins, loss_fn, fixed_tokens)
    best = best_index(ch, pins.minimize)
    if best is None:
        raise InfeasibleError(
            "no plan meets the pins: " + explain_infeasible(table, c, pins, loss_fn, law_E)
        )
    best_cand = candidate(ch, best, "optimum")
    # each runner-up differs from the optimum in one lever: (label, configuration, tokens)
    levers = runners_up(table, c, pins, loss_fn, float(ch.tokens[best]), best)

    def plan_at(i: int, tokens: float) -> tuple[Estimate, LossPrediction | None]:
        m = table.models[table.model_idx[i]]
        hw = table.gpus[table.gpu_idx[i]]
        prec = table.precisions[table.prec_idx[i]]
        cl = make_cluster(
            hw,
            int(table.n_gpus[i]),
            memory_headroom=memory_headroom,
            **cluster_fields,
            **({"price_usd_per_hour": prices[hw.name]} if prices and hw.name in prices else {}),
        )
        plan = make_plan(
            m, tokens, seq, float(table.batch_tokens[i]), prec, compile=compile, **plan_fields
        )
        plan = plan.replace(stages=(plan.stages[0].replace(explicit_batch=False),))
        est = estimate_plan(m, cl, plan, table.layout(i), "solver")
        if is_ft:
            return est, None
        return est, predict_loss_block(
            m, tokens, law=the_law, unique_tokens=uniq, precision=str(prec)
        )

    opt, opt_loss = plan_at(best_cand.row, best_cand.tokens)
    lifetime = None
    if inference_tokens:
        serve = float(np.asarray(c.fixed_usd)[best])
        lifetime = {
            "inference_tokens": float(inference_tokens),
            "training_usd": opt.cost.usd,
            "serving_usd": serve,
            "lifetime_usd": opt.cost.usd + serve,
            "convention": "Sardana et al. 2023 (arXiv 2401.00448): 2·N FLOPs per served token, at the cheapest "
            "dollars per training FLOP among the plans searched (trilemma.solve.optimize.serving_usd)",
        }
    if deploy is not None:
        from trilemma.estimate.deploy import with_deploy

        opt = with_deploy(opt, deploy, deploy_precision, context or seq)
        if inference_tokens:
            lifetime["serving_energy_kwh_on_device"] = (
                float(inference_tokens) * opt.deploy["energy_per_token_j"] / KWH
            )
        if min_tokens_per_s is not None:
            opt = replace(opt, deploy={**opt.deploy, "min_tokens_per_s": float(min_tokens_per_s)})
    _check_pins(opt, pins)
    ups = tuple((why, *plan_at(i, d)) for why, i, d in levers)
    if frontier_filters is None and is_ft:
        frontier_filters = FrontierFilters.FINETUNE
    front = (
        frontier(
            table,
            c,
            pins,
            loss_fn,
            fixed_tokens,
            filters=frontier_filters,
            keep_all=frontier_all,
            include=((best_cand.row, best_cand.tokens),),
        )
        if want_frontier
        else None
    )
    warnings = []
    if is_ft:
        from trilemma.estimate.finetune import FINETUNE_NO_LOSS

        warnings.append(
            f"fine-tune: the search minimised {pins.minimize} under the pins (a fine-tune has no loss "
            "corner to trade); " + FINETUNE_NO_LOSS.removeprefix("quality: ")
        )
    if model is None and table.model_idx[best] in (0, len(models) - 1):
        warnings.append("the optimum sits at the edge of the model sizes searched: widen --params")
    if global_batch_tokens is None and not is_ft:
        m_best = models[table.model_idx[best]]
        want = optimal_batch_tokens(
            non_embedding_flop_per_token(m_best, seq) * float(ch.tokens[best])
        )
        used = float(table.batch_tokens[best])
        if not 0.5 <= used / want <= 2:
            warnings.append(
                f"the batch of {fmt_count(used)} tokens was set for {'20 tokens per parameter' if fixed_tokens is None else 'the given tokens'}; "
                f"the {fmt_count(float(ch.tokens[best]))} tokens chosen call for about {fmt_count(want)} "
                "(DeepSeek LLM's batch law): pass --global-batch to use it"
            )
    if pins.target_loss is not None and float(ch.tokens[best]) <= float(
        table.batch_tokens[best]
    ) * (1 + 1e-9):
        warnings.append(
            f"target loss {pins.target_loss:g} is met by a single global batch (the law gives "
            f"{float(ch.loss[best]):.3f} after {fmt_count(float(ch.tokens[best]))} tokens): the target does not "
            "bind; set one below that for a plan that trains"
        )
    if table.n_gpus[best] == max(counts):
        warnings.append(
            f"the optimum uses the most GPUs allowed ({max(counts)}): raise --max-gpus to go further"
        )
    if deploy_of:
        warnings.append(deploy_of["note"])
    return SolveResult(
        optimum=opt,
        optimum_loss=opt_loss,
        runners_up=ups,
        pins=pins,
        frontier=front,
        table=table,
        candidates=table.candidates,
        seconds=_time.perf_counter() - t0,
        warnings=tuple(warnings),
        plan_at=plan_at,
        lifetime=lifetime,
    )


def _deployable(
    models: list[ModelSpec],
    device: str | None,
    precision: str,
    context: int,
    min_tokens_per_s: float | None,
) -> tuple[list[ModelSpec], dict[str, Any]]:
    """The model sizes that fit ``device`` at ``precision`` with ``context`` tokens of KV cache and decode at
    ``min_tokens_per_s`` or faster there (trilemma.estimate.deploy), and a note of what the pin removed;
    InfeasibleError when none does."""
    from trilemma.estimate.deploy import DEPLOY_BITS, deploy_model
    from trilemma.estimate.params import param_counts
    from trilemma.presets import deploy_efficiency, get_device

    if device is None:
        raise InputError(
            "min-tokens-per-s",
            min_tokens_per_s,
            "a value with --deploy DEVICE (the device it is measured on)",
        )
    if precision not in DEPLOY_BITS:
        raise InputError("deploy-precision", precision, ", ".join(DEPLOY_BITS))
    rate = 0.0 if min_tokens_per_s is None else float(min_tokens_per_s)
    if not math.isfinite(rate) or rate < 0:
        raise InputError(
            "min-tokens-per-s", min_tokens_per_s, "a non-negative number of tokens per second"
        )
    dev, eff = get_device(device), deploy_efficiency()
    deps = [deploy_model(m, param_counts(m), dev, precision, context, eff) for m in models]
    keep = [m for m, d in zip(models, deps) if d.fits and d.decode_tokens_per_s >= rate]
    if not keep:
        fit = [(m, d) for m, d in zip(models, deps) if d.fits]
        why = (
            f"none of the {len(models)} model sizes searched fits {dev.name} at {precision} with a {context:,}-token "
            f"KV cache (the smallest needs {fmt_bytes(deps[0].total_bytes)} of {fmt_bytes(dev.usable_bytes)})"
            if not fit
            else f"the fastest model that fits {dev.name} ({fit[0][0].name}) decodes {fit[0][1].decode_tokens_per_s:.1f} "
            f"tokens/s there, under --min-tokens-per-s {rate:g}: allow smaller models (--params) or a lower rate"
        )
        raise InfeasibleError("no plan meets the pins: " + why)
    largest = max(keep, key=lambda m: param_counts(m).total)
    note = (
        f"deploy: {len(keep)} of {len(models)} model sizes fit {dev.name} at {precision} with a {context:,}-token "
        f"KV cache"
        + (f" and decode at ≥ {rate:g} tokens/s there" if min_tokens_per_s is not None else "")
        + f" (largest {fmt_count(param_counts(largest).total)} parameters)"
    )
    return keep, {"note": note}


__all__ = ["SolveResult", "broken_pins", "make_pins", "plan_document", "search_limit", "solve"]
