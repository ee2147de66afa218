"""Hostile files: inputs that are not regular files, too large, or hold integers Python will not convert;
outputs that would overwrite an input or a file the command line did not name; writes that fail half-way;
concurrent saves of one profile.

Cases run the CLI in-process under the hostile corpus's contract (exit 2: one line on stderr naming
the field; an alarm fails a case that hangs), or in a child process where a regression
would eat memory, or where a file-size limit (RLIMIT_FSIZE: a write past it fails with EFBIG, as one on a
full disk fails with ENOSPC) makes a real write fail part-way.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from clitools import save_stated_cpu_profile, time_limit
from test_hostile_corpus import CASE_LIMIT_S, CSV_OK, FILES, LAW_OK, LLAMA, SCENARIO_OK

from trilemma.cli import main

HUGE_INT = "9" * 5000  # over Python's 4,300-digit limit on converting text to int
CHILD = "import sys; from trilemma.cli import main; sys.exit(main(sys.argv[1:]))"
VAL_OK = FILES["val_ok.csv"]
#: a law file `--law` reads (with the `data` key the corpus's base law may lack)
LAW = (
    LAW_OK
    if "\ndata = " in LAW_OK
    else LAW_OK.replace("[constants]", 'data = "a corpus"\n[constants]')
)
FIT = ["--bootstrap", "2", "--starts", "1"]


def _run_refused(capsys, args: list[str], names: tuple[str, ...], *needles: str) -> str:
    """``trilemma ARGS --json`` in-process under an alarm; exit 2 with one line naming one of ``names``
    and holding each of ``needles``; that line."""
    capsys.readouterr()
    with time_limit(CASE_LIMIT_S, f"{args} blocked or read without end"):
        code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, (args, code, err[-2000:])
    assert err.startswith("trilemma: error: ") and any(n in err for n in names), err
    assert err.count("is not allowed") == 1, f"a refusal wrapped in another: {err}"
    for n in needles:
        assert n in err, err
    return err


def _child(code: str, args: list[str], limit: tuple[int, int]) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` under one resource limit, e.g. (RLIMIT_FSIZE, bytes); CHILD is the CLI."""

    def setup() -> None:
        resource.setrlimit(limit[0], (limit[1], limit[1]))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the size limit: EFBIG, not a kill

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=setup,
        env=env,
    )


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# ------------------------------------------------------------------ inputs that are not regular files


@pytest.mark.parametrize(
    "verb, name, names",
    [
        (["solve", "{f}", "--deadline", "1d"], "s.toml", ("scenario",)),
        (["validate", "--data", "{f}"], "rows.csv", ("data",)),
    ],
)
def test_fifo_input_is_refused_not_read(tmp_path, capsys, verb, name, names):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    release = threading.Timer(CASE_LIMIT_S + 2, _release, [fifo])  # a regression: unblock it
    release.start()
    try:
        args = [a.replace("{f}", str(fifo)) for a in verb]
        _run_refused(capsys, args, names, "regular file", "FIFO")
    finally:
        release.cancel()


def _release(fifo: Path) -> None:
    """Open ``fifo`` for writing and close it: a reader blocked on it sees its end."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader blocked on it
        pass


def test_endless_device_input_is_refused_not_read():
    """`solve /dev/zero` read without end (2 GB in seconds); a child with 3 GiB of address space."""
    proc = _child(CHILD, ["solve", "/dev/zero", "--json"], (resource.RLIMIT_AS, 3 << 30))
    _one_line(proc, "scenario", "regular file", "character device")


def _one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    err = proc.stderr
    assert proc.returncode == 2 and err.count("\n") == 1, (proc.returncode, err[-3000:])
    assert err.startswith("trilemma: error: ") and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def test_oversize_scenario_is_refused_unread(tmp_path, capsys):
    f = _write(tmp_path, "big.toml", SCENARIO_OK + "#" + "x" * (1 << 20) + "\n")
    _run_refused(capsys, ["solve", str(f)], ("scenario",), "at most 1 MiB")


# ------------------------------------------------------------------ integers past the digit limit


@pytest.mark.parametrize(
    "name, text, args, names",
    [
        (
            "config.json",
            json.dumps(LLAMA)[:-1] + f', "pad_token_id": {HUGE_INT}}}',
            ["estimate", "--model", "{f}", "--gpus", "8", "--tokens", "1B"],
            ("config.json",),
        ),
        ("s.toml", SCENARIO_OK + f"max-gpus = {HUGE_INT}\n", ["solve", "{f}"], ("scenario",)),
        (
            "law.toml",
            LAW + f"[fit]\nn = {HUGE_INT}\n",
            ["optimal", "--flops", "1e23", "--law", "{f}"],
            ("law",),
        ),
        (
            "runs.jsonl",
            '{"N": 1e8, "D": 2e9, "loss": 3.0}\n' + f'{{"N": {HUGE_INT}, "D": 2e9, "loss": 3.0}}\n',
            ["fit", "{f}", *FIT, "--out", "{d}/x.law.toml"],
            ("runs",),
        ),
    ],
)
def test_integer_past_digit_limit_is_one_line(tmp_path, capsys, name, text, args, names):
    f = _write(tmp_path, name, text)
    args = [a.replace("{f}", str(f)).replace("{d}", str(tmp_path)) for a in args]
    _run_refused(capsys, args, names, "4,300 digits")


# ------------------------------------------------------------------ outputs no one named, or over an input


@pytest.mark.parametrize("key", ["frontier", "plot"])
def test_scenario_output_key_is_refused_and_writes_nothing(tmp_path, capsys, key):
    victim = _write(tmp_path, f"victim.{'csv' if key == 'frontier' else 'png'}", "precious\n")
    f = _write(tmp_path, "s.toml", SCENARIO_OK + f'{key} = "{victim}"\n')
    _run_refused(capsys, ["solve", str(f)], (key,), "command line")
    assert victim.read_text() == "precious\n"


def _inputs(tmp_path: Path) -> dict[str, Path]:
    return {
        "runs": _write(tmp_path, "runs.csv", CSV_OK),
        "data": _write(tmp_path, "rows.csv", VAL_OK),
        "scenario": _write(tmp_path, "s.toml", SCENARIO_OK),
        "law": _write(tmp_path, "law.toml", LAW),
        "config": _write(tmp_path, "ds_config.json", json.dumps(LLAMA)),
    }


@pytest.mark.parametrize(
    "args, victim, names",
    [
        (["fit", "{runs}", *FIT, "--out", "{runs}"], "runs", ("out",)),
        (["validate", "--data", "{data}", "--csv", "{data}"], "data", ("csv",)),
        (["solve", "{scenario}", "--frontier", "{scenario}"], "scenario", ("frontier",)),
        (["solve", "{scenario}", "--law", "{law}", "--frontier", "{law}"], "law", ("frontier",)),
        (
            [
                "export",
                "--to",
                "deepspeed",
                "--out",
                "{d}",
                "estimate",
                "--model",
                "{config}",
                "--gpus",
                "8",
                "--tokens",
                "1B",
            ],
            "config",
            ("out",),
        ),
    ],
)
def test_output_onto_an_input_is_refused(tmp_path, capsys, args, victim, names):
    files = _inputs(tmp_path)
    before = files[victim].read_bytes()
    args = [a.format(d=tmp_path, **files) if "{" in a else a for a in args]
    _run_refused(capsys, args, names, "input")
    assert files[victim].read_bytes() == before


# ------------------------------------------------------------------ failed writes


def test_failed_law_write_leaves_the_old_file(tmp_path):
    """A write that fails part-way (here past RLIMIT_FSIZE) leaves the existing law file whole."""
    runs, law = _write(tmp_path, "runs.csv", CSV_OK), _write(tmp_path, "old.law.toml", LAW_OK)
    proc = _child(CHILD, ["fit", str(runs), *FIT, "--out", str(law)], (resource.RLIMIT_FSIZE, 200))
    _one_line(proc, str(law), "File too large")
    assert law.read_text() == LAW_OK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.law.toml", "runs.csv"]


def test_full_disk_law_write_is_one_line_and_leaves_the_old_file(tmp_path, capsys, monkeypatch):
    runs, law = _write(tmp_path, "runs.csv", CSV_OK), _write(tmp_path, "old.law.toml", LAW_OK)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    _run_refused(capsys, ["fit", str(runs), *FIT, "--out", str(law)], ("out",), "No space left")
    assert law.read_text() == LAW_OK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.law.toml", "runs.csv"]


APPEND = """
import sys
from types import SimpleNamespace
from trilemma.errors import InputError
path, which = sys.argv[1], sys.argv[2]
rec = {"schema": "trilemma.ladder/1", "key": "k", "role": "r", "N": 1, "D": 1, "loss": 1.0,
       "pad": "p" * 4000}
try:
    if which == "probe":
        from trilemma.probe.result import append_record
        append_record(path, SimpleNamespace(to_dict=lambda: rec))
    else:
        from trilemma.ladder.records import append_record
        append_record(path, rec)
except InputError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize("which", ["probe", "ladder"])
def test_failed_record_append_leaves_no_partial_line(tmp_path, which):
    records = _write(tmp_path, "runs.jsonl", '{"schema": "x"}\n' * 20)
    before = records.read_bytes()
    proc = _child(APPEND, [str(records), which], (resource.RLIMIT_FSIZE, 2000))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.startswith("refused:") and "File too large" in proc.stdout, proc.stdout
    assert proc.stdout.count("\n") == 1 and str(records) in proc.stdout
    assert records.read_bytes() == before


# ------------------------------------------------------------------ concurrent saves


def test_concurrent_profile_saves_never_collide(tmp_path, monkeypatch):
    """Eight threads each save the `local` profile 40 times: no save fails, none leaves a temp file."""
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(tmp_path))
    failures: list[BaseException] = []

    def saves() -> None:
        for _ in range(40):
            try:
                save_stated_cpu_profile()
            except BaseException as exc:  # noqa: BLE001 - collected, asserted below
                failures.append(exc)

    threads = [threading.Thread(target=saves) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    folder = tmp_path / "hardware"
    assert [p.name for p in folder.iterdir()] == ["local.json"]
    assert json.loads((folder / "local.json").read_text())["hardware"]["name"] == "local"
