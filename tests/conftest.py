"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest


@pytest.fixture
def exact_law() -> SimpleNamespace:
    """Runs drawn exactly from Hoffmann et al. 2022's law (App. D.2; E 1.69, A 406.4, B 410.7, α 0.34,
    β 0.28): four sizes of 100M-800M at 5-40 tokens a parameter, and a point 10x their compute with the
    law's own loss there (``truth``)."""
    import numpy as np

    law = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}

    def at(n, d):
        return law["E"] + law["A"] / n ** law["alpha"] + law["B"] / d ** law["beta"]

    n = np.repeat([1e8, 2e8, 4e8, 8e8], 4)
    d = n * np.tile([5.0, 10.0, 20.0, 40.0], 4)
    n_at, d_at = np.array([3e9]), np.array([6e10])
    return SimpleNamespace(n=n, d=d, loss=at(n, d), n_at=n_at, d_at=d_at, truth=at(n_at, d_at))


@pytest.fixture
def quality_app(monkeypatch):
    """The real `trilemma` app (which registers `fit` and `optimal`) on a wide terminal."""
    from trilemma import cli

    monkeypatch.setenv("COLUMNS", "250")
    return cli.app


@pytest.fixture(scope="session")
def tiny_ladder(tmp_path_factory):
    """The CI ladder as a user meets it, trained once for the session: a real `trilemma ladder --tiny`
    Ctrl-C'd after two runs are recorded, then the same command (with --plot) completes it — 10 real
    trainings. The ladder's end-to-end test checks it; the Ray backend's test compares its own ladder with
    this local one (same seeds, same losses)."""
    pytest.importorskip("torch")
    from clitools import ladder_cli

    from trilemma.ladder.records import read_records

    out = tmp_path_factory.mktemp("tiny-ladder") / "lad"
    png = out.parent / "ladder.png"
    # its own configuration folder, as a fresh machine's: a session fixture is set up before the tests'
    # own (function-scoped) TRILEMMA_CONFIG_DIR, and the `local` profile the ladder measures and saves
    # must not land in the user's (where a busy machine's measurement broke every later test)
    config = tmp_path_factory.mktemp("tiny-ladder-config")
    cmd = [sys.executable, "-m", "trilemma.cli", "ladder", "--tiny", "--out", str(out), "--json"]
    # a terminal's Ctrl-C: make sure the child does not inherit an ignored SIGINT
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TRILEMMA_CONFIG_DIR": str(config)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # noqa: PLW1509
    runs = out / "runs.jsonl"
    deadline = time.time() + 90
    while time.time() < deadline and (not runs.exists() or runs.read_bytes().count(b"\n") < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    before = read_records(runs)
    whole_lines = runs.read_bytes().endswith(b"\n")  # after the Ctrl-C, before the resume
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRILEMMA_CONFIG_DIR", str(config))
        done = ladder_cli(["--tiny", "--out", str(out), "--plot", str(png), "--json"])
    return SimpleNamespace(
        out=out, png=png, runs=runs, returncode=proc.returncode, stdout=stdout, stderr=stderr,
        before=before, whole_lines=whole_lines, result=done,
    )  # fmt: skip
