"""`trilemma fit` and `validate --data` on very large files: bounded memory, the same answer.

- Above ``SCREEN_RUNS`` runs the grid and the L-BFGS starts run on a subsample and the best is refined
  on every run; the reference is Hoffmann's procedure on every run (the screening switched off).
- Size grouping is vectorised; the reference is the per-run loop it replaced, written out here.
- A file over the limits is refused in one line with the limit (exit 2).
- Slow: 10^6 synthetic runs from a known law, fitted by `trilemma fit` in a child process: the known
  constants come back and the child's peak RSS stays under 1 GB (timings: benchmarks/fit_scale.py).
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from clitools import run

import trilemma.quality.fit_procedure as fit_mod
import trilemma.quality.runs as runs_mod
import trilemma.validate.schema as schema_mod
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.runs import SIZE_GROUPING, size_groups

TRUTH = {
    "E": 1.82,
    "A": 482.01,
    "B": 2085.43,
    "alpha": 0.3478,
    "beta": 0.3658,
}  # Besiroglu 2024 refit


def synthetic(rows: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = np.exp(rng.uniform(np.log(1e7), np.log(1e10), rows))
    d = np.exp(rng.uniform(np.log(1e9), np.log(1e12), rows))
    return n, d, chinchilla_loss(TRUTH, n, d) * np.exp(rng.normal(0.0, 0.01, rows))


def test_size_groups_match_the_per_run_loop():
    rng = np.random.default_rng(0)
    n = np.concatenate([np.exp(rng.uniform(10, 20, 3000)), np.repeat([1e8, 1.01e8, 1.03e8], 5)])
    ref = np.empty(
        len(n), dtype=int
    )  # the rule: a size starts at the first N more than 2% above its start
    g, last = -1, -math.inf
    for i in np.argsort(n):
        if n[i] > last * (1 + SIZE_GROUPING):
            g, last = g + 1, n[i]
        ref[i] = g
    assert np.array_equal(size_groups(n), ref)


def test_screened_starts_reach_hoffmanns_optimum(monkeypatch):
    """3000 runs: screened on 2048 then refined, vs every start on every run — the same minimum."""
    n, d, loss = synthetic(3000, seed=5)
    screened = fit_mod.fit_point(n, d, loss)
    assert "screened" in screened.message and screened.converged
    monkeypatch.setattr(fit_mod, "SCREEN_RUNS", 10**9)
    full = fit_mod.fit_point(n, d, loss)
    assert "screened" not in full.message
    for k in TRUTH:
        assert screened.constants[k] == pytest.approx(full.constants[k], rel=1e-5), k
    assert screened.objective <= full.objective * (1 + 1e-9)


def test_subsampled_bootstrap_is_centred_and_shrinks():
    """m-out-of-n: the bootstrap of 20,000 runs spreads about sqrt(2048/20000) as wide as one of 2048."""
    n, d, loss = synthetic(20_000, seed=7)
    p = fit_mod.fit_point(n, d, loss)
    big, _ = fit_mod.bootstrap(n, d, loss, p, n_boot=40, seed=1)
    small_idx = np.random.default_rng(3).choice(len(n), 2048, replace=False)
    ps = fit_mod.fit_point(n[small_idx], d[small_idx], loss[small_idx])
    small, _ = fit_mod.bootstrap(n[small_idx], d[small_idx], loss[small_idx], ps, n_boot=40, seed=1)
    ratio = big[:, 3].std() / small[:, 3].std()  # alpha
    assert 0.5 * math.sqrt(2048 / 20_000) < ratio < 2 * math.sqrt(2048 / 20_000)
    assert abs(np.median(big[:, 3]) - p.constants["alpha"]) < 3 * big[:, 3].std()


def _csv(path: Path, rows: int) -> Path:
    n, d, loss = synthetic(rows)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["N", "D", "loss"])
        w.writerows(zip(n, d, loss))
    return path


def test_too_many_runs_refused_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(runs_mod, "MAX_RUNS", 100)
    monkeypatch.setattr(runs_mod, "CHUNK", 64)
    code, out, err = run(capsys, "fit", str(_csv(tmp_path / "big.csv", 150)), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "runs" in err and "at most 100 runs" in err and "Traceback" not in err


def test_a_bad_cell_past_the_first_chunk_names_its_row(tmp_path, monkeypatch):
    monkeypatch.setattr(runs_mod, "CHUNK", 64)
    p = _csv(tmp_path / "runs.csv", 200)
    lines = p.read_text().splitlines()
    lines[151] = lines[151].rsplit(",", 1)[0] + ",oops"  # data row 151
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception) as e:
        runs_mod.read_runs(p)
    assert "row 151 has 'oops'" in str(e.value)


def test_validate_data_over_the_limit_refused_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(schema_mod, "MAX_DATA_ROWS", 10)
    p = tmp_path / "many.csv"
    p.write_text("metric,reported,gpu,n_gpus\n" + "mfu,0.4,h100-sxm,8\n" * 11)
    code, out, err = run(capsys, "validate", "--data", str(p), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--data" in err and "at most 10 rows" in err


@pytest.mark.slow
def test_a_million_runs_fit_under_1gb_and_recover_the_law(tmp_path):
    p = _csv(tmp_path / "million.csv", 1_000_000)
    code = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            sys.executable,
            "-m",
            "trilemma.cli",
            "fit",
            str(p),
            "--json",
            "--out",
            str(tmp_path / "law.toml"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    peak_kib = int(r.stderr.strip().splitlines()[-1])  # Linux: ru_maxrss in KiB
    assert peak_kib * 1024 < 2**30
    doc = json.loads(r.stdout)
    for k, tol in (("E", 0.01), ("alpha", 0.01), ("beta", 0.01), ("A", 0.05), ("B", 0.05)):
        assert doc["law"][k] == pytest.approx(TRUTH[k], rel=tol), k
        lo, hi = doc["ci"][k]
        assert lo <= doc["law"][k] <= hi
    assert (
        doc["convergence"]["converged"]
        and doc["runs"] == []
        and doc["goodness_of_fit"]["runs"] == 1_000_000
    )
