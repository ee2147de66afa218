"""Base class of every spec: frozen, validated, strict about unknown fields.

``build()`` turns pydantic's multi-line ValidationError into trilemma's one-line InputError that
names the field, the value and what is allowed.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from trilemma.errors import InputError
from trilemma.specs.bounds import BOUNDS

S = TypeVar("S", bound="Spec")


class Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    @classmethod
    def build(cls: type[S], prefix: str = "", **fields: Any) -> S:
        """Validate ``fields`` into a spec; raise InputError naming the first bad field."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise validation_to_input_error(exc, prefix or cls.__name__) from None

    def replace(self: S, **changes: Any) -> S:
        """A validated copy with some fields changed."""
        return type(self).build(**{**self.model_dump(), **changes})


#: a plan's fields as the flags that set them (estimate and solve): an error names what the user typed
PLAN_FLAGS = {"global_batch_tokens": "global-batch", "seq_len": "seq", "tokens": "tokens"}


def _flag(name: str) -> str:
    """``plan.global_batch_tokens`` (or ``plan.stages.0.tokens``) → the flag, else the name unchanged."""
    head, _, last = name.rpartition(".")
    return PLAN_FLAGS[last] if head.split(".")[0] == "plan" and last in PLAN_FLAGS else name


def validation_to_input_error(exc: ValidationError, prefix: str) -> InputError:
    e = _validation_to_input_error(exc, prefix)
    return InputError(_flag(e.field), e.value, e.allowed) if _flag(e.field) != e.field else e


def _validation_to_input_error(exc: ValidationError, prefix: str) -> InputError:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    msg = str(err.get("msg", "invalid"))
    value = err.get("input")
    bound = BOUNDS.get(str(err["loc"][-1])) if err.get("loc") else None
    if bound is not None:  # a request field's bounds: the same line from every front door
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 8 days parsed (691200.0) reads as given in seconds (691200)
        return InputError(bound.flag, value, bound.allowed)
    if err.get("type") == "value_error" and "=" in msg and ":" in msg:
        # our own model validators say "field=value: what is allowed"
        msg = msg.removeprefix("Value error, ")
        head, _, allowed = msg.partition(":")
        field, _, val = head.partition("=")
        return InputError(f"{prefix}.{field.strip()}", _num(val.strip()), allowed.strip())
    if err.get("type") == "extra_forbidden":
        return InputError(f"{prefix}.{loc}", value, "no such field")
    if err.get("type") == "missing":
        return InputError(f"{prefix}.{loc}", "(missing)", "a value: the field is required")
    return InputError(f"{prefix}.{loc}" if loc else prefix, value, msg[0].lower() + msg[1:])


def _num(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text.strip("'")
