"""The cluster's own reliability figures (--failure-rate, --restart, --storage-bw; ClusterSpec's
failures_per_gpu_hour, restart_s, storage_write_bytes_per_s) reach the goodput of estimate, solve, the
scenario files, the Python API and the web API, and are checked against a hand calculation of the failure
model (trilemma.estimate.goodput's docstring: Daly's interval, the expected segment time exact for
exponential failures)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from trilemma.api import estimate
from trilemma.cli import app, main

runner = CliRunner()
#: Llama 2 7B's parameters (huggingface.co/meta-llama/Llama-2-7b-hf, tests/test_params.py)
LLAMA2_7B = 6_738_415_616
#: a bf16 AdamW checkpoint: bf16 weights 2 + fp32 master 4 + two fp32 moments 8 bytes per parameter
CHECKPOINT_BYTES_PER_PARAM = 14


def _json(*args: str) -> dict:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_estimate_runs_at_the_given_failure_rate_restart_and_storage_by_hand():
    d = _json(
        "estimate",
        "--model",
        "llama2-7b",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "512",
        "--tokens",
        "1T",
        "--failure-rate",
        "1e-4",
        "--restart",
        "30min",
        "--storage-bw",
        "100GB/s",
    )
    rel = d["time"]["reliability"]
    assert rel["inputs"] == pytest.approx(
        {"failures_per_gpu_hour": 1e-4, "restart_s": 1800.0, "write_bytes_per_s": 100e9}
    )
    # by hand: MTBF = 1 h / (512 GPUs × 1e-4), the whole job's 14 bytes per parameter at 100 GB/s
    m = 3600 / (512 * 1e-4)
    write = CHECKPOINT_BYTES_PER_PARAM * LLAMA2_7B / 100e9
    assert rel["mtbf_s"] == pytest.approx(m, rel=1e-12)
    assert rel["checkpoint_write_s"] == pytest.approx(write, rel=1e-12)
    # Daly 2006: τ = √(2δM)·[1 + ⅓√(δ/2M) + ⅑·δ/2M] − δ
    x = write / (2 * m)
    tau = math.sqrt(2 * write * m) * (1 + math.sqrt(x) / 3 + x / 9) - write
    assert rel["checkpoint_interval_s"] == pytest.approx(tau, rel=1e-12)
    # a segment of τ work + δ write: E = M·e^{R/M}·(e^{(τ+δ)/M} − 1); goodput τ / E
    expected = m * math.exp(1800 / m) * math.expm1((tau + write) / m)
    assert rel["goodput"] == pytest.approx(tau / expected, rel=1e-9)
    t = d["time"]
    assert t["goodput"] == pytest.approx(rel["goodput"] * t["other_share"], rel=1e-12)
    assert t["total_s"] == pytest.approx(t["busy_s"] / t["goodput"], rel=1e-12)


def test_each_figure_moves_goodput_the_way_it_must():
    """More failures, longer restarts and slower storage each lose time; the defaults sit between."""

    def g(**cluster: float) -> float:
        return estimate("llama2-70b", "h100-sxm", 4096, 2e12, cluster=cluster).time.reliability[
            "goodput"
        ]

    base = g()
    assert g(failures_per_gpu_hour=1e-4) < base < g(failures_per_gpu_hour=1e-6)
    assert g(restart_s=3600.0) < base < g(restart_s=60.0)
    assert g(storage_write_bytes_per_s=1e9) < base < g(storage_write_bytes_per_s=1e14)


def test_defaults_are_reliability_tomls():
    d = _json("estimate")
    inputs = d["time"]["reliability"]["inputs"]
    # Llama 3 §3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs; 600 s restarts; 2 TB/s over 16,384
    assert inputs["failures_per_gpu_hour"] == pytest.approx(419 / (16384 * 54 * 24))
    assert inputs["restart_s"] == 600.0
    assert inputs["write_bytes_per_s"] == pytest.approx(2048 * 2e12 / 16384)


def test_solve_plans_with_the_clusters_figures():
    """solve's goodput uses them (a less reliable cluster buys fewer tokens on the same pins), and its
    optimum's estimate carries them."""
    args = (
        "solve",
        "--model",
        "llama2-13b",
        "--gpu",
        "a100-80gb",
        "--budget",
        "$500k",
        "--deadline",
        "30d",
    )
    plain = _json(*args)
    worse = _json(*args, "--failure-rate", "3e-4", "--restart", "2h", "--storage-bw", "20GB/s")
    inputs = worse["optimum"]["time"]["reliability"]["inputs"]
    assert inputs == pytest.approx(
        {"failures_per_gpu_hour": 3e-4, "restart_s": 7200.0, "write_bytes_per_s": 20e9}
    )
    assert worse["optimum"]["time"]["goodput"] < plain["optimum"]["time"]["goodput"]
    assert worse["optimum"]["batch"]["tokens"] < plain["optimum"]["batch"]["tokens"]


def test_a_scenario_file_takes_them(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(
        'model = "llama2-7b"\ngpu = "a100-80gb"\nbudget = "$200k"\ndeadline = "14d"\n'
        'failure-rate = 2e-4\nrestart = "1h"\nstorage-bw = "50GB/s"\n'
    )
    inputs = _json("solve", str(f))["optimum"]["time"]["reliability"]["inputs"]
    assert inputs == pytest.approx(
        {"failures_per_gpu_hour": 2e-4, "restart_s": 3600.0, "write_bytes_per_s": 50e9}
    )


@pytest.mark.parametrize("verb", ["estimate", "solve"])
@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--failure-rate", "0", "above 0 and at most 1"),
        ("--failure-rate", "-1e-5", "above 0 and at most 1"),
        ("--failure-rate", "2", "above 0 and at most 1"),
        ("--failure-rate", "often", "above 0 and at most 1"),
        ("--restart", "0", "a positive duration"),
        ("--restart", "8d", "at most 7 days"),
        ("--restart", "soon", "a duration such as"),
        ("--storage-bw", "0", "a positive, finite bandwidth"),
        ("--storage-bw", "2PB/s", "from 1 MB/s to 1 PB/s"),
    ],
)
def test_bad_values_are_refused_in_one_line(verb, flag, value, expected, capsys):
    extra = ["--budget", "$1M", "--deadline", "30d"] if verb == "solve" else []
    assert main([verb, *extra, flag, value]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert (
        len(lines) == 1
        and lines[0].startswith(f"trilemma: error: {flag[2:]}: ")
        and "is not allowed" in lines[0]
        and expected in lines[0]
    )


def test_the_python_api_names_the_field():
    from trilemma.errors import InputError

    with pytest.raises(InputError, match="^failure-rate: -1 is not allowed"):
        estimate("llama2-7b", "a100-80gb", 64, 1e11, cluster={"failures_per_gpu_hour": -1.0})
    from trilemma.solve import solve

    with pytest.raises(InputError, match="^restart: 0 is not allowed"):
        solve(budget="$1M", deadline="30d", restart_s=0.0)


def test_the_web_api_takes_them():
    from fastapi.testclient import TestClient

    from trilemma.web.app import create_app

    client = TestClient(create_app())
    r = client.post(
        "/api/estimate", json={"failure-rate": "5e-5", "restart": "30min", "storage-bw": "100GB/s"}
    )
    assert r.status_code == 200
    assert r.json()["time"]["reliability"]["inputs"] == pytest.approx(
        {"failures_per_gpu_hour": 5e-5, "restart_s": 1800.0, "write_bytes_per_s": 100e9}
    )
    bad = client.post("/api/estimate", json={"failure-rate": "-1"})
    assert bad.status_code == 422 and bad.json()["field"] == "failure-rate"
