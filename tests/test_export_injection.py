"""Exported files are safe to run whatever a config.json says: text from a file someone else wrote
(its ``_name_or_path``, the folder's name) reaches the engines' files only as escaped text.

Each generated file is read back by its language's own parser and compared with the same export of
the same model under a plain name: the shell script differs only in comment lines (and ``bash -n``
accepts it), the TOML parses to the same tables with the name inside one string, the Python modules
have the same statements (``ast``) with the name inside their docstrings, the JSON files are equal.
A real run of the Megatron-LM script, with a stand-in ``torchrun`` on PATH, must not run the command
the name carries.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import tomllib
from clitools import TINY_LLAMA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trilemma.api import estimate
from trilemma.export import ENGINES, export
from trilemma.text import printable

LLAMA = TINY_LLAMA

#: names that end a shell or TOML comment, close a Python docstring, or drive the terminal
PAYLOADS = [
    "evil\ntouch {marker}\n#",
    "evil\rtouch {marker}\r",
    'evil"""\nimport os; os.system("touch {marker}")\n"""',
    "evil\\\ntouch {marker}",
    "evil\u2028touch {marker}\x0c\x0b\x1c\x85",
    "evil$(touch {marker})`touch {marker}`",
    "evil\x1b[2J\x1b]0;title\x07\u202e",
    "evil'''\n'''\"\"\"\\",
    "evil\ud800\x7f\x9b2J",
]


def _config(folder: Path, name: str, **values: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps({**LLAMA, **values, "_name_or_path": name}), encoding="utf-8")
    return path


def _export(folder: Path, name: str, engine: str, **values: object) -> dict[str, str]:
    est = estimate(str(_config(folder, name, **values)), "a100-80gb", 8, tokens=1e9)
    assert est.model.name == name.strip(), (
        "the name reaches the plan as written (escaped only on output)"
    )
    return export(est, engine).files


def _without_docstrings(tree: ast.Module) -> tuple[str, list[str]]:
    """The module's statements with every docstring emptied, and the docstrings' values."""
    docs = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docs.append(value.value)
                value.value = ""
    return ast.dump(tree), docs


def check_same_program(hostile: dict[str, str], plain: dict[str, str], name: str) -> None:
    """Each of ``hostile``'s files says what ``plain``'s says, the name held as text only."""
    assert hostile.keys() == plain.keys()
    for file, text in hostile.items():
        base = plain[file]
        if file.endswith(".json"):
            assert json.loads(text) == json.loads(base)
        elif file.endswith(".toml"):
            got, want = tomllib.loads(text), tomllib.loads(base)
            assert printable(name) in got["job"].pop("description")
            want["job"].pop("description")
            assert got == want
            _only_comments_differ(text, base, file, "description = ")  # its value is checked above
        elif file.endswith(".py"):
            got_tree, got_docs = _without_docstrings(ast.parse(text))
            want_tree, _ = _without_docstrings(ast.parse(base))
            assert got_tree == want_tree, f"{file}: a statement was injected"
            assert any(name in d for d in got_docs), f"{file}: the docstring keeps the name"
        elif file.endswith(".sh"):
            _only_comments_differ(text, base, file)
            subprocess.run(["bash", "-n"], input=text, text=True, check=True)
        else:
            pytest.fail(f"{file}: a file kind this test does not read")


def _only_comments_differ(text: str, base: str, file: str, parsed: str = "# ") -> None:
    """Lines that differ are comments (or, in TOML, the one string already read back by the parser)."""
    lines, base_lines = text.split("\n"), base.split("\n")
    assert len(lines) == len(base_lines), f"{file}: the name added lines"
    for got, want in zip(lines, base_lines, strict=True):
        if got != want:
            assert got.startswith(("# ", parsed)) and want[:2] == got[:2], f"{file}: {got!r}"
            assert all(c.isprintable() for c in got), f"{file}: {got!r}"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_hostile_config_name_injects_nothing(engine, payload, tmp_path):
    name = payload.format(marker=tmp_path / "pwned")
    hostile = _export(tmp_path / "hostile", name, engine)
    plain = _export(tmp_path / "plain", "plain", engine)
    check_same_program(hostile, plain, name.strip())


def _stand_in(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_exported_megatron_script_runs_no_injected_command(payload, tmp_path):
    marker = tmp_path / "pwned"
    script = _export(tmp_path / "cfg", payload.format(marker=marker), "megatron")[
        "train_megatron.sh"
    ]
    (tmp_path / "train_megatron.sh").write_text(script, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in(bin_dir, "torchrun", f'echo "$@" > {tmp_path / "torchrun.args"}')
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "DATA_PATH": "data",
        "TOKENIZER": "tok",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", "train_megatron.sh"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "pretrain_gpt.py" in (tmp_path / "torchrun.args").read_text()
    assert not marker.exists(), "the script ran the command the config's name carried"
    assert done.stdout == "" and done.stderr == ""


#: every character class a name can hold: controls, quotes, backslashes, separators, astral
NAMES = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40
).filter(lambda s: s.strip() and not s.strip().startswith(("/", ".", "~")) and ":" not in s)


@pytest.mark.parametrize("engine", ENGINES)
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=NAMES, layers=st.integers(2, 6), vocab=st.integers(1000, 70000))
def test_generated_names_and_values_through_every_exporter(engine, name, layers, vocab, tmp_path):
    folder = tmp_path / f"n{abs(hash((name, layers, vocab)))}"
    values = {"num_hidden_layers": layers, "vocab_size": vocab}
    hostile = _export(folder / "h", name, engine, **values)
    plain = _export(folder / "p", "plain", engine, **values)
    check_same_program(hostile, plain, name.strip())


def test_a_folder_name_reaches_the_files_escaped(tmp_path):
    """Without a hub name the model is named after its folder, which is text too."""
    folder = tmp_path / "evil\ntouch x"
    cfg = _config(folder, "")
    est = estimate(str(cfg), "a100-80gb", 8, tokens=1e9)
    assert "\n" in est.model.name
    script = export(est, "megatron").files["train_megatron.sh"]
    assert "\ntouch x" not in script and "evil\\ntouch x" in script
    assert os.path.basename(str(folder)) == est.model.name
