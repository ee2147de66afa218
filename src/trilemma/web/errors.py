"""How `trilemma serve` answers what it refuses: one JSON document (``field`` and a one-line
``error``, the CLI's own line) with the HTTP status of the refusal; and a valid request that no
plan meets, answered 200 with what must give."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from trilemma.errors import InfeasibleError, InputError, TrilemmaError
from trilemma.web.bodies import MAX_LIST_ITEMS, MAX_TEXT_CHARS, Routed
from trilemma.web.runner import RetryLater, Runner, TooSlow

INFEASIBLE_SCHEMA = "trilemma.infeasible/1"


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
    schema_: str = Field(INFEASIBLE_SCHEMA, alias="schema", description="the document's version")
    infeasible: bool = Field(True, description="always true: no plan meets the request")
    message: str = Field(description="what must give, and by how much")
    warnings: list[str] = Field([], description="what the figures assume, in words")


#: the refusals every route may answer, for /openapi.json
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorDoc, "description": "the body is not a JSON object"},
    422: {
        "model": ErrorDoc,
        "description": "a value the command refuses, or a limit of the server",
    },
    429: {"model": ErrorDoc, "description": "too many computations waiting (Retry-After)"},
    503: {"model": ErrorDoc, "description": "waited too long for the worker (Retry-After)"},
}


def error(status: int, field: str | None, message: str) -> JSONResponse:
    """The error document with HTTP ``status``."""
    return JSONResponse(
        ErrorDoc(field=field, error=message).model_dump(by_alias=True), status_code=status
    )


def json_answer(doc: Any) -> Response:
    """The document as ``--json`` writes it (report.jsonout.dumps_json: NaN and infinity refused)."""
    from trilemma.report.jsonout import dumps_json

    return Response(dumps_json(doc), media_type="application/json")


def field_of(exc: TrilemmaError, given: dict[str, str]) -> str | None:
    """The field an error names: an InputError's own, else the first flag of the request the line
    mentions, else what the line starts with (the CLI's lines begin ``field: ...``)."""
    if isinstance(exc, InputError):
        return exc.field
    text = str(exc)
    named = next(
        (k for k in given.values() if f"--{k}" in text or f"{k}=" in text or f"{k} " in text), None
    )
    head = text.split(":", 1)[0].strip()
    return named or (head if re.fullmatch(r"[\w.-]+", head) else None)


def given(verb: Routed, req: BaseModel) -> dict[str, str]:
    """The JSON keys of the fields the request gave (by Python name)."""
    return {n: k for n, k in verb.keys.items() if n in req.model_fields_set}


def respond(runner: Runner, compute: Callable[[], Any], keys: dict[str, str]) -> Response:
    """Run ``compute`` (which returns the answer's document) on the worker and turn trilemma's
    errors into answers; ``keys``: the fields given, as ``given`` returns them."""
    try:
        return runner.run(lambda: json_answer(compute()))
    except InfeasibleError as exc:
        return JSONResponse(InfeasibleDoc(message=str(exc)).model_dump(by_alias=True))
    except TrilemmaError as exc:
        return error(422, field_of(exc, keys), str(exc))
    except TooSlow as exc:
        return error(422, "search", str(exc))
    except RetryLater as exc:  # busy (429) or waited too long (503): told when to come back
        response = error(exc.status, "queue", str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response


#: pydantic's error kinds as the CLI words what a flag allows
_ALLOWED = {
    "string_type": "text",
    "string_too_long": f"at most {MAX_TEXT_CHARS} characters",
    "bool_type": "true or false",
    "float_type": "a number",
    "int_type": "a whole number",
    "too_long": f"at most {MAX_LIST_ITEMS} names",
    "list_type": "a list of names",
}
_ALLOWED_TOP = {"string_type": "text or a number"}
_BODY = 'a JSON object of the command\'s flags, e.g. {"deadline": "30d", "budget": "$2M"}'


def validation_error(
    exc: RequestValidationError, verbs: dict[str, Routed], path: str
) -> JSONResponse:
    """The first validation error as the CLI words a bad flag: 422 naming the field (400 for a body
    that is not a JSON object)."""
    err = exc.errors()[0]
    refused = (err.get("ctx") or {}).get("error")
    if isinstance(refused, InputError):  # a request's own parser (trilemma.request): its line
        return error(422, refused.field, str(refused))
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    kind, value = err.get("type", ""), err.get("input")
    route = path.rstrip("/")
    if (
        kind == "missing"
        and route.endswith("/solve/point")
        and loc
        and loc[0] in ("solve", "point")
    ):
        return error(
            422,
            loc[0],
            f'{loc[0]}: missing; expected {{"solve": {{the solve\'s flags}}, "point": k}}, '
            "k a frontier point of that solve's answer (frontier_points)",
        )
    if not loc or kind in ("json_invalid", "model_attributes_type", "dict_type", "missing"):
        return error(400, "body", f"body: not allowed; expected {_BODY}")
    if kind == "extra_forbidden" and len(loc) > 1:  # a key inside a nested object: its whole path
        return error(422, ".".join(loc), f"{'.'.join(loc)}: no such field")
    verb, field = verbs.get(route.rsplit("/", 1)[-1]), loc[0]
    if verb is not None:
        field = verb.keys.get(field, field)
        if kind == "extra_forbidden":
            return _unknown(verb, field)
    text = _allowed(kind, len(loc), str(err.get("msg", "another value")))
    return error(422, field, str(InputError(field, value if value is not None else "null", text)))


def _unknown(verb: Routed, field: str) -> JSONResponse:
    if field in verb.keys.values():  # both spellings of one flag
        return error(
            422,
            field,
            f"{field}: given twice (as {field} and {field.replace('-', '_')}); give it once",
        )
    return error(
        422,
        field,
        f"{field}: no such field of `trilemma {verb.name}`; the fields are "
        + ", ".join(verb.keys.values()),
    )


def _allowed(kind: str, depth: int, msg: str) -> str:
    """What a value of pydantic's error ``kind`` should have been; ``depth``: its location's length
    (1: a top-level field)."""
    if depth == 1 and kind in ("string_type", "float_type", "int_type", "bool_type"):
        return _ALLOWED_TOP.get(kind, _ALLOWED[kind])
    return _ALLOWED.get(kind) or msg.lower()
