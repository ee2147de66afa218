"""The CLI's one JSON printer, and presentation kept in report/ and the CLI modules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trilemma
from trilemma.report.jsonout import dumps_json, print_json

PACKAGE = Path(trilemma.__file__).parent


def test_print_json_writes_one_document_that_reads_back(capsys):
    doc = {"schema": "x/1", "path": Path("/tmp/a"), "nested": {"n": 3, "v": [1.5, None]}}
    print_json(doc)
    out = capsys.readouterr().out
    assert out == dumps_json(doc) and out.endswith("}\n") and not out.endswith("\n\n")
    back = json.loads(out)
    assert back["path"] == "/tmp/a" and back["nested"] == doc["nested"]
    assert out.splitlines()[1].startswith("  ")  # indented for people


def test_library_code_does_not_print():
    """Only report/ and the CLI modules write to standard output; library code returns results or logs."""
    pattern = re.compile(r"(?<![\w.])print\(|sys\.stdout\.write")
    offenders = []
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(PACKAGE)
        if rel.parts[0] == "report" or rel.name.startswith("cli"):
            continue
        offenders += [
            f"{rel}:{i}"
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line.split("#")[0])
        ]
    assert offenders == []


def test_one_json_printer():
    """No CLI module formats its own --json document: they all go through report.jsonout."""
    copies = [
        f.name for f in PACKAGE.glob("cli*.py") if "json.dumps(" in f.read_text(encoding="utf-8")
    ]
    assert copies == []
