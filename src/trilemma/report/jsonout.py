"""The one JSON printer of the CLI: every ``--json`` prints its document through ``print_json``.

The format is fixed: two-space indentation, values JSON cannot hold (paths, enums, dates) written
with ``str``, one trailing newline, on standard output.
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["dumps_json", "print_json"]


def dumps_json(doc: Any) -> str:
    """``doc`` as the CLI prints it: indented JSON, non-JSON values through ``str``, ending in a newline."""
    return json.dumps(doc, indent=2, default=str) + "\n"


def print_json(doc: Any) -> None:
    """Write ``doc`` to standard output as one JSON document (``dumps_json``)."""
    sys.stdout.write(dumps_json(doc))
