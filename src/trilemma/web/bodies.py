"""The web API's side of the typed requests (trilemma.request): each verb's request with the server's
limits as the body of its route, and the documents its routes answer, for ``/openapi.json``.

A body is the request itself, so its JSON keys are the flags (``global-batch``; the Python names are
accepted too) and its values are parsed and refused by the request's own fields; the server only
adds its limits (text of MAX_TEXT_CHARS, lists of MAX_LIST_ITEMS) and reads no file a body names.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, NamedTuple

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


def body(request: type[Request]) -> type[Request]:
    """``request`` as a route's body: the same fields, defaults and parsing, with the server's limits
    checked first."""

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
    }
    model = types.new_class(request.__name__, (request,), {}, lambda ns: ns.update(namespace))
    return model


def keys(request: type[Request]) -> dict[str, str]:
    """Python name → JSON key of each field."""
    return {n: o.key for n, o in request.options().items()}


class EstimateDoc(BaseModel):
    """The document `trilemma estimate --json` prints: one plan's time, cost, memory and loss (SI
    units, fractions 0-1)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(alias="schema", description="the document's version: trilemma.estimate/1")
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
    warnings: list[str] = Field(description="what the figures assume or extrapolate, in words")


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
        "what is minimised"
    )
    frontier: dict[str, Any] | None = Field(
        None, description="the Pareto frontier's size and ranges (time_s, usd, loss), its filters"
    )
    lifetime: dict[str, Any] | None = Field(
        None, description="with --inference-tokens: training plus serving cost"
    )
    search: dict[str, Any] = Field(
        description="candidates and configurations searched, and the seconds it took"
    )
    warnings: list[str] = Field(description="what the figures assume or extrapolate, in words")
    frontier_points: dict[str, Any] = Field(
        description="the frontier's points as columns (time_s, usd, loss, tokens, feasible, "
        "config) and each point's configuration, for the page"
    )
