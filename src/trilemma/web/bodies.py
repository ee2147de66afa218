"""The web API's side of the typed requests (trilemma.request): each verb's request with the server's
limits as the body of its route, and the documents its routes answer, for ``/openapi.json``.

A body is the request itself, so its JSON keys are the flags (``global-batch``; the Python names are
accepted too) and its values are parsed and refused by the request's own fields; the server only
adds its limits (text of MAX_TEXT_CHARS, lists of MAX_LIST_ITEMS) and reads no file a body names.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trilemma.errors import InputError
from trilemma.request.field import Request
from trilemma.solve import MAX_LIST_NAMES

MAX_TEXT_CHARS = 200  # one text value (a preset name, a size, a duration)
MAX_LIST_ITEMS = MAX_LIST_NAMES  # names in one list (GPU types, precisions, prices): solve's cap
#: fields naming something that could be a file on the server: only names and sizes are taken
NO_FILES = {"model", "law"}


def refuse_files(field: str, value: str) -> None:
    """A preset name, a law name or a size; never a path (nothing the request names is read)."""
    text = value.strip()
    path_like = (
        any(c in text for c in "/\\")
        or text.lower().endswith((".json", ".toml"))
        or text.startswith(("~", "."))
    )
    try:
        exists = Path(text).exists() if text else False
    except (OSError, ValueError):
        exists = False
    if path_like or exists:
        raise InputError(
            field,
            value,
            "a preset name or a size such as 7B (files are not read over HTTP; use the "
            "command line for a config.json or a law file)",
        )


def _limit(key: str, v: Any) -> None:
    """The server's limits on one value of a body: InputError naming the key."""
    if isinstance(v, str) and len(v) > MAX_TEXT_CHARS:
        raise InputError(key, v, f"at most {MAX_TEXT_CHARS} characters")
    if isinstance(v, list):
        if len(v) > MAX_LIST_ITEMS:
            raise InputError(key, v, f"at most {MAX_LIST_ITEMS} names")
        for x in v:
            _limit(key, x)
    if key in NO_FILES and isinstance(v, str):
        refuse_files(key, v)


def body(request: type[Request], without: tuple[str, ...] = ()) -> type[Request]:
    """``request`` as a route's body: the same fields, defaults and parsing, with the server's limits
    checked first. ``without``: fields HTTP does not offer (a file to read, a slow mode): absent
    from the body, they keep their defaults."""

    def limits(cls: type[Request], data: Any) -> Any:
        if isinstance(data, dict):
            keys = {o.key: n for n, o in request.options().items()}
            for k, v in data.items():
                if k in keys or k in request.model_fields:
                    _limit(request.options()[keys.get(k, k)].key, v)
        return data

    namespace = {
        "__init__": BaseModel.__init__,  # pydantic's errors, which the app words as the CLI does
        "__module__": __name__,
        "__doc__": f"The flags of `trilemma {request.VERB}` (see `trilemma {request.VERB} --help`), "
        "as JSON keys (the Python names are accepted too).",
        "limits": model_validator(mode="before")(classmethod(limits)),
        # a field redeclared as a class variable is no field of the body (an unknown key is refused)
        "__annotations__": {n: ClassVar[Any] for n in without},
        **{n: request.model_fields[n].default for n in without},
    }
    model = types.new_class(request.__name__, (request,), {}, lambda ns: ns.update(namespace))
    return model


def keys(request: type[Request]) -> dict[str, str]:
    """Python name → JSON key of each field."""
    return {n: o.key for n, o in request.options().items()}


class _Plan(BaseModel):
    """The fields of one plan's document (SI units, fractions 0-1)."""

    model_config = ConfigDict(populate_by_name=True)
    model: dict[str, Any] = Field(
        description="the model: name, where it was resolved from, source, parameter counts, shape"
    )
    hardware: dict[str, Any] = Field(
        description="the device and cluster: name, family, GPU count, peak FLOP/s, link bytes/s"
    )
    flops: dict[str, Any] = Field(description="FLOPs per token and in total, and the convention")
    layout: dict[str, Any] = Field(
        description="the parallel layout (tp, pp, dp, cp, ep, vp, sp, zero, recompute, "
        "micro_batch), whether it was chosen, how many candidates were evaluated"
    )
    plan: dict[str, Any] = Field(
        description="the software stack (name, whether given, features, source, the fields flags "
        "overrode) and the plan fields it decides: flash_attention, softmax_passes, fused_loss, "
        "compile, async_tp"
    )
    task: str = Field(description="what the head predicts: causal-lm or classification")
    batch: dict[str, Any] = Field(description="training tokens and each stage's batch")
    memory: dict[str, Any] = Field(
        description="bytes per GPU with a band, capacity, whether it fits, the breakdown"
    )
    time: dict[str, Any] = Field(
        description="step seconds, tokens/s, MFU, total seconds with a band, goodput, GPU-hours"
    )
    cost: dict[str, Any] = Field(
        description="USD with a band, the price used, energy kWh, CO2 kg, PUE, power W"
    )
    loss: dict[str, Any] | None = Field(
        None, description="the predicted loss with its band and law (none for a fine-tune)"
    )
    finetune: dict[str, Any] | None = Field(
        None, description="with --finetune: the method, trainable parameters, optimizer, offload"
    )
    deploy: dict[str, Any] | None = Field(
        None, description="with --deploy: memory and speed on the device the model must run on"
    )
    owned: dict[str, Any] | None = Field(
        None,
        description="with --own: the run on owned hardware (capital and energy dollars, band) "
        "beside the rented price",
    )


class EstimateDoc(_Plan):
    """The document `trilemma estimate --json` prints: one plan's time, cost, memory and loss (SI
    units, fractions 0-1)."""

    schema_: str = Field(alias="schema", description="the document's version: trilemma.estimate/1")
    warnings: list[str] = Field(description="what the figures assume or extrapolate, in words")


class PlanDoc(_Plan):
    """One point of a solve's frontier as its plan: the estimate document of that configuration
    and token count (as the optimum of `trilemma solve --json` is written)."""

    stability: dict[str, Any] | None = Field(
        None, description="a documented training-stability risk of its precision at its size"
    )


class Routed(NamedTuple):
    """A verb served from its request: its name and its fields' JSON keys (by Python name)."""

    name: str
    keys: dict[str, str]


def routed(request: type[Request]) -> Routed:
    return Routed(request.VERB, keys(request))


class SolveDoc(BaseModel):
    """The document `trilemma solve --json` prints, plus the frontier's points for the page (SI
    units, fractions 0-1)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(alias="schema", description="the document's version: trilemma.solve/1")
    optimum: dict[str, Any] = Field(
        description="the best plan on the free corner: an estimate document (model, hardware, "
        "layout, memory, time, cost, loss) with its stability"
    )
    runners_up: list[dict[str, Any]] = Field(
        description="the next best plans, each with what it differs in and by how much"
    )
    pins: dict[str, Any] = Field(
        description="the pinned corners: deadline_s, budget (USD, GPU-hours or kWh), target_loss, "
        "target_score (benchmark and the score its 80% band's lower end reaches), what is minimised"
    )
    frontier: dict[str, Any] | None = Field(
        None, description="the Pareto frontier's size and ranges (time_s, usd, loss), its filters"
    )
    lifetime: dict[str, Any] | None = Field(
        None, description="with --inference-tokens: training plus serving cost"
    )
    rank: str = Field(
        "pessimistic",
        description="how plans were ranked: pessimistic (the high end of each plan's band) or point",
    )
    calibrated_alternative: dict[str, Any] | None = Field(
        None,
        description="beside an optimum on a chip family the calibration never measured: the best "
        "plan on a calibrated family (an estimate document), or null",
    )
    price: dict[str, Any] | None = Field(
        None,
        description="the optimum's price per GPU-hour: its provider and market (--provider, "
        "--market; null: the preset's reference), the date read and the source",
    )
    search: dict[str, Any] = Field(
        description="candidates and configurations searched, and the seconds it took"
    )
    warnings: list[str] = Field(description="what the figures assume or extrapolate, in words")
    frontier_points: dict[str, Any] = Field(
        description="the frontier's points as columns (time_s, usd, loss, tokens, feasible, "
        "config) and each point's configuration, for the page"
    )


class OptimalDoc(BaseModel):
    """The document `trilemma optimal --json` prints: the compute-optimal N, D and loss under each
    law asked for (parameters, tokens, FLOP; the loss in the law's unit)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(alias="schema", description="the document's version: trilemma.optimal/1")
    flops: float | None = Field(description="the training FLOP budget asked for")
    flop_convention: str = Field(description="how FLOPs are counted (C = 6·N·D)")
    target_loss: float | None = Field(description="the target loss asked for, if any")
    inference_tokens: float | None = Field(description="lifetime inference tokens, if given")
    unique_tokens: float | None = Field(description="unique tokens available, if given")
    precision: str = Field(description="the training precision the loss is priced at")
    default_law: str = Field(description="the law used when none is named")
    default_law_reason: str = Field(description="why that law is the default, with its source")
    results: list[dict[str, Any]] = Field(
        description="per law: the compute-optimal N*, D* and loss with bands, the "
        "inference-aware model, or the error that law met"
    )
    warnings: list[str] = Field(description="what the figures assume or extrapolate, in words")


class ValidateDoc(BaseModel):
    """The document `trilemma validate --json` prints: every shipped row predicted beside what
    was reported, and the summary per kind (fractions 0-1)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(alias="schema", description="the document's version: trilemma.validate/1")
    data: str | None = Field(description="the rows file backtested (none over HTTP)")
    summary: dict[str, Any] = Field(
        description="per kind: in-sample and leave-one-source-out error (median, worst, share "
        "within 10% and 25%), band coverage"
    )
    rows: list[dict[str, Any]] = Field(
        description="one per published row: its source, predicted, reported, their ratio"
    )
    ondevice: dict[str, Any] | None = Field(
        description="the on-device decode speed check (all kinds only)"
    )
    finetune_memory: dict[str, Any] | None = Field(
        description="the published fine-tuning memory figures, held out (kind finetune or all)"
    )
    fitted_at_bounds: list[dict[str, Any]] = Field(
        description="fitted constants on a bound of their fit, each with the term it stands for"
    )
    skipped: list[dict[str, Any]] = Field(description="rows not evaluated, each with why")
    calibration: dict[str, Any] = Field(
        description="the calibration the constants come from: its date and command"
    )
    warnings: list[str] = Field(description="what the figures assume or extrapolate, in words")


class PresetsDoc(BaseModel):
    """The document `trilemma presets --json` prints: the presets of the kind asked for, each with
    its source (SI units)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(alias="schema", description="the document's version: trilemma.presets/1")
    models: list[dict[str, Any]] | None = Field(
        None, description="model presets: the ModelSpec fields, parameter counts, source"
    )
    hardware: list[dict[str, Any]] | None = Field(
        None, description="hardware presets: peak FLOP/s per precision, memory, links, price"
    )
    devices: list[dict[str, Any]] | None = Field(
        None, description="deployment devices: memory and bandwidth the model must run within"
    )
    runtimes: list[dict[str, Any]] | None = Field(
        None,
        description="runtimes on a device: compute units, fitted bandwidth share, fixed cost per "
        "token, prefill share, weight formats, sources",
    )
    weight_formats: list[dict[str, Any]] | None = Field(
        None, description="weight formats on a device: bits per weight with scales, sources"
    )
    stacks: list[dict[str, Any]] | None = Field(
        None,
        description="software stacks: each one's features (attention kernel, fusions, "
        "overlaps, host) with the sources they are cited from",
    )
    prices: list[dict[str, Any]] | None = Field(
        None,
        description="prices per GPU-hour by chip, provider and market, each with its date, age "
        "in days and source (presets/prices.toml)",
    )
    warnings: list[str] = Field(description="what the figures assume, in words")
