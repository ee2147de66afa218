"""``POST /api/export``: the plan the page shows (a solve's optimum, or one point of its frontier) as
the files of the engine that runs it (trilemma.export: torchtitan, megatron, deepspeed or hf), the
document `trilemma export --to ENGINE solve ... --json` prints. The files come back as text in the
answer (``files``: name → content) for the page to download; the server writes nothing."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, create_model

from trilemma import api
from trilemma.export import check_engine
from trilemma.web.bodies import Routed
from trilemma.web.errors import ERRORS, given, respond
from trilemma.web.runner import Runner


class ExportDoc(BaseModel):
    """`trilemma export --json`'s document: the plan, the engine's numbers and config, its files."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    schema_: str = Field(alias="schema", description="the document's version: trilemma.export/1")
    engine: str = Field(description="torchtitan, megatron, deepspeed or hf")
    files: dict[str, str] = Field(description="each file's name and its text")


def add_export_route(
    app: FastAPI,
    runner: Runner,
    solve_body: type[BaseModel],
    solved: Callable[[Any], Any],
    verb: Routed,
) -> None:
    """``POST /api/export`` on ``app``: ``solve_body`` the solve route's body, ``solved`` its cached
    search, ``verb`` its JSON keys (for the refusals' field)."""
    model = create_model(
        "ExportBody",
        __config__=ConfigDict(extra="forbid"),
        to=(StrictStr, Field(description="torchtitan, megatron, deepspeed or hf")),
        solve=(solve_body, Field(description="the solve request whose plan it is")),
        point=(
            StrictInt | None,
            Field(None, ge=0, description="a frontier point; none: the optimum"),
        ),
    )

    def exported(req: Any) -> dict[str, Any]:
        engine = check_engine(req.to)
        return api.export(solved(req.solve), engine, point=req.point).to_dict()

    def handler(req: Any) -> Response:
        return respond(runner, lambda: exported(req), given(verb, req.solve))

    handler.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("req", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model)]
    )

    app.post(
        "/api/export",
        summary="the plan shown (a solve's optimum or frontier point) as an engine's files (export)",
        responses=ERRORS,
        response_model=ExportDoc,
    )(handler)
