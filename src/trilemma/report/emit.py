"""How a command hands over its result: printed on standard output (the CLI), or returned unprinted to a
caller that runs the command's function inside ``results_only()`` (``trilemma serve``, trilemma.web).

One command body then serves both: the flags are parsed, checked and worded once (trilemma.cli), and
the web API answers with the document ``--json`` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_RESULTS_ONLY: ContextVar[bool] = ContextVar("trilemma_results_only", default=False)


@contextmanager
def results_only() -> Iterator[None]:
    """Inside this block (this thread or task only) commands return their result and print nothing."""
    token = _RESULTS_ONLY.set(True)
    try:
        yield
    finally:
        _RESULTS_ONLY.reset(token)


def emit(
    result: T, as_json: bool, to_doc: Callable[[T], Any], print_table: Callable[[T], None]
) -> T:
    """Print ``result`` as the command's JSON document (``to_doc``) or its table, unless inside
    ``results_only()``; return it either way."""
    if not _RESULTS_ONLY.get():
        if as_json:
            from trilemma.report.jsonout import print_json

            print_json(to_doc(result))
        else:
            print_table(result)
    return result
