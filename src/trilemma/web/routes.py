"""The API's routes: each verb's typed request (trilemma.request, with the server's limits:
trilemma.web.bodies) as the body, the library behind it (trilemma.api), and the document it answers
declared as its ``response_model``. Every computation runs on the one worker (trilemma.web.runner).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model

from trilemma import api
from trilemma.errors import InputError
from trilemma.request import (
    EstimateRequest,
    OptimalRequest,
    PresetsRequest,
    SolveRequest,
    ValidateRequest,
)
from trilemma.web.bodies import (
    EstimateDoc,
    OptimalDoc,
    PlanDoc,
    PresetsDoc,
    Routed,
    SolveDoc,
    ValidateDoc,
    body,
    routed,
)
from trilemma.web.errors import ERRORS, InfeasibleDoc, given, json_answer, respond
from trilemma.web.exporting import add_export_route
from trilemma.web.runner import MAX_CONFIGURATIONS, Runner

CACHED_SOLVES = 8  # recent solves kept so a frontier point's plan comes without searching again
CACHED_DOCS = 4  # recent answers of the verbs that read every shipped table (validate, presets)
#: recent searches' tables (trilemma.solve.search.search_kept), so that moving a pin ranks the same table
#: again; the default search's is about 0.6 MB
CACHED_SEARCHES = 4


class Cache:
    """The last few answers by their request (solves, so a frontier point's plan needs no second
    search; the validate summary, which reads every shipped table)."""

    def __init__(self, size: int) -> None:
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    @staticmethod
    def key(req: BaseModel) -> str:
        return json.dumps(req.model_dump(mode="json"), sort_keys=True)

    def get(self, key: str) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def clear(self) -> None:
        with self.lock:
            self.items.clear()

    def put(self, key: str, value: Any) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)

    def through(self, compute: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``compute(req)``, answered from the cache when the same request came recently."""

        def cached(req: BaseModel) -> Any:
            key = Cache.key(req)
            value = self.get(key)
            if value is None:
                value = compute(req)
                self.put(key, value)
            return value

        cached.kept = lambda req: self.get(Cache.key(req))  # type: ignore[attr-defined]
        return cached


def frontier_points(r: Any) -> dict[str, Any]:
    """The Pareto frontier's points as columns (what ``--frontier out.csv`` writes, by column), plus
    the configuration of each (model, GPU type and count, precision, layout) for the page's hover
    and click."""
    f, tab = r.frontier, r.table
    columns = ("time_s", "usd", "loss", "tokens", "feasible", "config", "configs")
    if f is None:
        return {c: [] for c in columns}
    rows = sorted({int(i) for i in f.config})
    index = {row: k for k, row in enumerate(rows)}
    configs = [
        {
            "model": tab.models[tab.model_idx[i]].name,
            "gpu": tab.gpus[tab.gpu_idx[i]].name,
            "n_gpus": int(tab.n_gpus[i]),
            "precision": str(tab.precisions[tab.prec_idx[i]]),
            "layout": tab.layout(i).label(compact=True),
        }
        for i in rows
    ]
    return {
        "time_s": [float(x) for x in f.time_s],
        "usd": [float(x) for x in f.usd],
        "loss": [float(x) for x in f.loss],
        "tokens": [float(x) for x in f.tokens],
        "feasible": [bool(x) for x in f.feasible],
        "config": [index[int(i)] for i in f.config],
        "configs": configs,
    }


def solve_doc(r: Any) -> dict[str, Any]:
    """`trilemma solve --json`'s document of a SolveResult, with the frontier's points for the page."""
    doc = r.to_dict()
    doc["frontier_points"] = frontier_points(r)
    return doc


def _point(solved: Callable[[Any], Any], req: Any) -> dict[str, Any]:
    """The plan of frontier point ``req.point`` of the solve ``req.solve``."""
    from trilemma.solve import plan_document

    r = solved(req.solve)
    n = 0 if r.frontier is None else int(r.frontier.time_s.size)
    if req.point >= n:
        raise InputError(
            "point", req.point, f"an index of the frontier's {n} points (0 to {max(n - 1, 0)})"
        )
    e, loss = r.plan_at(int(r.frontier.config[req.point]), float(r.frontier.tokens[req.point]))
    return plan_document(e, loss)


def _post(
    app: FastAPI,
    path: str,
    model: type[BaseModel],
    summary: str,
    doc: Any,
    answer: Callable[[Any], Response],
) -> None:
    """``POST path``: the body ``model``, the answer ``doc`` (in /openapi.json), the refusals."""

    def handler(req: Any) -> Response:
        return answer(req)

    handler.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("req", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model)]
    )
    handler.__name__ = path.strip("/").replace("/", "_")
    app.post(
        path,
        summary=summary,
        responses=ERRORS,
        response_model=doc,
        response_description="the command's --json document"
        + (", or an infeasible answer" if InfeasibleDoc in getattr(doc, "__args__", ()) else ""),
    )(handler)


def add_routes(app: FastAPI, runner: Runner) -> dict[str, Routed]:
    """The API's routes on ``app``, each computation run by ``runner``; the verbs by the last part
    of their path (their names and JSON keys, for the refusals' wording)."""
    solve_body = body(SolveRequest)
    searches = app.state.searches = Cache(CACHED_SEARCHES)  # the benchmark clears it
    solved = Cache(CACHED_SOLVES).through(
        lambda req: api.run_solve(req, max_configurations=MAX_CONFIGURATIONS, searches=searches)
    )
    point_model = create_model(
        "SolvePointRequest",
        __config__=ConfigDict(extra="forbid"),
        solve=(solve_body, Field(description="the solve request whose frontier it is")),
        point=(StrictInt, Field(ge=0, description="an index into its frontier_points")),
    )
    table: list[tuple[str, type[BaseModel], str, Any, Callable[[Any], Any]]] = [
        (
            "estimate",
            body(EstimateRequest),
            "one plan: time, GPU-hours, $, energy, memory, loss (estimate)",
            EstimateDoc | InfeasibleDoc,
            lambda req: api.run_estimate(req).to_dict(),
        ),
        (
            "solve",
            solve_body,
            "pin two corners: the optimum, runners-up and the frontier (solve)",
            SolveDoc | InfeasibleDoc,
            lambda req: solve_doc(solved(req)),
        ),
        (
            "optimal",
            body(OptimalRequest),
            "compute-optimal N, D and loss for a FLOP budget (optimal)",
            OptimalDoc | InfeasibleDoc,
            lambda req: api.optimal(req).to_dict(),
        ),
        (
            "presets",
            body(PresetsRequest),
            "the model and hardware presets (presets)",
            PresetsDoc,
            Cache(CACHED_DOCS).through(api.presets),
        ),
        (
            "validate",
            body(ValidateRequest, without=("loso", "data")),
            "the backtest summary against published figures (validate)",
            ValidateDoc,
            Cache(CACHED_DOCS).through(api.validate),
        ),
    ]
    verbs = {name: routed(model) for name, model, *_ in table}
    add_export_route(app, runner, solve_body, solved, verbs["solve"])
    for name, model, summary, doc, compute in table:
        _post(app, f"/api/{name}", model, summary, doc, _answer(runner, verbs[name], compute))
        if name == "solve":  # listed beside /api/solve
            _post(
                app,
                "/api/solve/point",
                point_model,
                "the plan of one point of a solve's frontier",
                PlanDoc | InfeasibleDoc,
                lambda req: respond(
                    runner, lambda: _point(solved, req), given(verbs["solve"], req.solve)
                ),
            )
    return verbs


def _answer(runner: Runner, verb: Routed, compute: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The route's answer: ``compute(req)`` on the worker, or, when ``compute`` is a Cache's and holds
    the answer (the presets, the validate summary), that answer at once, not behind a search."""
    kept = getattr(compute, "kept", None)

    def answer(req: BaseModel) -> Response:
        if kept is not None and (doc := kept(req)) is not None:
            return json_answer(doc)
        return respond(runner, lambda: compute(req), given(verb, req))

    return answer
