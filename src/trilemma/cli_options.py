"""A verb's Typer options generated from its request's fields (trilemma.request): each field's flags,
help and default become one option, and the command builds the request from what was given.

The CLI's own options (``--json``, ``--export``: how the answer is written, not what is asked) are
given as ``extras`` and reach the command's body beside the request.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from enum import Enum
from typing import Any

import typer
from pydantic_core import PydanticUndefined

from trilemma.request.field import Opt, Request

#: the type click parses each kind of field as (text goes to the field's own parser)
_CLI_TYPE: dict[str, Any] = {
    "text": str,
    "spec": str,
    "number": float,
    "int": int,
    "bool": bool,
    "items": list[str],  # a repeatable option
    "numbers": str,  # comma-separated, read by the field's parser
}


def _shown(default: Any) -> Any:
    """A field's default as the flag would be typed (``bf16``, ``2048``), for --help."""
    return str(default.value) if isinstance(default, Enum) else default


def _parameter(name: str, opt: Opt, default: Any) -> inspect.Parameter:
    """One field as a Typer option, or as a positional argument (``Opt.argument``; no default:
    required)."""
    kind = _CLI_TYPE[opt.kind]
    cli_default = ... if default is PydanticUndefined else _shown(default)
    if opt.kind == "text" and cli_default not in (None, ...):
        cli_default = str(cli_default)
    annotation = kind if cli_default is not None else kind | None
    if opt.argument:
        given = typer.Argument(cli_default, help=opt.help)
    else:
        given = typer.Option(cli_default, *opt.flags, help=opt.help)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=given, annotation=annotation
    )


def command(
    request: type[Request],
    extras: list[inspect.Parameter],
    body: Callable[..., Any],
    *,
    leading: tuple[inspect.Parameter, ...] = (),
    merged: bool = False,
    after: str | None = None,
) -> Callable[..., Any]:
    """A Typer command function for ``request``'s verb: ``leading`` (arguments), the request's fields
    as options, then ``extras``; it calls ``body(request_instance, **extras)``. ``merged``: the
    options default to None (the values given are merged over a file's by the body, which gets them
    as a dict by field name instead of a request). ``after``: the field the extras follow in
    --help (default: the last)."""
    fields = request.options()
    params = [
        _parameter(n, o, None if merged else request.model_fields[n].default)
        for n, o in fields.items()
    ]

    def run(**kwargs: Any) -> Any:
        given = {n: v for n in fields if (v := kwargs.pop(n)) is not None}
        return body(given if merged else request(**given), **kwargs)

    cut = len(params) if after is None else [p.name for p in params].index(after) + 1
    every = [*leading, *params[:cut], *extras, *params[cut:]]
    run.__signature__ = inspect.Signature(every)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in every}
    run.__name__, run.__doc__ = request.VERB, body.__doc__
    return run


def extra(name: str, default: Any, *flags: str, help: str, annotation: Any) -> inspect.Parameter:
    """One CLI-only option (not a field of the request)."""
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(default, *flags, help=help),
        annotation=annotation,
    )
