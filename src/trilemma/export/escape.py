"""Free text (a model's or a chip's name, a path) as it may appear in each language the exporters
write; structured values go through that language's own writer (``shlex.quote``, ``json.dumps``,
``trilemma.tomlw.toml_value``, ``repr``), never through these.

A comment is one line: :func:`trilemma.text.printable` turns every newline, carriage return and other
non-printable character into its escape, so nothing after the comment marker can start a statement
(POSIX shell and TOML end a comment only at a newline; Python at ``\\n`` or ``\\r``). A Python docstring
also escapes backslashes and double quotes, so no ``\"\"\"`` can close it: the docstring's value is the
original text.
"""

from __future__ import annotations

from trilemma.text import printable

__all__ = ["comment_text", "py_docstring_text"]


def comment_text(text: object) -> str:
    """``text`` for the body of a ``#`` comment in a shell script, a TOML file or Python: one line."""
    return printable(text)


def py_docstring_text(text: object) -> str:
    """``text`` for the inside of a (non-raw) triple-double-quoted Python string: evaluates to ``text``."""
    return printable(str(text).replace("\\", "\\\\").replace('"', '\\"'))
