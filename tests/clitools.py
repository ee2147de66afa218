"""Calling the CLI in-process from tests (``tests/`` is on sys.path when pytest runs them)."""

from __future__ import annotations

from trilemma.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    """``trilemma ARGS`` through ``trilemma.cli.main``: (exit status, stdout, stderr) of that call only."""
    capsys.readouterr()  # drop anything earlier
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
