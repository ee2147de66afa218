"""The FastAPI application of `trilemma serve`: the verbs as JSON over HTTP, and the explorer page.

``/api/estimate`` and ``/api/solve`` take the verb's typed request (trilemma.request, with the
server's limits: trilemma.web.bodies) as the body and run the library (trilemma.api); the other
endpoints run the CLI command's own function (trilemma.cli) inside ``results_only()``
(trilemma.report.emit). Either way there is no second schema:

- the request model is built from the command's signature: the JSON keys are the flag names
  (``target-loss``, ``global-batch``; the Python names ``target_loss`` are accepted too), the
  defaults are the CLI's, the help texts are the OpenAPI descriptions at ``/docs``;
- the values are parsed and checked by the same code as the command line's, and a bad one is
  refused with the CLI's own line: HTTP 422, ``{"field": "tokens", "error": "tokens: '-1' is not
  allowed; expected ..."}``; a body that is not a JSON object is 400 (``field``: ``body``);
- the answer is the document ``--json`` prints (solve adds its frontier's points for the page);
- a request that is valid but that no plan meets (the CLI's exit status 1) is answered 200 with
  ``{"schema": "trilemma.infeasible/1", "infeasible": true, "message": "..."}``: the message says
  what must give, and by how much.

Safe by default: the server binds to localhost; a body over MAX_BODY_BYTES, text over MAX_TEXT_CHARS
and file names are refused (no endpoint reads a file the request names, none writes one); a solve over
more than MAX_CONFIGURATIONS (model size, GPU type, precision, GPU count) combinations is refused before
it runs; computations run one at a time (trilemma.web.runner) with separate limits on the wait for
the worker (QUEUE_LIMIT_S, then 503 with Retry-After; MAX_WAITING queued, then 429) and on the run
(TIME_LIMIT_S, then 422); only the files of ``static/`` and plotly.js are served; a server on the
loopback answers only local Host names and the address it was started on. The connection limits
(time to send headers and body, how many are open) are the server's: trilemma.web.guard.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import threading
import time
import types
import typing
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    create_model,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from trilemma.errors import InfeasibleError, InputError, TrilemmaError
from trilemma.request import EstimateRequest, SolveRequest
from trilemma.units import IEC, KILO
from trilemma.web.bodies import (
    MAX_LIST_ITEMS,
    MAX_TEXT_CHARS,
    NO_FILES,
    EstimateDoc,
    Routed,
    SolveDoc,
    body,
    routed,
)
from trilemma.web.bodies import refuse_files as _refuse_files
from trilemma.web.runner import (
    MAX_CONFIGURATIONS,
    MAX_WAITING,
    QUEUE_LIMIT_S,
    TIME_LIMIT_S,
    Busy,  # noqa: F401  (web.Busy, web.Queued: the refusals, where the app is imported)
    Queued,  # noqa: F401
    RetryLater,
    Runner,
    TooSlow,
)

#: the Host headers a server bound to the loopback answers (trilemma.web.serve)
LOCAL_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]

STATIC = Path(__file__).parent / "static"
INFEASIBLE_SCHEMA = "trilemma.infeasible/1"
MAX_BODY_BYTES = int(
    64 * IEC["Ki"]
)  # a request body; the largest sensible one (a ModelSpec) is ~1 KiB
CACHED_SOLVES = 8  # recent solves kept so a frontier point's plan comes without searching again

#: what each endpoint runs: the verb and the command parameters HTTP does not offer (files, slow modes, output)
HIDDEN = {
    "optimal": {"as_json"},
    "validate": {"as_json", "csv_path", "data", "live_loso"},
    "presets": {"as_json"},
}
#: fields that take a comma-separated list on the command line and may be a JSON list here
LISTS = {"gpu", "precision"}


def _commands() -> dict[str, Callable[..., Any]]:
    from trilemma import cli
    from trilemma.cli_quality import optimal

    return {
        "optimal": optimal,
        "validate": cli.validate,
        "presets": cli.presets,
    }


# ------------------------------------------------------------------ request models from the CLI's signatures

Text = Annotated[StrictStr, Field(max_length=MAX_TEXT_CHARS)]
TextOrNumber = Text | StrictInt | StrictFloat


def _key(name: str, info: Any) -> str:
    """The JSON key of a command parameter: its long flag without dashes (``--target-loss`` → ``target-loss``)."""
    for decl in getattr(info, "param_decls", None) or ():
        if decl.startswith("--"):
            return decl.split("/")[0].removeprefix("--")
    return name


def _json_type(key: str, hint: Any) -> Any:
    """The JSON type a parameter takes: text fields also take numbers (sent to the CLI's parser as text),
    numbers stay numbers, booleans stay booleans; nothing is coerced silently."""
    base, optional = _unwrap_optional(hint)
    if base is bool:
        t: Any = StrictBool
    elif base is float:
        t = StrictFloat | StrictInt
    elif base is int:
        t = StrictInt
    elif typing.get_origin(base) is list:
        t = Annotated[list[Text], Field(max_length=MAX_LIST_ITEMS)] | Text
    else:
        t = TextOrNumber
        if key in LISTS:
            t = Annotated[list[Text], Field(max_length=MAX_LIST_ITEMS)] | TextOrNumber
        if key == "model":
            t = (
                TextOrNumber | dict[str, Any]
            )  # a ModelSpec as a JSON object (trilemma.specs.ModelSpec)
    return t | None if optional else t


class Verb:
    """One endpoint: the command, its request model and how a request becomes the command's arguments."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name, self.fn = name, fn
        hints = typing.get_type_hints(fn)
        self.fixed: dict[
            str, Any
        ] = {}  # hidden parameters: their CLI defaults (no file, no JSON printing)
        self.keys: dict[str, str] = {}  # Python name -> JSON key
        self.text: set[str] = (
            set()
        )  # parameters the CLI takes as text (a number sent for one is written out)
        fields: dict[str, Any] = {}
        for p in inspect.signature(fn).parameters.values():
            info = p.default
            default = getattr(info, "default", info)
            if p.name in HIDDEN[name]:
                self.fixed[p.name] = False if p.name in ("as_json", "live_loso") else None
                continue
            key = _key(p.name, info)
            self.keys[p.name] = key
            if _is_text(hints[p.name]):
                self.text.add(p.name)
            fields[p.name] = (
                _json_type(key, hints[p.name]),
                Field(
                    default=None if default is ... else default,
                    alias=key,
                    description=getattr(info, "help", None),
                ),
            )
        self.model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{name.title()}Request",
            __config__=ConfigDict(extra="forbid", populate_by_name=True),
            **fields,
        )
        self.model.__doc__ = (
            f"The flags of `trilemma {name}` (see `trilemma {name} --help`), as JSON keys."
        )

    def arguments(self, req: BaseModel) -> dict[str, Any]:
        """The command's keyword arguments: text as the command line would give it, files refused."""
        out = dict(self.fixed)
        for name, key in self.keys.items():
            v = getattr(req, name)
            if isinstance(v, list) and key in LISTS:
                v = ",".join(v)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and name in self.text:
                v = repr(v) if isinstance(v, float) else str(v)
            if key in NO_FILES and isinstance(v, str):
                _refuse_files(key, v)
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > sys.float_info.max:
                raise InputError(key, v, "a finite number")  # past a float: no parser reads it
            if key == "model" and isinstance(v, dict):
                v = _model_spec(v)
            out[name] = v
        return out


def _model_spec(fields: dict[str, Any]) -> Any:
    """A ModelSpec from a JSON object; InputError naming ``model.<key>`` for a bad one (its keys are
    never keyword arguments, so ``prefix`` or ``cls`` is an unknown field, not a clash)."""
    from pydantic import ValidationError

    from trilemma.specs import ModelSpec
    from trilemma.specs.base import validation_to_input_error

    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise validation_to_input_error(exc, "model") from None


# ------------------------------------------------------------------ answers


class ErrorDoc(BaseModel):
    """A refused request: the field the CLI's line names, and the line (without ``trilemma: error:``)."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field("trilemma.error/1", alias="schema")
    field: str | None = Field(
        None, description="the flag, field or limit refused (e.g. tokens, body, search)"
    )
    error: str = Field(description="one line: the field, the value and what is allowed")


class InfeasibleDoc(BaseModel):
    """A valid request that no plan meets (the CLI's exit status 1): what must give, and by how much."""

    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(INFEASIBLE_SCHEMA, alias="schema")
    infeasible: bool = True
    message: str
    warnings: list[str] = []


ERRORS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the command's --json document, or (solve, estimate) an infeasible answer",
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [{"type": "object"}, {"$ref": "#/components/schemas/InfeasibleDoc"}]
                }
            }
        },
    },
    400: {"model": ErrorDoc, "description": "the body is not a JSON object"},
    422: {
        "model": ErrorDoc,
        "description": "a value the command refuses, or a limit of the server",
    },
    429: {"model": ErrorDoc, "description": "too many computations waiting (Retry-After)"},
    503: {"model": ErrorDoc, "description": "waited too long for the worker (Retry-After)"},
}


def _error(status: int, field: str | None, message: str) -> JSONResponse:
    return JSONResponse(
        ErrorDoc(field=field, error=message).model_dump(by_alias=True), status_code=status
    )


def _json(doc: Any) -> Response:
    """The document as ``--json`` writes it (report.jsonout.dumps_json: NaN and infinity refused)."""
    from trilemma.report.jsonout import dumps_json

    return Response(dumps_json(doc), media_type="application/json")


def _field_of(exc: TrilemmaError, given: dict[str, str]) -> str | None:
    """The field an error names: an InputError's own, else the first flag of the request the line mentions,
    else what the line starts with (the CLI's lines begin ``field: ...``, e.g. ``layout: ...``)."""
    if isinstance(exc, InputError):
        return exc.field
    text = str(exc)
    named = next(
        (k for k in given.values() if f"--{k}" in text or f"{k}=" in text or f"{k} " in text), None
    )
    head = text.split(":", 1)[0].strip()
    return named or (head if re.fullmatch(r"[\w.-]+", head) else None)


def _pydantic_error(
    exc: RequestValidationError, verbs: dict[str, Verb | Routed], path: str
) -> JSONResponse:
    """The first validation error as the CLI words a bad flag: 422 naming the field (400 for a body that is
    not a JSON object)."""
    err = exc.errors()[0]
    refused = (err.get("ctx") or {}).get("error")
    if isinstance(refused, InputError):  # a request's own parser (trilemma.request): its line
        return _error(422, refused.field, str(refused))
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    kind, value = err.get("type", ""), err.get("input")
    if (
        kind == "missing"
        and path.rstrip("/").endswith("/solve/point")
        and loc
        and loc[0] in ("solve", "point")
    ):
        return _error(
            422,
            loc[0],
            f'{loc[0]}: missing; expected {{"solve": {{the solve\'s flags}}, "point": k}}, '
            "k a frontier point of that solve's answer (frontier_points)",
        )
    if not loc or kind in ("json_invalid", "model_attributes_type", "dict_type", "missing"):
        what = 'a JSON object of the command\'s flags, e.g. {"deadline": "30d", "budget": "$2M"}'
        return _error(400, "body", f"body: not allowed; expected {what}")
    verb = verbs.get(path.rstrip("/").rsplit("/", 1)[-1])
    field = loc[0]
    if (
        kind == "extra_forbidden" and len(loc) > 1
    ):  # a key inside a nested object: name its whole path
        path_name = ".".join(loc)
        return _error(422, path_name, f"{path_name}: no such field")
    if verb is not None:
        field = verb.keys.get(field, field)
        if kind == "extra_forbidden" and field in verb.keys.values():  # both spellings of one flag
            return _error(
                422,
                field,
                f"{field}: given twice (as {field} and {field.replace('-', '_')}); give it once",
            )
        if kind == "extra_forbidden":
            return _error(
                422,
                field,
                f"{field}: no such field of `trilemma {verb.name}`; the fields are "
                + ", ".join(verb.keys.values()),
            )
    allowed = {
        "string_type": "text",
        "string_too_long": f"at most {MAX_TEXT_CHARS} characters",
        "bool_type": "true or false",
        "float_type": "a number",
        "int_type": "a whole number",
        "too_long": f"at most {MAX_LIST_ITEMS} names",
        "list_type": "a list of names",
    }
    text = allowed.get(kind) or str(err.get("msg", "another value")).lower()
    if kind in ("string_type", "float_type", "int_type", "bool_type") and len(loc) == 1:
        text = {
            "string_type": "text or a number",
            "float_type": "a number",
            "int_type": "a whole number",
            "bool_type": "true or false",
        }[kind]
    return _error(422, field, str(InputError(field, value if value is not None else "null", text)))


def _respond(runner: Runner, compute: Callable[[], Any], given: dict[str, str]) -> Response:
    """Run ``compute`` (which returns the answer's document) and turn trilemma's errors into answers."""
    try:
        return runner.run(lambda: _json(compute()))
    except InfeasibleError as exc:
        return JSONResponse(InfeasibleDoc(message=str(exc)).model_dump(by_alias=True))
    except TrilemmaError as exc:
        return _error(422, _field_of(exc, given), str(exc))
    except TooSlow as exc:
        return _error(422, "search", str(exc))
    except RetryLater as exc:  # busy (429) or waited too long (503): told when to come back
        response = _error(exc.status, "queue", str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response


def _given(verb: Verb | Routed, req: BaseModel) -> dict[str, str]:
    return {n: k for n, k in verb.keys.items() if n in req.model_fields_set}


# ------------------------------------------------------------------ the solve document for the page


class Cache:
    """The last few answers by their request (solves, so a frontier point's plan needs no second search;
    the validate summary, which reads every shipped table)."""

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

    def put(self, key: str, value: Any) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


def frontier_points(r: Any) -> dict[str, Any]:
    """The Pareto frontier's points as columns (what ``--frontier out.csv`` writes, by column), plus the
    configuration of each (model, GPU type and count, precision, layout) for the page's hover and click."""
    f, tab = r.frontier, r.table
    if f is None:
        return {
            "time_s": [],
            "usd": [],
            "loss": [],
            "tokens": [],
            "feasible": [],
            "config": [],
            "configs": [],
        }
    rows = sorted({int(i) for i in f.config})
    index = {row: k for k, row in enumerate(rows)}
    configs = []
    for i in rows:
        m = tab.models[tab.model_idx[i]]
        configs.append(
            {
                "model": m.name,
                "gpu": tab.gpus[tab.gpu_idx[i]].name,
                "n_gpus": int(tab.n_gpus[i]),
                "precision": str(tab.precisions[tab.prec_idx[i]]),
                "layout": tab.layout(i).label(compact=True),
            }
        )
    return {
        "time_s": [float(x) for x in f.time_s],
        "usd": [float(x) for x in f.usd],
        "loss": [float(x) for x in f.loss],
        "tokens": [float(x) for x in f.tokens],
        "feasible": [bool(x) for x in f.feasible],
        "config": [index[int(i)] for i in f.config],
        "configs": configs,
    }


# ------------------------------------------------------------------ the application


def create_app(allowed_hosts: list[str] | None = None) -> FastAPI:
    """The application: ``/api/<verb>`` (POST, JSON), ``/api/solve/point``, the page at ``/``.
    ``allowed_hosts``: the Host headers answered (others get 400), so that a page elsewhere cannot reach a
    localhost server through a name that resolves to 127.0.0.1 (DNS rebinding); None answers any."""
    docs = swagger_ui_files()
    app = FastAPI(
        title="trilemma",
        version=_version(),
        redoc_url=None,
        docs_url=None if docs else "/docs",
        description="Speed, quality and cost of Transformer training: the `trilemma` verbs as JSON. "
        "Each request body holds the command's flags (`trilemma solve --deadline 30d "
        '--budget \'$2M\'` is `{"deadline": "30d", "budget": "$2M"}`); bad input is '
        "422 naming the field as the CLI does; an infeasible request is 200 with "
        "`infeasible: true` and what must give. Limits: a body of "
        f"{MAX_BODY_BYTES:,} bytes, text of {MAX_TEXT_CHARS} characters, a solve over at most "
        f"{MAX_CONFIGURATIONS:,} (model size × GPU type × precision × GPU count) "
        f"configurations, {TIME_LIMIT_S:g} s per computation once started, one at a time "
        f"with {MAX_WAITING} waiting (then 429) for at most {QUEUE_LIMIT_S:g} s (then 503), "
        "both with Retry-After; no endpoint reads or writes a file.",
    )
    runner = Runner(TIME_LIMIT_S, MAX_WAITING, QUEUE_LIMIT_S)
    app.state.runner = runner  # the one worker, for tests and benchmarks to hold busy
    solves, validations = Cache(CACHED_SOLVES), Cache(4)
    verbs: dict[str, Verb | Routed] = {name: Verb(name, fn) for name, fn in _commands().items()}
    verbs["estimate"] = routed(EstimateRequest)
    verbs["solve"] = routed(SolveRequest)

    def route(
        path: str,
        model: type[BaseModel],
        summary: str,
        answer: Callable[[Any], Response],
        response_model: Any = None,
    ) -> None:
        def handler(req: Any) -> Response:
            return answer(req)

        handler.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("req", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model)]
        )
        handler.__name__ = path.strip("/").replace("/", "_")
        if response_model is None:
            app.post(path, summary=summary, responses=ERRORS)(handler)
            return
        # the answer's document, or (a valid request no plan meets) the infeasible answer
        others = {k: v for k, v in ERRORS.items() if k != 200}
        app.post(
            path,
            summary=summary,
            responses=others,
            response_model=response_model | InfeasibleDoc,
            response_description="the command's --json document, or an infeasible answer",
        )(handler)

    def plain(
        verb: Verb, to_doc: Callable[[Any], Any], cache: Cache | None = None
    ) -> Callable[[Any], Response]:
        def answer(req: BaseModel) -> Response:
            def compute() -> Any:
                key = Cache.key(req)
                doc = cache.get(key) if cache is not None else None
                if doc is None:
                    doc = to_doc(verb.fn(**verb.arguments(req)))
                    if cache is not None:
                        cache.put(key, doc)
                return doc

            return _respond(runner, compute, _given(verb, req))

        return answer

    solve = verbs["solve"]
    solve_body = body(SolveRequest)

    def solve_doc(r: Any) -> dict[str, Any]:
        doc = r.to_dict()
        doc["frontier_points"] = frontier_points(r)
        return doc

    def solved(req: BaseModel) -> Any:
        """The SolveResult of a solve request: a recent one from the cache, else searched now."""
        key = Cache.key(req)
        r = solves.get(key)
        if r is None:
            from trilemma.api import run_solve

            r = run_solve(req, max_configurations=MAX_CONFIGURATIONS)
            solves.put(key, r)
        return r

    def point_answer(req: Any) -> Response:
        def compute() -> Any:
            from trilemma.solve import plan_document

            r = solved(req.solve)
            n = 0 if r.frontier is None else int(r.frontier.time_s.size)
            if req.point >= n:
                raise InputError(
                    "point",
                    req.point,
                    f"an index of the frontier's {n} points (0 to {max(n - 1, 0)})",
                )
            e, loss = r.plan_at(
                int(r.frontier.config[req.point]), float(r.frontier.tokens[req.point])
            )
            return plan_document(e, loss)

        return _respond(runner, compute, _given(solve, req.solve))

    point_model = create_model(
        "SolvePointRequest",
        __config__=ConfigDict(extra="forbid"),
        solve=(solve_body, Field(description="the solve request whose frontier it is")),
        point=(StrictInt, Field(ge=0, description="an index into its frontier_points")),
    )

    def estimate_answer(req: EstimateRequest) -> Response:
        from trilemma.api import run_estimate

        given = _given(verbs["estimate"], req)
        return _respond(runner, lambda: run_estimate(req).to_dict(), given)

    route(
        "/api/estimate",
        body(EstimateRequest),
        "one plan: time, GPU-hours, $, energy, memory, loss (estimate)",
        estimate_answer,
        EstimateDoc,
    )
    route(
        "/api/solve",
        solve_body,
        "pin two corners: the optimum, runners-up and the frontier (solve)",
        lambda req: _respond(runner, lambda: solve_doc(solved(req)), _given(solve, req)),
        SolveDoc,
    )
    route(
        "/api/solve/point", point_model, "the plan of one point of a solve's frontier", point_answer
    )
    route(
        "/api/optimal",
        verbs["optimal"].model,
        "compute-optimal N, D and loss for a FLOP budget (optimal)",
        plain(verbs["optimal"], lambda d: d),
    )
    route(
        "/api/presets",
        verbs["presets"].model,
        "the model and hardware presets (presets)",
        plain(verbs["presets"], lambda d: d, Cache(4)),
    )
    route(
        "/api/validate",
        verbs["validate"].model,
        "the backtest summary against published figures (validate)",
        plain(verbs["validate"], lambda d: d, validations),
    )

    schema = app.openapi

    def openapi() -> dict[str, Any]:  # the infeasible answer's schema, which ERRORS refers to
        doc = schema()
        doc.setdefault("components", {}).setdefault("schemas", {})["InfeasibleDoc"] = (
            InfeasibleDoc.model_json_schema(by_alias=True)
        )
        return doc

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _pydantic_error(exc, verbs, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """FastAPI's own refusals (a body its JSON parser cannot read, e.g. nested too deep; an unknown path;
        a method a route lacks) in the same shape as the others."""
        field = "body" if exc.status_code == 400 else None
        return _error(
            exc.status_code,
            field,
            f"{field or request.url.path[:MAX_TEXT_CHARS]}: {str(exc.detail).lower()}",
        )

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Callable[[Request], Any]) -> Response:
        if request.method not in ("GET", "HEAD", "POST"):
            return _error(
                405, None, f"method {request.method} is not allowed: GET the page, POST the API"
            )
        if request.method == "POST":
            length = request.headers.get("content-length")
            if length is None:
                return _error(411, "body", "body: a Content-Length is required")
            if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                return _error(
                    413,
                    "body",
                    f"body: {length[:20]} bytes is not allowed; expected at most "
                    f"{MAX_BODY_BYTES:,}",
                )
        t0 = time.perf_counter()
        response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        # the server's own time for the answer (benchmarks/serve_speed.py reads it; browsers show it)
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * KILO:.1f}"
        return response

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    if docs:  # the API docs page with Swagger UI's files from the installed fastapi-offline: no CDN either
        from fastapi.openapi.docs import get_swagger_ui_html

        @app.get("/docs", include_in_schema=False)
        def api_docs() -> Response:
            return get_swagger_ui_html(
                openapi_url="/openapi.json",
                title="trilemma — API",
                swagger_js_url="/vendor/swagger-ui-bundle.js",
                swagger_css_url="/vendor/swagger-ui.css",
                swagger_favicon_url="data:,",
            )

        @app.get("/vendor/swagger-ui-bundle.js", include_in_schema=False)
        def swagger_js() -> FileResponse:
            return FileResponse(docs["swagger-ui-bundle.js"], media_type="text/javascript")

        @app.get("/vendor/swagger-ui.css", include_in_schema=False)
        def swagger_css() -> FileResponse:
            return FileResponse(docs["swagger-ui.css"], media_type="text/css")

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        path = plotly_path()
        if path is None:
            return _error(404, None, "plotly is not installed: pip install 'trilemma[web]'")
        return FileResponse(
            path, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"}
        )

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if allowed_hosts is not None:
        app.add_middleware(_AllowedHosts, allowed=allowed_hosts)
    return app


class _AllowedHosts:
    """Answers only requests whose Host header names one of ``allowed`` (a local server: another name is a
    page elsewhere reaching it through DNS rebinding); the others get the JSON error document, status 400,
    as every refusal does. Outermost (added last), so nothing else runs for them."""

    def __init__(self, app: Any, allowed: list[str]) -> None:
        self.app, self.allowed = app, set(allowed)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        from starlette.datastructures import Headers

        host = Headers(scope=scope).get("host", "")
        name = host[: host.find("]") + 1] if host.startswith("[") else host.split(":")[0]
        if name in self.allowed:
            return await self.app(scope, receive, send)
        shown = host[:MAX_TEXT_CHARS]
        response = _error(
            400,
            "host",
            f"host: {shown!r} is not allowed; expected a name of this machine "
            f"({', '.join(sorted(self.allowed))}): the server answers only local pages",
        )
        await response(scope, receive, send)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """``(T, True)`` for ``T | None`` and ``Optional[T]`` (both spellings: ``typing.Union`` and the
    ``types.UnionType`` of ``str | None``), else ``(hint, False)``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else Union[tuple(rest)]), True  # noqa: UP007
    return hint, False


def _is_text(hint: Any) -> bool:
    """Whether the command takes the parameter as text (a JSON number for it is written out)."""
    return _unwrap_optional(hint)[0] is str


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trilemma")
    except PackageNotFoundError:
        return "0"


def swagger_ui_files() -> dict[str, Path] | None:
    """Swagger UI's script and stylesheet inside the installed ``fastapi-offline`` package (the web extra),
    so /docs works offline too; None without it (FastAPI's default /docs then loads them from a CDN)."""
    try:
        root = resources.files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        return None
    files = {name: Path(str(root / name)) for name in ("swagger-ui-bundle.js", "swagger-ui.css")}
    return files if all(p.is_file() for p in files.values()) else None


def plotly_path() -> Path | None:
    """plotly.min.js inside the installed plotly package (no CDN: the page works offline)."""
    try:
        p = resources.files("plotly") / "package_data" / "plotly.min.js"
    except ModuleNotFoundError:
        return None
    return Path(str(p)) if p.is_file() else None
