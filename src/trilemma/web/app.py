"""The FastAPI application of `trilemma serve`: the verbs as JSON over HTTP, and the explorer page.

Each ``/api/<verb>`` takes the verb's typed request (trilemma.request, with the server's limits:
trilemma.web.bodies) as the body and runs the library (trilemma.api; trilemma.web.routes), never
the CLI. There is no second schema:

- the body is the request: its JSON keys are the flag names (``target-loss``, ``global-batch``; the
  Python names ``target_loss`` are accepted too), the defaults are the CLI's, the help texts are
  the OpenAPI descriptions at ``/docs``;
- the values are parsed and checked by the request's own fields, as on the command line, and a bad
  one is refused with the CLI's own line: HTTP 422, ``{"field": "tokens", "error": "tokens: '-1' is
  not allowed; expected ..."}``; a body that is not a JSON object is 400 (``field``: ``body``)
  (trilemma.web.errors);
- the answer is the document ``--json`` prints (solve adds its frontier's points for the page),
  declared as the route's ``response_model``;
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

import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from trilemma.units import IEC, KILO
from trilemma.web.bodies import MAX_LIST_ITEMS, MAX_TEXT_CHARS, Routed
from trilemma.web.errors import INFEASIBLE_SCHEMA, error, validation_error
from trilemma.web.routes import add_routes, frontier_points
from trilemma.web.runner import (
    MAX_CONFIGURATIONS,
    MAX_WAITING,
    QUEUE_LIMIT_S,
    TIME_LIMIT_S,
    Busy,
    Queued,
    Runner,
    TooSlow,
)
from trilemma.web.scenario import add_scenario_route
from trilemma.web.static import STATIC, add_files, plotly_path, swagger_ui_files

#: the Host headers a server bound to the loopback answers (trilemma.web.serve)
LOCAL_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]
#: a request body; the largest sensible one (a ModelSpec) is ~1 KiB
MAX_BODY_BYTES = int(64 * IEC["Ki"])

__all__ = [  # what tests, benchmarks and trilemma.web.serve read from here
    "INFEASIBLE_SCHEMA",
    "LOCAL_HOSTS",
    "MAX_BODY_BYTES",
    "MAX_CONFIGURATIONS",
    "MAX_LIST_ITEMS",
    "MAX_TEXT_CHARS",
    "STATIC",
    "Busy",
    "Queued",
    "Runner",
    "TooSlow",
    "create_app",
    "frontier_points",
    "plotly_path",
    "swagger_ui_files",
]


def _description() -> str:
    return (
        "Speed, quality and cost of Transformer training: the `trilemma` verbs as JSON. "
        "Each request body holds the command's flags (`trilemma solve --deadline 30d "
        '--budget \'$2M\'` is `{"deadline": "30d", "budget": "$2M"}`); bad input is '
        "422 naming the field as the CLI does; an infeasible request is 200 with "
        "`infeasible: true` and what must give. Limits: a body of "
        f"{MAX_BODY_BYTES:,} bytes, text of {MAX_TEXT_CHARS} characters, a solve over at most "
        f"{MAX_CONFIGURATIONS:,} (model size × GPU type × precision × GPU count) "
        f"configurations, {TIME_LIMIT_S:g} s per computation once started, one at a time "
        f"with {MAX_WAITING} waiting (then 429) for at most {QUEUE_LIMIT_S:g} s (then 503), "
        "both with Retry-After; no endpoint reads or writes a file."
    )


def create_app(allowed_hosts: list[str] | None = None) -> FastAPI:
    """The application: ``/api/<verb>`` (POST, JSON), ``/api/solve/point``, the page at ``/``.
    ``allowed_hosts``: the Host headers answered (others get 400), so that a page elsewhere cannot
    reach a localhost server through a name that resolves to 127.0.0.1 (DNS rebinding); None
    answers any."""
    docs = swagger_ui_files()
    app = FastAPI(
        title="trilemma",
        version=_version(),
        redoc_url=None,
        docs_url=None if docs else "/docs",
        description=_description(),
    )
    runner = Runner(TIME_LIMIT_S, MAX_WAITING, QUEUE_LIMIT_S)
    app.state.runner = runner  # the one worker, for tests and benchmarks to hold busy
    verbs = add_routes(app, runner)
    add_scenario_route(app)
    _add_refusals(app, verbs)
    add_files(app, docs)
    if allowed_hosts is not None:
        app.add_middleware(_AllowedHosts, allowed=allowed_hosts)
    return app


def _add_refusals(app: FastAPI, verbs: dict[str, Routed]) -> None:
    """Every refusal as the error document: a body the request refuses, FastAPI's own (an unknown
    path, a method), a method other than GET/HEAD/POST, a body without or over its length."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc, verbs, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """FastAPI's own refusals (a body its JSON parser cannot read, e.g. nested too deep; an
        unknown path; a method a route lacks) in the same shape as the others."""
        field = "body" if exc.status_code == 400 else None
        return error(
            exc.status_code,
            field,
            f"{field or request.url.path[:MAX_TEXT_CHARS]}: {str(exc.detail).lower()}",
        )

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Callable[[Request], Any]) -> Response:
        if request.method not in ("GET", "HEAD", "POST"):
            return error(
                405, None, f"method {request.method} is not allowed: GET the page, POST the API"
            )
        if request.method == "POST":
            length = request.headers.get("content-length")
            if length is None:
                return error(411, "body", "body: a Content-Length is required")
            if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                return error(
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


class _AllowedHosts:
    """Answers only requests whose Host header names one of ``allowed`` (a local server: another
    name is a page elsewhere reaching it through DNS rebinding); the others get the JSON error
    document, status 400, as every refusal does. Outermost (added last), so nothing else runs for
    them."""

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
        response = error(
            400,
            "host",
            f"host: {shown!r} is not allowed; expected a name of this machine "
            f"({', '.join(sorted(self.allowed))}): the server answers only local pages",
        )
        await response(scope, receive, send)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trilemma")
    except PackageNotFoundError:
        return "0"
