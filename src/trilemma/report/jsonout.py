"""The one JSON printer of the CLI: every ``--json`` prints its document through ``print_json``.

The format is fixed: two-space indentation, values JSON cannot hold (paths, enums, dates) written
with ``str``, one trailing newline, on standard output.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from trilemma.errors import InfeasibleError

__all__ = ["dumps_json", "print_json"]


def _non_finite(doc: Any, path: str = "") -> tuple[str, float] | None:
    """The first NaN or infinity in ``doc`` (dicts, lists, floats), as (its key path, the value)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return path or "(the document)", doc
    if isinstance(doc, dict):
        items = doc.items()
    elif isinstance(doc, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(doc))
    else:
        return None
    for k, v in items:
        found = _non_finite(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


def dumps_json(doc: Any) -> str:
    """``doc`` as the CLI prints it: indented JSON, non-JSON values through ``str``, ending in a newline.

    JSON has no NaN or infinity: a document holding one is refused with the key that holds it
    (InfeasibleError, exit status 1) rather than printed as the non-standard ``NaN``/``Infinity``."""
    found = _non_finite(doc)
    if found:
        raise InfeasibleError(
            f"{found[0]} would be {found[1]}: the inputs are beyond what can be computed in "
            "floating point (overflow); bring the extreme value back to a physical range"
        )
    return json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n"


def print_json(doc: Any) -> None:
    """Write ``doc`` to standard output as one JSON document (``dumps_json``)."""
    sys.stdout.write(dumps_json(doc))
