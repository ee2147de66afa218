"""Real text for the probe: files, folders or JSONL, as byte-level tokens, with a held-out split.

The default corpus needs no download: the Python standard library's own source files (the
``*.py`` files in the folder of the ``os`` module, ~170 files, ~5 MB on CPython 3.11). Tokens
are bytes (vocabulary 256), documents are joined by a NUL byte, which text never contains.
Every 20th document (in path order) is held out for evaluation, so train and eval never share
a file; a corpus of a single document is split at 95% of its bytes instead.

Reading is plain Python; torch is imported only to sample batches.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from trilemma.errors import InputError
from trilemma.fileio import open_input, parse_problem
from trilemma.units import MIB

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["Batches", "Corpus", "check_sources", "default_corpus_dir", "load_corpus"]

SEPARATOR = b"\x00"
HOLD_OUT_EVERY = 20
MAX_BYTES = int(256 * MIB)  # read at most this much text: the probe runs minutes, not epochs
_TEXT_SUFFIXES = {
    ".txt",
    ".md",
    ".rst",
    ".py",
    ".json",
    ".jsonl",
    ".html",
    ".tex",
    ".c",
    ".h",
    ".csv",
    "",
}


def default_corpus_dir() -> Path:
    """The folder of the standard library's ``os`` module."""
    return Path(os.__file__).resolve().parent


@dataclass(frozen=True)
class Corpus:
    train: bytes
    eval: bytes
    source: str  # what was read, in words
    documents: int
    held_out_documents: int

    def describe(self) -> dict:
        return {
            "source": self.source,
            "tokenizer": "bytes (vocabulary 256)",
            "documents": self.documents,
            "held_out_documents": self.held_out_documents,
            "train_tokens": len(self.train),
            "eval_tokens": len(self.eval),
        }


def _open(path: Path) -> IO[bytes]:
    """A regular file of ``--data`` (``trilemma.fileio.open_input``: never a FIFO or a device); its
    size is not capped, as reading stops at MAX_BYTES of text."""
    return open_input(path, "data", what="text file", max_bytes=sys.maxsize)


def _jsonl_texts(path: Path) -> Iterator[bytes]:
    with io.TextIOWrapper(_open(path), encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as exc:
                why = (
                    exc.msg if isinstance(exc, json.JSONDecodeError) else parse_problem(exc, "line")
                )
                if why is None:
                    raise
                raise InputError("data", f"{path}:{n}", f"JSON lines ({why})") from None
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise InputError("data", f"{path}:{n}", "JSON objects with a string `text` field")
            yield row["text"].encode("utf-8")


def _is_text(path: Path) -> bool:
    if path.suffix.lower() not in _TEXT_SUFFIXES:
        return False
    with _open(path) as fh:
        return b"\x00" not in fh.read(4096)


def _whole(path: Path, most: int) -> Iterator[bytes]:
    """A plain text file as one document: at most ``most`` bytes of it (what the corpus still takes)."""
    with _open(path) as fh:
        yield fh.read(most)


def _documents(paths: list[Path]) -> Iterator[bytes]:
    total = 0
    for p in paths:
        docs = _jsonl_texts(p) if p.suffix.lower() == ".jsonl" else _whole(p, MAX_BYTES - total)
        for d in docs:
            d = d.replace(SEPARATOR, b"")
            if d:
                yield d
                total += len(d)
                if total >= MAX_BYTES:
                    return


def check_sources(data: list[str] | str | None) -> None:
    """InputError, before anything is measured or trained, for a ``--data`` source that is not an existing
    text file, JSONL file or folder of text files."""
    for spec in [data] if isinstance(data, str) else (data or []):
        _files(spec)


def _files(spec: str) -> list[Path]:
    if not str(spec).strip():  # Path("") is the current folder: never what an empty --data meant
        raise InputError("data", spec, "an existing text file, JSONL file or folder")
    p = Path(spec).expanduser()
    if p.is_dir():
        found = sorted(f for f in p.rglob("*") if f.is_file() and _is_text(f))
        if not found:
            raise InputError(
                "data", spec, "a folder holding text files (.txt, .md, .py, .jsonl, ...)"
            )
        return found
    if p.is_file():
        return [p]
    raise InputError("data", spec, "an existing text file, JSONL file or folder")


def load_corpus(data: list[str] | str | None = None) -> Corpus:
    """Read ``data`` (files, folders, JSONL with a ``text`` field; default: the stdlib's source)."""
    if data is None or data == [] or data == "":
        folder = default_corpus_dir()
        files = sorted(folder.glob("*.py"))
        source = f"Python standard library source ({folder}/*.py)"
    else:
        specs = [data] if isinstance(data, str) else list(data)
        files = [f for s in specs for f in _files(s)]
        source = ", ".join(specs)
    docs = list(_documents(files))
    if not docs:
        raise InputError("data", source, "text: every file given was empty")
    if len(docs) == 1:
        cut = int(len(docs[0]) * 0.95)
        train, held = [docs[0][:cut]], [docs[0][cut:]]
    else:
        out = {i for i in range(len(docs)) if i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1} or {
            len(docs) - 1
        }
        train = [d for i, d in enumerate(docs) if i not in out]
        held = [d for i, d in enumerate(docs) if i in out]
    return Corpus(
        train=SEPARATOR.join(train),
        eval=SEPARATOR.join(held),
        source=source,
        documents=len(docs),
        held_out_documents=len(held),
    )


class Batches:
    """Random windows of seq + 1 bytes: inputs are the first seq, targets the last seq (next token).

    For an encoder (masked LM, Devlin 2019 §3.1) 15% of positions are replaced by ``mask_id`` and
    only those are scored. Seeded, so the probe and the plain loop see the same batches.
    """

    def __init__(
        self,
        text: bytes,
        seq: int,
        batch: int,
        seed: int,
        causal: bool = True,
        mask_id: int = 0,
        device: str = "cpu",
    ) -> None:
        import torch

        if len(text) < seq + 2:
            raise InputError(
                "seq",
                seq,
                f"at most {max(len(text) - 2, 1)} tokens: the corpus split is that short",
            )
        self.data = torch.frombuffer(bytearray(text), dtype=torch.uint8)
        self.seq, self.batch, self.causal, self.mask_id, self.device = (
            seq,
            batch,
            causal,
            mask_id,
            device,
        )
        self.gen = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        starts = torch.randint(0, len(self.data) - self.seq - 1, (self.batch,), generator=self.gen)
        win = torch.stack(
            [self.data[s : s + self.seq + 1] for s in starts.tolist()]
        ).long()  # (B, S+1)
        if self.causal:
            x, y = win[:, :-1], win[:, 1:]
        else:
            x = win[:, :-1].clone()
            masked = torch.rand(x.shape, generator=self.gen) < 0.15
            y = torch.where(masked, x, torch.full_like(x, -100))
            x[masked] = self.mask_id
        if self.device != "cpu":
            return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        return x, y
