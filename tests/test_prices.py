"""Prices per provider, market and date (presets/prices.toml): every row dated and sourced, the chip
priced at the offer asked for, spot's preemptions in the failure rate (so spot's goodput is lower
than on-demand's for the same plan), stale prices flagged, and bad names refused in one line."""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest

from trilemma.api import estimate
from trilemma.cli import main
from trilemma.errors import InputError
from trilemma.estimate.goodput import defaults
from trilemma.presets import get_hardware, hardware_presets
from trilemma.presets.prices import (
    MARKETS,
    STALE_DAYS,
    offer_for,
    offers,
    price_notes,
    priced_for,
    providers,
    spot_preemptions_per_instance_hour,
)
from trilemma.solve import solve

TODAY = dt.date(2026, 12, 6)
PLAN = dict(layout={"tp": 1, "pp": 1}, stack="megatron-core")


def test_every_offer_is_a_preset_dated_and_sourced():
    names = set(hardware_presets())
    for o in offers():
        assert o.gpu in names and o.market in MARKETS, o
        assert 0 < o.usd_per_gpu_hour < 100 and math.isfinite(o.usd_per_gpu_hour), o
        assert o.day <= TODAY and (o.url or o.via) and o.via and o.product, o
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= set(providers())


def test_spot_rate_is_the_trace_count():
    # skypilot-org/spot-traces preemption/1-node/aws-04-22-2023: 41 + 60 + 44 + 57 preemptions in
    # 55.77 + 105.04 + 140.67 + 129.70 instance-hours of 1-GPU instances
    assert spot_preemptions_per_instance_hour() == pytest.approx(202 / 431.18, rel=1e-3)


def test_offer_is_the_cheapest_of_the_market():
    # silybench-data cost.json (2026-09-25): RunPod H100 SXM 2.69 Community, 3.49 Secure
    assert offer_for("h100-sxm", "runpod", "on-demand").usd_per_gpu_hour == 2.69
    # every provider's H100 SXM spot row: GCP 6.571, AWS 2.4575 (19.66 / 8)
    assert offer_for("h100-sxm", "all", "spot").provider == "aws"
    assert offer_for("h100-sxm", "lambda", "reserved") is None
    assert offer_for("h100-sxm", "all", "reserved").provider == "aws"


def test_estimate_at_an_offer_carries_its_price_date_and_source():
    e = estimate("llama2-7b", "h100-sxm", 8, 1e10, provider="lambda", **PLAN)
    hw = e.cluster.hardware
    assert e.cluster.price == 3.99 and hw.price_provider == "lambda"
    assert hw.price_date == "2026-09-25" and "lambda.ai/pricing" in hw.price_source
    # dollars = GPU-hours × the offer's price
    assert e.cost.usd == pytest.approx(e.time.gpu_hours * 3.99, rel=1e-9)
    assert any("lambda on-demand" in w for w in e.warnings)


def test_spot_goodput_is_lower_than_on_demand_for_the_same_plan():
    od = estimate("llama2-7b", "h100-sxm", 64, 1e11, provider="gcp", **PLAN)
    sp = estimate("llama2-7b", "h100-sxm", 64, 1e11, provider="gcp", market="spot", **PLAN)
    assert od.layout == sp.layout and od.time.step_s == pytest.approx(sp.time.step_s)
    assert sp.time.goodput < od.time.goodput
    # hand calculation: MTBF = 3600 s / (GPUs × failures per GPU-hour), spot's rate the default plus
    # the trace's preemptions per instance-hour over the 8 GPUs of an H100 node (reclaimed whole)
    base = defaults().failures_per_gpu_hour
    assert od.time.reliability["mtbf_s"] == pytest.approx(3600 / (64 * base), rel=1e-6)
    spot = base + spot_preemptions_per_instance_hour() / 8
    assert sp.time.reliability["mtbf_s"] == pytest.approx(3600 / (64 * spot), rel=1e-6)


def test_a_price_over_six_months_old_is_flagged():
    old = priced_for(get_hardware("b200"), "spheron", "spot")  # read 2026-03-19
    new = priced_for(get_hardware("h100-sxm"), "runpod", "on-demand")  # read 2026-09-25
    assert (TODAY - dt.date(2026, 3, 19)).days > STALE_DAYS > (TODAY - dt.date(2026, 9, 25)).days
    assert any("months ago" in n for n in price_notes(old, TODAY))
    assert not any("months ago" in n for n in price_notes(new, TODAY))
    # the preset's own reference price carries no offer note
    assert price_notes(get_hardware("b200"), TODAY) == ()


def test_solve_all_providers_spot_prints_the_provider_of_the_optimum(capsys):
    argv = ["solve", "-m", "llama2-7b", "--tokens", "20B", "--deadline", "30d", "--minimize",
            "cost", "--gpu", "h100-sxm,b200", "--max-gpus", "64", "--provider", "all",
            "--market", "spot"]  # fmt: skip
    assert main([*argv, "--json"]) in (0, None)
    doc = json.loads(capsys.readouterr().out)
    gpu = doc["optimum"]["hardware"]["name"]
    best = offer_for(gpu, "all", "spot")
    assert doc["price"]["provider"] == best.provider and doc["price"]["market"] == "spot"
    assert doc["price"]["usd_per_gpu_hour"] == best.usd_per_gpu_hour
    assert main(argv) in (0, None)
    assert f"{best.provider} spot" in capsys.readouterr().out


def test_solve_searches_only_what_the_provider_prices():
    r = solve(budget="$50k", deadline="30d", provider="tensorwave", want_frontier=False)
    assert {h.name for h in r.table.gpus} == {"mi300x", "mi325x"}
    assert r.optimum.cluster.hardware.price_provider == "tensorwave"


@pytest.mark.parametrize(
    ("flag", "value", "listed"),
    [("--provider", "ibm", "aws, azure"), ("--market", "preemptible", "on-demand, reserved, spot")],
)
def test_bad_provider_or_market_is_one_line_exit_2(capsys, flag, value, listed):
    for verb in (["estimate", "-m", "llama2-7b", "-g", "h100", "-n", "8"], ["solve"]):
        assert (
            main([*verb, flag, value, "--deadline" if verb == ["solve"] else "--tokens", "1T"]) == 2
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and flag[2:] in err and listed in err and value in err


def test_no_offer_for_the_chip_names_who_prices_it():
    with pytest.raises(InputError, match="a provider with an on-demand price for h100-sxm: .*aws"):
        estimate("llama2-7b", "h100-sxm", 8, 1e10, provider="tensorwave")


def test_scenario_file_takes_provider_and_market(tmp_path, capsys):
    f = tmp_path / "spot.toml"
    f.write_text(
        'model = "llama2-7b"\ntokens = "20B"\ndeadline = "30d"\nminimize = "cost"\n'
        'gpu = "h100-sxm"\nmax-gpus = 64\nprovider = "gcp"\nmarket = "spot"\n'
    )
    assert main(["solve", str(f), "--json"]) in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["price"]["provider"] == "gcp" and doc["price"]["usd_per_gpu_hour"] == 6.571
    f.write_text('budget = "$1M"\ndeadline = "30d"\nmarket = "cheap"\n')
    assert main(["solve", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "market" in err and "on-demand, reserved, spot" in err


def test_web_api_prices_at_the_offer_and_refuses_a_bad_market():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trilemma.web import app as web

    body = {"model": "llama2-7b", "gpu": "h100-sxm", "gpus": 8, "tokens": "10B"}
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        ok = c.post("/api/estimate", json={**body, "provider": "runpod"})
        bad = c.post("/api/estimate", json={**body, "market": "cheap"})
    assert ok.status_code == 200 and ok.json()["cost"]["price_usd_per_gpu_hour"] == 2.69
    assert bad.status_code == 422 and bad.json()["field"] == "market"


def test_presets_lists_each_price_with_its_age(capsys):
    assert main(["presets", "prices", "--json"]) in (0, None)
    rows = json.loads(capsys.readouterr().out)["prices"]
    assert len(rows) == len(offers())
    for r in rows:
        read = [int(x) for x in r["date"].split("-")] + [1]
        assert r["age_days"] == (dt.date.today() - dt.date(*read[:3])).days
    assert main(["presets", "prices"]) in (0, None)
    assert "(old)" in capsys.readouterr().out  # CoreWeave's February 2026 list, among others
