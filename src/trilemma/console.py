"""The one console every human report prints through: control characters in names shown escaped.

Model, law and hardware names come from files other people wrote; an escape sequence in one would
clear or rewrite the user's terminal. :class:`SafeConsole` passes every string it renders, table
cells included, through :func:`trilemma.text.printable` (newlines kept). Text interpolated into a
markup string goes through :func:`shown`, which also escapes rich's markup brackets.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.text import Text

from trilemma.text import printable

__all__ = ["SafeConsole", "console", "shown"]


class SafeConsole(Console):
    """A rich Console whose strings reach the terminal with control characters escaped."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        text = printable(text, keep="\n")
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:  # brackets in a name that read as a closing tag: shown as written
            return super().render_str(text, **{**kwargs, "markup": False})


def console(*, stderr: bool = False, width: int = 200) -> Console:
    """The console of a report: ``width`` columns when the output is not a terminal (rich assumes 80
    there, so tables piped to grep would be cut), the terminal's own width otherwise."""
    probe = Console(stderr=stderr)
    return SafeConsole(stderr=stderr, highlight=False, width=None if probe.is_terminal else width)


def shown(text: object) -> str:
    """``text`` for a markup string: printable and with ``[`` escaped, so a name is never markup."""
    return escape(printable(text))
