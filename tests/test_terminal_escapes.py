"""Names from files other people wrote reach the terminal with their control characters escaped,
and a name is never read as rich markup: the estimate table, the export notes and the one-line
errors show ``\\x1b`` as text, and a name holding ``[/]`` prints instead of crashing the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import TINY_LLAMA, run

LLAMA = TINY_LLAMA
#: clear the screen (ESC and C1 CSI), set the window title, reverse the text's direction, and markup
NAME = "evil\x1b[2J\x1b]0;pwned\x07\x9b2J\u202e[/][bold]x"
PLAN = ["--gpu", "a100-80gb", "--gpus", "8", "--tokens", "1B"]


def _config(tmp_path: Path, **changes: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "_name_or_path": NAME, **changes}), encoding="utf-8")
    return str(path)


def _no_controls(text: str) -> None:
    bad = [c for c in text if not c.isprintable() and c not in "\n"]
    assert not bad, f"raw control characters reach the terminal: {bad!r}"


def test_a_name_with_escape_sequences_prints_escaped_in_the_estimate_table(capsys, tmp_path):
    code, out, err = run(capsys, "estimate", "--model", _config(tmp_path), *PLAN)
    assert code == 0, err
    _no_controls(out)
    _no_controls(err)
    assert "evil\\x1b[2J\\x1b]0;pwned\\x07\\x9b2J\\u202e[/][bold]x" in out  # as text, brackets kept


def test_a_name_with_escape_sequences_prints_escaped_in_export_notes(capsys, tmp_path):
    code, out, err = run(
        capsys, "export", "--to", "torchtitan", "estimate", "--model", _config(tmp_path), *PLAN
    )
    assert code == 0, err
    _no_controls(out)
    _no_controls(err)


@pytest.mark.parametrize("verb", ["estimate", "export"])
def test_an_error_naming_a_hostile_name_is_one_escaped_line(capsys, tmp_path, verb):
    cfg = _config(tmp_path, num_hidden_layers=100_000)  # fits no layout: the error names the model
    args = ["estimate", "--model", cfg, *PLAN]
    code, out, err = run(
        capsys, *(["export", "--to", "megatron", *args] if verb == "export" else args)
    )
    assert code == 2 and out == ""
    assert err.startswith("trilemma: error: ") and err.count("\n") == 1
    assert "no layout of evil\\x1b[2J" in err
    _no_controls(err)
