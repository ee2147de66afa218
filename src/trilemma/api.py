"""The Python API: one call per verb, over the typed specs and results.

>>> from trilemma.api import estimate
>>> est = estimate("llama2-7b", "a100-80gb", n_gpus=64, tokens=2e12)
>>> est.time.total_s, est.memory.fits
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import numpy as np

from trilemma.errors import InputError
from trilemma.estimate.choose import estimate_plan, evaluate_layout
from trilemma.estimate.deploy_attach import attach_deploy as with_deploy
from trilemma.estimate.owned import with_owned
from trilemma.estimate.result import (
    SCHEMA,
    CostBreakdown,
    Estimate,
    MemoryBreakdown,
    StageResult,
    TimeBreakdown,
)
from trilemma.presets.prices import with_offer_notes
from trilemma.quality.attach import with_loss
from trilemma.quality.batch_hint import with_batch_notes
from trilemma.quality.distill import distill_of
from trilemma.request import (
    EstimateRequest,
    ExportRequest,
    OptimalRequest,
    PresetsRequest,
    Request,
    SolveRequest,
    ValidateRequest,
)
from trilemma.request.shared import FINETUNE_FIELDS
from trilemma.resolve import (
    at_offer,
    check_positions,
    finetune_fields,
    grid_intensity,
    make_cluster,
    make_plan,
    resolve_hardware,
    resolve_model,
)
from trilemma.specs import ClusterSpec, HardwareSpec, Layout, ModelSpec, Precision, TrainingPlan
from trilemma.specs.distill import DistillSpec
from trilemma.specs.stack import StackSpec
from trilemma.specs.trainer import TrainerSpec

R = TypeVar("R", bound=Request)


def estimate(
    model: str | ModelSpec | EstimateRequest,
    hardware: str | HardwareSpec | None = None,
    n_gpus: int | None = None,
    tokens: float | None = None,
    *,
    seq_len: int | None = None,
    global_batch_tokens: float | None = None,
    precision: Precision | str = Precision.BF16,
    layout: Layout | dict | None = None,
    cluster: dict | None = None,
    plan: TrainingPlan | None = None,
    law: str | None = None,
    unique_tokens: float | None = None,
    finetune: str | None = None,
    trainable_layers: int | None = None,
    lora_rank: int | None = None,
    lora_alpha: float | None = None,
    lora_targets: str | list[str] | None = None,
    base_precision: str | None = None,
    optimizer: str | None = None,
    offload: str | None = None,
    stack: str | StackSpec | None = None,
    accept: Callable[[Estimate], bool] | None = None,
    provider: str | None = None,
    market: str | None = None,
    own: dict | None = None,
    trainer: str | TrainerSpec | None = None,
    activation_offload: bool | None = None,
    distill: str | DistillSpec | None = None,
    distill_saving: float | None = None,
    kl_reference: bool | None = None,
) -> Estimate:
    """Estimate one training plan. ``layout`` pins any axes (a Layout pins them all); the rest are
    searched and the fastest legal layout that fits in memory is returned. The loss corner comes
    from ``law`` (default: trilemma.quality.laws.DEFAULT_LAW), with repetition over ``unique_tokens``;
    a fine-tune has none (``with_loss``).

    ``finetune`` (full, lora, qlora, freeze) with ``trainable_layers``, ``lora_rank``, ``lora_alpha``,
    ``lora_targets`` (attn, mlp, all-linear or module names), ``base_precision`` (bf16, fp16, int8, nf4),
    ``optimizer`` (adamw, adamw-8bit, paged-adamw-8bit, adafactor, sgd, lion) and ``offload`` (none,
    optimizer, optimizer+params) make the plan a fine-tune of ``model``, ``kl_reference`` holding or dropping an RL
    method's reference model (None: the method's default, trilemma.specs.rl.default_reference); ``stack`` (a preset name,
    trilemma.presets.stacks, or a StackSpec) the software that runs it, ``trainer`` (trilemma.presets.trainers)
    the fine-tuning trainer's memory features and ``activation_offload`` its offload switched (all ignored
    given ``plan``); ``distill`` a teacher's student at ``distill_saving`` (trilemma.quality.distill.distill_of).
    ``accept``: the fastest layout it accepts (trilemma.export.expressible(engine): one the engine can write)
    rather than the fastest of all. ``provider``/``market`` price the chip at a dated offer
    (trilemma.resolve.at_offer); ``own`` adds the run's cost on owned hardware (trilemma.estimate.owned.with_owned).
    ``estimate(EstimateRequest(...))`` runs a request (the flags of `trilemma estimate`, typed):
    run_estimate."""
    if isinstance(model, EstimateRequest):
        return run_estimate(model, accept=accept)
    m, how, cl = _model_and_cluster(model, hardware, n_gpus, cluster, plan, provider, market)
    ft = finetune_fields(
        m, finetune, trainable_layers=trainable_layers, lora_rank=lora_rank, lora_alpha=lora_alpha,
        lora_targets=lora_targets, base_precision=base_precision, optimizer=optimizer, offload=offload,
        kl_reference=kl_reference,
    )  # fmt: skip
    pl = plan or make_plan(
        m,
        tokens,
        seq_len,
        global_batch_tokens,
        precision,
        stack=stack,
        trainer=trainer,
        activation_offload=activation_offload,
        distill=distill_of(distill, distill_saving, finetune),
        **ft,
    )
    _check_plan(m, cl, pl)
    rerun = partial(estimate_plan, m, cl, layout=layout, how=how, accept=accept)  # pl → Estimate
    est = with_batch_notes(rerun(pl), global_batch_tokens, rerun)
    est = with_loss(est, law, unique_tokens)
    return with_owned(with_offer_notes(est), own)


def _model_and_cluster(
    model: str | ModelSpec,
    hardware: str | HardwareSpec | None,
    n_gpus: int | None,
    cluster: dict | None,
    plan: TrainingPlan | None,
    provider: str | None,
    market: str | None,
) -> tuple[ModelSpec, str, ClusterSpec]:
    """estimate's arguments checked: (the model, how it was resolved, the cluster of ``n_gpus``
    devices priced at the ``provider``/``market`` offer when given)."""
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, (int, np.integer)) or n_gpus <= 0:
        raise InputError("gpus", n_gpus, "a positive whole number of devices")
    m, how = resolve_model(model)
    if cluster is not None and not isinstance(cluster, dict):
        raise InputError("cluster", cluster, "a dict of cluster fields, e.g. {'pue': 1.2}")
    if plan is not None and not isinstance(plan, TrainingPlan):
        raise InputError("plan", plan, "a TrainingPlan (trilemma.api.make_plan builds one)")
    hardware, cluster = at_offer(hardware, cluster, provider, market)
    return m, how, make_cluster(hardware, int(n_gpus), **(cluster or {}))


def _check_plan(m: ModelSpec, cl: ClusterSpec, pl: TrainingPlan) -> None:
    """A clear error when a stage's sequence length (tokens) is past the model's positions or the
    chip lacks the plan's precision."""
    for stage in pl.stages:
        check_positions(m, stage.seq_len)
    cl.hardware.peak(pl.precision)  # clear error if the chip lacks this precision


def run_estimate(
    req: EstimateRequest, accept: Callable[[Estimate], bool] | None = None
) -> Estimate:
    """One request of `trilemma estimate` → its Estimate (with its loss and, given ``deploy``, the
    device it must run on). ``accept``: as estimate's."""
    if not isinstance(req, EstimateRequest):
        raise InputError("request", req, "an EstimateRequest (trilemma.request)")
    m, _ = resolve_model(req.model)
    ft = {k: getattr(req, k) for k in FINETUNE_FIELDS if getattr(req, k) is not None}
    plan = make_plan(
        m,
        req.tokens,
        req.seq,
        req.global_batch,
        req.precision,
        task=req.task,
        **req.plan_flags(),
        **({} if req.goodput is None else {"goodput": req.goodput}),
        distill=distill_of(req.distill, req.distill_saving, req.finetune),
        **finetune_fields(m, **ft),
    )
    est = estimate(
        req.model,
        req.gpu,
        req.gpus,
        layout=req.layout(),
        cluster=req.cluster_fields(),
        plan=plan,
        global_batch_tokens=req.global_batch,  # for its note: the plan holds it
        law=req.law,
        unique_tokens=req.unique_tokens,
        accept=accept,
        **req.pricing(),
    )
    if req.deploy is None:
        return est
    precision = req.deploy_precision
    return with_deploy(
        est, req.deploy, None if precision is None else precision.lower(), req.context, req.runtime
    )


def run_solve(
    req: SolveRequest, max_configurations: int | None = None, searches: Any = None
) -> Any:
    """One request of `trilemma solve` → its SolveResult (trilemma.solve.solve). ``max_configurations``:
    refuse a search over more (model size, GPU type, precision, GPU count) combinations; ``searches``:
    recent searches' tables to reuse (trilemma.solve.solve's ``searches``)."""
    from trilemma.request.parsers import prices
    from trilemma.solve import solve as search

    if not isinstance(req, SolveRequest):
        raise InputError("request", req, "a SolveRequest (trilemma.request)")
    return search(
        deadline=req.deadline,
        budget=req.budget,
        target_loss=req.target_loss,
        minimize=req.minimize,
        target_score=req.target_score,
        model=req.model,
        params=req.params,
        tokens=req.tokens,
        unique_tokens=req.unique_tokens,
        gpu=req.gpu,
        max_gpus=req.max_gpus,
        precision=req.precision,
        seq_len=req.seq,
        global_batch_tokens=req.global_batch,
        law=req.law,
        prices=prices(req.price, req.gpu),
        memory_headroom=req.memory_headroom,
        compile=req.compile,
        stack=req.stack,
        trainer=req.trainer,
        activation_offload=req.activation_offload,
        finetune={k: getattr(req, k) for k in FINETUNE_FIELDS if getattr(req, k) is not None},
        host_memory_bytes=req.host_memory,
        frontier_all=req.frontier_all,
        deploy=req.deploy,
        deploy_precision=None if req.deploy_precision is None else req.deploy_precision.lower(),
        runtime=req.runtime,
        context=req.context,
        min_tokens_per_s=req.min_tokens_per_s,
        inference_tokens=req.inference_tokens,
        device_usd_per_kwh=req.device_kwh,
        distill=req.distill,
        distill_saving=req.distill_saving,
        async_tp=req.async_tp,
        task=str(req.task),
        failures_per_gpu_hour=req.failure_rate,
        restart_s=req.restart,
        storage_write_bytes_per_s=req.storage_bw,
        max_power=req.max_power,
        pue=req.pue,
        region=req.region,
        host_power_w_per_node=req.host_power,
        max_configurations=max_configurations,
        searches=searches,
        **req.ranking(),
    )


def _request(cls: type[R], request: R | None, fields: dict[str, Any]) -> R:
    """``request``, or one built from ``fields`` (the verb's flags, by Python name)."""
    if request is None:
        return cls(**fields)
    if fields:
        raise InputError("fields", sorted(fields), f"a {cls.__name__} or its fields, not both")
    if not isinstance(request, cls):
        raise InputError("request", request, f"a {cls.__name__} (trilemma.request)")
    return request


def solve(request: SolveRequest | None = None, **fields: Any) -> Any:
    """``solve(SolveRequest(...))`` → the SolveResult; ``solve(deadline="30d", budget="$2M")``
    builds the request from the fields (the flags of `trilemma solve`, by Python name)."""
    return run_solve(_request(SolveRequest, request, fields))


def optimal(request: OptimalRequest | None = None, **fields: Any) -> Any:
    """The compute-optimal N, D and loss of a FLOP budget (or of a target loss) under each law asked
    for, and the inference-aware model (trilemma.quality.optimal.OptimalReport): ``optimal(flops=
    1e23)`` or ``optimal(OptimalRequest(...))``. ``law``: a name, a law file, a comma-separated
    list or ``all``."""
    from trilemma.quality.optimal import optimal_report

    req = _request(OptimalRequest, request, fields)
    return optimal_report(
        req.laws(),
        req.flops,
        target_loss=req.target_loss,
        inference_tokens=req.inference_tokens,
        unique_tokens=req.unique_tokens,
        precision=req.precision,
    )


def validate(request: ValidateRequest | None = None, **fields: Any) -> dict[str, Any]:
    """The backtest document `trilemma validate --json` prints: every shipped row (or ``data``, a
    CSV of one's own measurements) predicted beside what was reported, and the summary."""
    from trilemma.validate.run import run_validate

    req = _request(ValidateRequest, request, fields)
    return run_validate(req.kind, live_loso=req.loso, data=req.data)


def presets(request: PresetsRequest | None = None, **fields: Any) -> dict[str, Any]:
    """The document `trilemma presets --json` prints: the model, hardware and deployment-device
    presets (``kind``: models, hardware, devices, stacks, prices or all), each with its source."""
    from trilemma.report.table import presets_document

    return presets_document(_request(PresetsRequest, request, fields).kind)


def export(plan: Any, engine: str, *, point: int | None = None, finetune: Any = None) -> Any:
    """An Estimate, or a solve result (its optimum, or frontier ``point``), as ``engine``'s config:
    torchtitan, megatron, deepspeed or hf (trilemma.export). ``.to_dict()`` is the document
    ``--export ENGINE --json`` prints; ``.files`` the files ``trilemma export --out`` writes."""
    from trilemma.export import FineTune, export_solve
    from trilemma.export import export as export_estimate

    if not isinstance(plan, Estimate) and not hasattr(plan, "optimum"):
        raise InputError(
            "plan",
            plan,
            "an Estimate (trilemma.api.estimate) or a solve result (trilemma.solve.solve)",
        )
    if finetune is not None and not isinstance(finetune, FineTune):
        raise InputError(
            "finetune", finetune, "a trilemma.export.FineTune, or None for the plan's own"
        )
    if hasattr(plan, "optimum"):
        return export_solve(plan, engine, point, finetune=finetune)
    if point is not None:
        raise InputError("point", point, "a frontier index, with a solve result")
    return export_estimate(plan, engine, finetune=finetune)


def run_export(req: ExportRequest) -> Any:
    """One request of `trilemma export` → the exported document, its files written into ``req.out``
    when given. The plan is ``req.plan``'s: an estimate (the default one when None: the fastest
    layout the engine can write) or a solve (its optimum, or frontier ``req.point``)."""
    from trilemma.export import expressible
    from trilemma.request.export import refuse_point

    if isinstance(req.plan, SolveRequest):
        doc = export(run_solve(req.plan), req.to, point=req.point)
    else:
        if req.point is not None:
            refuse_point(req.point)
        doc = export(run_estimate(req.plan or EstimateRequest(), expressible(req.to)), req.to)
    if req.out:
        from trilemma.report.export import write_export

        write_export(doc, req.out)
    return doc


__all__ = [
    "SCHEMA",
    "CostBreakdown",
    "Estimate",
    "MemoryBreakdown",
    "StageResult",
    "TimeBreakdown",
    "estimate",
    "estimate_plan",
    "evaluate_layout",
    "EstimateRequest",
    "SolveRequest",
    "OptimalRequest",
    "PresetsRequest",
    "ValidateRequest",
    "export",
    "grid_intensity",
    "make_cluster",
    "make_plan",
    "optimal",
    "presets",
    "resolve_hardware",
    "resolve_model",
    "run_estimate",
    "run_export",
    "run_solve",
    "solve",
    "validate",
    "with_loss",
]
