"""The same plan on owned hardware beside the rented price (``estimate --own``): a hand calculation
of capital and energy, capital per system, and refusals naming the flag."""

from __future__ import annotations

import json

import pytest

from trilemma.api import estimate
from trilemma.cli import main
from trilemma.errors import InputError

PLAN = dict(layout={"tp": 1, "pp": 1}, stack="megatron-core")
OWN = {"capital": "$30k", "years": 4, "usd_per_kwh": 0.10, "utilisation": 0.6}


def test_owned_cost_by_hand():
    e = estimate("llama2-7b", "h100-sxm", 64, 1e12, own=OWN, **PLAN)
    o, t, co = e.owned, e.time, e.cost
    # $30,000 per GPU over 4 years of 365.25 days at 60% busy: 30000 / (4 × 8766 h × 0.6)
    per_hour = 30000 / (4 * 8766 * 0.6)
    assert per_hour == pytest.approx(1.42596, rel=1e-5)
    assert o["capital_usd_per_gpu_hour"] == pytest.approx(per_hour, rel=1e-9)
    assert o["capital_usd"] == pytest.approx(t.gpu_hours * per_hour, rel=1e-9)
    assert o["energy_usd"] == pytest.approx(co.energy_kwh * 0.10, rel=1e-9)
    assert o["usd"] == pytest.approx(o["capital_usd"] + o["energy_usd"], rel=1e-12)
    # beside the rented price of the same run, its band from the run's own bands
    assert o["rented_usd"] == co.usd
    assert o["usd_low"] < o["usd"] < o["usd_high"]
    assert o["usd_high"] == pytest.approx(
        t.gpu_hours_high * per_hour + co.energy_kwh_high * 0.10, rel=1e-9
    )


def test_capital_per_system_is_shared_by_its_gpus():
    per_gpu = estimate("llama2-7b", "h100-sxm", 64, 1e12, own=OWN, **PLAN).owned
    node = estimate(
        "llama2-7b", "h100-sxm", 64, 1e12, own={**OWN, "capital": "$240k/node"}, **PLAN
    ).owned
    # an 8-GPU system at $240k is $30k per GPU
    assert node["inputs"]["capital_usd_per_gpu"] == pytest.approx(30000)
    assert node["usd"] == pytest.approx(per_gpu["usd"], rel=1e-12)


def test_cli_prints_owned_and_rented(capsys):
    argv = ["estimate", "-m", "llama2-7b", "-g", "h100", "-n", "64", "--tokens", "1T", "--own",
            "$30k", "--amortise", "4", "--site-kwh", "0.1", "--utilisation", "0.6"]  # fmt: skip
    assert main(argv) in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "on owned hardware" in out and "rented $" in out and "$1.43/GPU-hour" in out
    assert main([*argv, "--json"]) in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["owned"]["rented_usd"] == doc["cost"]["usd"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--own", "$30k"], "amortise"),
        (["--utilisation", "0.5"], "utilisation"),
        (["--own", "$30k/rack", "--amortise", "4", "--site-kwh", "0.1", "--utilisation", "1"], "own"),
        (["--own", "$30k", "--amortise", "4", "--site-kwh", "0.1", "--utilisation", "1.5"], "utilisation"),
    ],
)  # fmt: skip
def test_refusals_name_the_flag(capsys, extra, field):
    argv = ["estimate", "-m", "llama2-7b", "-g", "h100", "-n", "8", "--tokens", "1T", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"error: {field}:" in err


def test_python_api_refuses_the_same():
    with pytest.raises(InputError, match="site-kwh"):
        estimate("llama2-7b", "h100-sxm", 8, 1e10, own={**OWN, "usd_per_kwh": None})


def test_web_api_owned_and_its_refusal():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trilemma.web import app as web

    body = {"model": "llama2-7b", "gpu": "h100-sxm", "gpus": 8, "tokens": "10B", "own": "$30k"}
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        ok = c.post(
            "/api/estimate", json={**body, "amortise": 4, "site_kwh": 0.1, "utilisation": 0.6}
        )
        bad = c.post("/api/estimate", json={**body, "amortise": 4, "site_kwh": 0.1})
    assert ok.status_code == 200
    o = ok.json()["owned"]
    assert o["capital_usd_per_gpu_hour"] == pytest.approx(30000 / (4 * 8766 * 0.6))
    assert bad.status_code == 422 and bad.json()["field"] == "utilisation"
