"""Text trilemma did not write, made safe to show or to write into a file of another language.

Names and values reach trilemma from files other people wrote (a ``config.json``'s ``_name_or_path``, a
law file's ``name``, a folder name, a hand-edited hardware profile). Shown raw, an escape sequence in
one clears or rewrites the terminal; written raw into a generated script, a newline ends a comment and
starts a command. Every such text passes through :func:`printable` on its way out: each character that
is not printable (``str.isprintable``: controls C0/C1 and DEL, line and paragraph separators, format
characters such as U+202E, surrogates, unassigned code points) becomes its Python escape (``\\n``,
``\\x1b``, ``\\u202e``), so the text stays on one line and reads as what it was.
"""

from __future__ import annotations

__all__ = ["printable"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: object, keep: str = "") -> str:
    """``str(text)`` with every non-printable character but those in ``keep`` (e.g. ``"\\n"`` for a
    multi-line report) replaced by its backslash escape; printable text is returned unchanged."""
    s = str(text)
    if s.isprintable() or all(c.isprintable() or c in keep for c in s):
        return s
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in s)
