"""Errors that reach the user as one line and exit status 2 (bad input) or 1 (infeasible)."""

from __future__ import annotations

from enum import Enum

MAX_SHOWN = 120  # characters of a user's value an error message repeats


def _clip(text: str) -> str:
    """``text`` cut to MAX_SHOWN characters (a 5,000-character value is not repeated whole)."""
    return text if len(text) <= MAX_SHOWN else f"{text[: MAX_SHOWN - 12]}… ({len(text):,} chars)"


class TrilemmaError(Exception):
    """Base class: every error trilemma raises on purpose."""

    exit_code = 2


class InputError(TrilemmaError, ValueError):
    """A value the user gave is not allowed: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        if value is None:
            super().__init__(f"{field}: missing; expected {allowed}")
        else:
            shown = (
                value.value if isinstance(value, Enum) else value
            )  # a choice as the user typed it
            super().__init__(f"{field}: {_clip(repr(shown))} is not allowed; expected {allowed}")


class UnknownPresetError(InputError):
    """A preset name that does not exist; suggests the closest names."""

    def __init__(
        self, kind: str, name: str, suggestions: list[str], field: str | None = None
    ) -> None:
        field = field or kind.rstrip("s")
        hint = ("did you mean " + ", ".join(suggestions) + "? ") if suggestions else ""
        allowed = f"a known {field} preset ({hint}`trilemma presets {kind}` lists them)"
        super().__init__(field, name, allowed)
        self.args = (
            f"{field}: unknown preset {_clip(repr(name))}; {hint}`trilemma presets {kind}` lists them",
        )

    def __str__(self) -> str:
        return self.args[0]


class LayoutError(TrilemmaError):
    """A parallel layout or batch that cannot work, with the reason and what would."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class InfeasibleError(TrilemmaError):
    """The request is valid but no plan meets it (exit status 1)."""

    exit_code = 1


def check_output_file(field: str, path: object) -> None:
    """InputError unless ``path`` names a file trilemma can create or append to: not empty, not a folder,
    in a folder that exists and is writable. Checked before long work, so that a run of minutes is not
    lost to a typo at its end (the write itself still reports what the OS says)."""
    import os
    from pathlib import Path

    text = str(path)
    if not text.strip():
        raise InputError(field, text, "a file path to write")
    p = Path(text).expanduser()
    if p.is_dir():
        raise InputError(field, text, "a file path to write, not a folder")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(
            field, text, f"a file in an existing folder ({str(parent)!r} does not exist)"
        )
    if p.exists() and not (p.is_file() and os.access(p, os.W_OK)):
        raise InputError(field, text, "a regular file this user can write")
    if not p.exists() and not os.access(parent, os.W_OK):
        raise InputError(
            field, text, f"a file in a folder this user can write ({str(parent)!r} is not)"
        )
