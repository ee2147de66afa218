"""An exported plan on the terminal (its files, then its notes) or written to a folder."""

from __future__ import annotations

import os
import sys
from typing import Any

from trilemma.errors import InputError
from trilemma.fileio import check_output, write_text_atomic
from trilemma.text import printable


def print_export(doc: Any) -> None:
    """The files as text on standard output: one file alone as it is (``> ds_config.json`` keeps it
    valid), several each under a ``==> name <==`` line; the notes and warnings on standard error."""
    out = sys.stdout
    many = len(doc.files) > 1
    for name, text in doc.files.items():
        if many:
            out.write(f"==> {name} <==\n")
        out.write(text if text.endswith("\n") else text + "\n")
        if many:
            out.write("\n")
    for line in (*doc.notes, *doc.warnings):
        sys.stderr.write(f"note: {printable(line)}\n")


NOTES = "trilemma-notes.txt"  # beside the engine's files: what was exported, and the notes


def notes_text(doc: Any) -> str:
    lines = [
        f"trilemma export --to {doc.engine}: {doc.plan['title']} ({doc.plan['source']})",
        f"argument names: {doc.engine_version}",
        "",
    ]
    lines += [f"- {x}" for x in (*doc.notes, *doc.warnings)]
    return "\n".join(printable(x) for x in lines) + "\n"


def write_export(doc: Any, folder: str) -> list[str]:
    """Write the files into ``folder`` (made if missing), and the notes as trilemma-notes.txt; their
    paths. Each file is written atomically; a script is made executable. A name that is one of the
    command's inputs (a config.json it read) is refused before any file is written."""
    files = {**doc.files, NOTES: notes_text(doc)}
    try:
        os.makedirs(folder, exist_ok=True)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InputError(
            "out", folder, f"a writable folder ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    paths = [os.path.join(folder, name) for name in files]
    for path in paths:
        check_output("out", path)
    for path, (name, text) in zip(paths, files.items()):
        write_text_atomic(path, text, "out", mode=0o755 if name.endswith(".sh") else None)
    return paths


def print_written(doc: Any, paths: list[str]) -> None:
    for p in paths:
        sys.stdout.write(f"wrote {printable(p)}\n")
    for line in (*doc.notes, *doc.warnings):
        sys.stdout.write(f"note: {printable(line)}\n")


__all__ = ["print_export", "print_written", "write_export"]
