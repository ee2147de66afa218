"""A request field, written once: its Python name (the scenario key), CLI flags, JSON key, help text,
default, kind of value and unit parser; and the base class of every verb's request.

A field is declared on a request model as ``name: T = option(default, "--flag", "-f", help=...)``.
The request parses what it is given when it is built (``"10B"`` → ``1e10``), each refusal one
``InputError`` naming the flag, so the CLI, the web API, a scenario file and the Python API refuse a
value with the same line. The CLI's options (``trilemma.cli_options``) and the web API's body
(``trilemma.web.app``) are generated from these fields.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from trilemma.errors import InputError, TrilemmaError

#: text: parsed by the field's parser (a JSON number is read as its text); number: a float given as a
#: number; int: a whole number given as a number; bool: true or false; spec: text or a spec object
#: items: a list, a table or one value, all read by the parser; numbers: comma-separated text or a list
#: of numbers, read by the parser
Kind = Literal["text", "number", "int", "bool", "spec", "items", "numbers"]

_SCHEMA = {  # the JSON a kind takes, for /openapi.json
    "text": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
    "spec": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "object"}]},
    "items": {
        "anyOf": [
            {"type": "string"},
            {"type": "number"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "object"},
            {"type": "null"},
        ]
    },
    "numbers": {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "number"}},
            {"type": "null"},
        ]
    },
}


@dataclass(frozen=True)
class Opt:
    """What a request field is outside Python: its flags, help and how its value is read."""

    flags: tuple[str, ...]  # "--model", "-m"; a switch: "--flash/--no-flash"
    help: str
    kind: Kind = "text"
    parse: Callable[[Any], Any] | None = None  # the given value (text for kind text) → typed value
    listable: bool = False  # a list of names is joined with commas, as the flag takes them
    argument: bool = False  # on the command line a positional argument, not a flag

    @property
    def key(self) -> str:
        """The JSON key and the name errors use: the long flag without dashes (``global-batch``)."""
        return self.flags[0].split("/")[0].removeprefix("--")

    def read(self, v: Any) -> Any:
        """The given value checked for its kind and parsed; InputError naming the flag."""
        if self.kind == "bool":
            if not isinstance(v, bool):
                raise InputError(self.key, v, "true or false")
            return v
        if self.kind in ("number", "int"):
            whole = self.kind == "int"
            if isinstance(v, bool) or not isinstance(v, int if whole else (int, float)):
                raise InputError(self.key, v, "a whole number" if whole else "a number")
            if (
                isinstance(v, int) and abs(v) > sys.float_info.max
            ):  # past a float: no parser reads it
                raise InputError(self.key, v, "a finite number")
            v = v if whole else float(v)
            return v if self.parse is None else self.parse(v)
        if self.kind in ("items", "numbers"):
            return v if self.parse is None else self.parse(v)
        if self.listable and isinstance(v, list) and all(isinstance(x, str) for x in v):
            v = ",".join(v)
        if isinstance(v, PurePath):  # a path from Python, as its text
            v = str(v)
        if self.kind == "spec" and not isinstance(v, (str, int, float)):
            return v if self.parse is None else self.parse(v)
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise InputError(self.key, v, "text")
        if not isinstance(
            v, str
        ):  # a number for a text field: read as its text, as the flag would be
            v = repr(v) if isinstance(v, float) else str(v)
        return v if self.parse is None or self.kind == "spec" else self.parse(v)


def option(default: Any, *flags: str, help: str, kind: Kind = "text", **how: Any) -> Any:
    """A request field: ``flags`` (the long one first), its ``help`` and ``kind``; ``how``: Opt's
    ``parse``, ``listable`` and ``argument``."""
    opt = Opt(tuple(flags), help, kind, **how)
    info = Field(default, alias=opt.key, description=help, json_schema_extra=_SCHEMA.get(kind))
    info.metadata.append(opt)
    return info


def opt_of(info: FieldInfo) -> Opt | None:
    return next((m for m in info.metadata if isinstance(m, Opt)), None)


class Request(BaseModel):
    """A verb's input: frozen, each field an ``option``; built from flags, JSON, TOML or keywords."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, arbitrary_types_allowed=True
    )
    VERB: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise request_error(exc, type(self)) from None

    @classmethod
    def options(cls) -> dict[str, Opt]:
        """Python name → the field's Opt, in the order of the fields."""
        return {n: o for n, i in cls.model_fields.items() if (o := opt_of(i)) is not None}

    @classmethod
    def check(cls, given: dict[str, Any]) -> None:
        """Rules between fields, over the values as given (by Python name), before any is parsed."""

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out, given = dict(data), {}
        for name, opt in cls.options().items():
            key = opt.key if opt.key in out else name
            if out.get(key) is not None:
                given[name] = out[key]
        cls.check(given)
        for name, opt in cls.options().items():
            key = opt.key if opt.key in out else name
            if out.get(key) is not None:
                out[key] = opt.read(out[key])
        return out


def request_error(exc: ValidationError, cls: type[Request]) -> TrilemmaError:
    """The refusal inside pydantic's error: a parser's own InputError, else one naming the field."""
    err = exc.errors(include_url=False)[0]
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, TrilemmaError):
        return inner
    opts = cls.options()
    name = str(err["loc"][0]) if err.get("loc") else cls.VERB
    if err.get("type") == "extra_forbidden":
        fields = ", ".join(opts)
        return InputError(name, err.get("input"), f"a field of `trilemma {cls.VERB}`: {fields}")
    key = opts[name].key if name in opts else name
    return InputError(key, err.get("input"), str(err.get("msg", "another value")).lower())
