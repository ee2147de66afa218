"""How a command hands over its result: printed on standard output as the command's JSON document
or its table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def emit(
    result: T, as_json: bool, to_doc: Callable[[T], Any], print_table: Callable[[T], None]
) -> T:
    """Print ``result`` as the command's JSON document (``to_doc``) or its table; return it."""
    if as_json:
        from trilemma.report.jsonout import print_json

        print_json(to_doc(result))
    else:
        print_table(result)
    return result
