"""``POST /api/scenario``: a scenario file's text (the TOML `trilemma solve FILE` reads) as the
solve request's JSON keys, so the page loads the same files as the command line with the same
checks (trilemma.request.scenario). Only the text is read: the server opens no file. What the page
saves is the reverse, written in the browser (static/scenario.js)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from trilemma.errors import InputError
from trilemma.fileio import parse_toml
from trilemma.request.scenario import scenario_values
from trilemma.request.solve import SolveRequest
from trilemma.web.errors import ERRORS, error

#: keys of a scenario that frame the command line's plot: no field of the request
PLOT_ONLY = ("plot_range",)


class ScenarioBody(BaseModel):
    """A scenario file's text."""

    model_config = ConfigDict(extra="forbid")
    toml: str = Field(description="the scenario file's TOML text (keys: solve's flags)")


class ScenarioDoc(BaseModel):
    """The scenario as the solve request's JSON keys (the body of ``POST /api/solve``)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field("trilemma.scenario/1", alias="schema")
    request: dict[str, Any] = Field(description="solve's JSON keys and the file's values")


def scenario_request(text: str) -> dict[str, Any]:
    """The TOML text as solve's JSON keys (``max-gpus``), each value as the file has it; an
    InputError names the key or the text."""
    values = scenario_values(parse_toml(text, "scenario", "the scenario", "TOML file"))
    keys = {n: o.key for n, o in SolveRequest.options().items()}
    return {keys[k]: v for k, v in values.items() if k not in PLOT_ONLY}


def add_scenario_route(app: FastAPI) -> None:
    """``POST /api/scenario`` on ``app``."""

    @app.post(
        "/api/scenario",
        summary="a scenario file's text as the body of /api/solve (the page's Load)",
        responses=ERRORS,
        response_model=ScenarioDoc,
    )
    def scenario(req: ScenarioBody) -> Any:
        try:
            return ScenarioDoc(request=scenario_request(req.toml)).model_dump(by_alias=True)
        except InputError as exc:
            return error(422, "scenario", str(exc))
