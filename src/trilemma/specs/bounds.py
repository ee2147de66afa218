"""Each request field's bounds, stated once: the spec field that holds the value carries them, so the
CLI, the web API, a scenario file and the Python API refuse the same values with the same line.

:func:`bounded` makes a pydantic ``Field`` with ``ge``/``le`` (or ``gt``/``lt``) and registers the
request field's name (its flag, without dashes: what the user typed) and the allowed text;
:func:`trilemma.specs.base.validation_to_input_error` reads the registry back, so a spec's refusal
names ``price``, not ``cluster.price_usd_per_hour``, and says what is allowed in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from trilemma.errors import InputError
from trilemma.units import DAY

__all__ = ["BOUNDS", "Bound", "bounded"]


@dataclass(frozen=True)
class Bound:
    """A field's request name (``price``) and what it allows, in words."""

    flag: str
    allowed: str
    limits: tuple[tuple[str, float], ...] = ()  # (ge|gt|le|lt, number)

    def check(self, value: Any) -> Any:
        """``value`` if within the limits, else the field's InputError: for code that uses a value
        before the spec holding it is built (solve sizes batches by the sequence length)."""
        ok = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b}
        ok["lt"] = lambda a, b: a < b
        if value is not None and not all(ok[k](value, b) for k, b in self.limits):
            shown = int(value) if isinstance(value, float) and value.is_integer() else value
            raise InputError(self.flag, shown, self.allowed)
        return value


#: spec field name → its bound (field names are unique in meaning across the specs that hold them)
BOUNDS: dict[str, Bound] = {}


def bounded(name: str, flag: str, allowed: str, default: Any = ..., **field: Any) -> Any:
    """A pydantic Field for spec field ``name`` (``field``: its limits ge/gt/le/lt and description),
    refused as ``flag: VALUE is not allowed; expected ALLOWED`` from every front door."""
    limits = tuple((k, field[k]) for k in ("ge", "gt", "le", "lt") if k in field)
    BOUNDS[name] = Bound(flag, allowed, limits)
    return Field(default, **field)


#: a run useful 1% of its wall time is not a plan; below it times overflow
MIN_GOODPUT = 0.01
#: the most a GPU-hour may cost, USD: ~1,000x any rental price (an H100 rents for ~$2-4); above it, a
#: typo's cost overflows into inf dollars
MAX_PRICE_PER_GPU_HOUR = 1e4
#: links, bytes/s per device: 1 MB/s (slower, a step outlasts any run) to 1 PB/s (NVLink 5 is 1.8 TB/s)
LINK_RANGE = (1e6, 1e15)
#: the longest restart, s: a week (a failure that takes longer is a new run, not a restart)
MAX_RESTART_S = 7 * DAY
#: the longest sequence, tokens: 16M (2^24; the longest trained contexts are 1-10M)
MAX_SEQ = 2**24
#: unexpected job interruptions per GPU-hour: any rate above 0, at most one an hour per GPU
FAILURE_RATE_ALLOWED = "failures per GPU-hour, a number above 0 and at most 1, e.g. 5e-5"
#: datacentre power usage effectiveness: 1 (no overhead) to 3 (an old machine room)
PUE_RANGE = (1.0, 3.0)
