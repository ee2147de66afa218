"""One parallel-layout axis of the registry (trilemma.specs.axes): its field, flag and parsing,
the values the searches try, its legality rules and its integer code in the estimators' arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from trilemma.errors import InputError
from trilemma.specs.enums import Recompute, ZeroStage


class SearchContext(NamedTuple):
    """What the candidate values of an axis may depend on."""

    model: Any  # ModelSpec
    n_gpus: int
    gpus_per_node: int
    max_seq: int  # tokens, the longest stage's sequence


@dataclass(frozen=True)
class Rule:
    """A legality rule: ``ok(model, L, seq_len)`` is a boolean array over layout rows ``L``."""

    bit: int
    text: str
    ok: Callable[[Any, Any, int], Any]


def pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


def divisors(n: int) -> list[int]:
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


@dataclass(frozen=True)
class Axis:
    """One layout axis. Values are spec values (int, bool or an enum); ``code``/``value`` map them
    to and from the int64 codes of the arrays."""

    name: str  # Layout field, LayoutArrays column, JSON key, key of a pinned-axes dict
    kind: type  # int, bool, Recompute, ZeroStage
    default: Any
    help: str
    label: str  # in tables: "TP 8", "ZeRO-1"
    flag: str | None  # CLI option of estimate; None: not a flag (dp follows from the GPU count)
    estimate_values: Callable[[SearchContext], Sequence[Any]]
    solve_values: (
        Callable[[bool], Sequence[Any]] | None
    )  # (any MoE model) → values; None: not searched
    rules: tuple[Rule, ...] = ()
    shown: Callable[[Any], bool] = lambda v: True  # in one-line summaries of a layout
    short: str | None = None  # label in compact summaries (default: ``label``)

    @property
    def choices(self) -> tuple[Any, ...] | None:
        return (
            tuple(self.kind)
            if isinstance(self.kind, type) and issubclass(self.kind, (Recompute, ZeroStage))
            else None
        )

    @property
    def field(self) -> str:
        """The name errors use: the flag without dashes (``micro-batch``), or the field name."""
        return self.flag.removeprefix("--").split("/")[0] if self.flag else self.name

    def code(self, v: Any) -> int:
        """The int64 code of a spec value (recompute: 0 none, 1 selective, 2 full, 3 op)."""
        if self.kind is Recompute:
            return Recompute(v).code
        return int(v)

    def value(self, code: int) -> Any:
        if self.kind is Recompute:
            return Recompute.from_code(code)
        if self.kind is bool:
            return bool(code)
        return self.kind(int(code))

    def allowed(self) -> str:
        """What is allowed, in the words of an error message."""
        ch = self.choices
        if ch is None:
            return "a positive whole number"
        words = [str(c) for c in ch]
        return ", ".join(words[:-1]) + " or " + words[-1]

    def check(self, v: Any) -> Any:
        """A pinned value given through the Python API, validated; InputError otherwise."""
        if self.kind is bool:
            return int(bool(v))
        if self.choices is not None:
            try:
                return self.kind(v)
            except ValueError:
                raise InputError(self.name, v, self.allowed()) from None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(self.name, v, self.allowed())
        return int(v)

    def parse(self, text: str | bool | None) -> Any:
        """A CLI value (text, or a bool for a --x/--no-x switch) → spec value; None stays None."""
        if text is None or self.kind is bool:
            return text
        if self.choices is not None:
            for c in self.choices:
                if str(text).strip().lower() == str(c):
                    return c
            raise InputError(self.field, text, self.allowed())
        from trilemma.units import parse_count

        v = parse_count(text, self.field)
        if v != int(v) or v > MAX_DEGREE:
            raise InputError(self.field, text, f"a positive whole number (at most {MAX_DEGREE:,})")
        return int(v)


#: beyond this the int64 layout arithmetic overflows (GPUs, sequence length, parallel degrees)
MAX_DEGREE = 2**31 - 1
