"""One table of bad values through the four front doors: the CLI, the web API, a scenario file and
the Python API. Each door refuses each value with the same one line (the spec that holds the value
states its bounds once: trilemma.specs.bounds) and never returns a figure."""

from __future__ import annotations

import pytest
from clitools import run

from trilemma.api import estimate
from trilemma.errors import InputError
from trilemma.resolve import make_plan, resolve_model

PLAN = {"model": "llama2-7b", "gpu": "a100-80gb", "gpus": 64, "tokens": "10B"}
DAY = 86_400.0
NUMBERS = {"goodput", "pue"}  # the web API's number fields (the others take text with units)

#: flag, value as typed, the Python API's call with the parsed value, the scenario key (None: solve's
#: scenario has no such key)
BAD = [
    ("goodput", "1e-300", lambda: make_plan(_llama(), 2e12, goodput=1e-300), None),
    ("price", "1e9", lambda: _estimate(cluster={"price_usd_per_hour": 1e9}), "price"),
    ("price", "20000", lambda: _estimate(cluster={"price_usd_per_hour": 2e4}), "price"),
    ("seq", "20000000", lambda: _estimate(seq_len=20_000_000), "seq"),
    ("pue", "-1", lambda: _estimate(cluster={"pue": -1.0}), None),
    ("pue", "3.5", lambda: _estimate(cluster={"pue": 3.5}), None),
    ("restart", "8d", lambda: _estimate(cluster={"restart_s": 8 * DAY}), "restart"),
    (
        "storage-bw",
        "1B/s",
        lambda: _estimate(cluster={"storage_write_bytes_per_s": 1.0}),
        "storage_bw",
    ),
    ("global-batch", "4Mx", lambda: _estimate(global_batch_tokens="4Mx"), "global_batch"),
    ("global-batch", "1.5seq", lambda: _estimate(global_batch_tokens="1.5seq"), "global_batch"),
    (
        "inter-node-bw",
        "2PB/s",
        lambda: _estimate(cluster={"inter_node_bw_bytes_per_s": 2e15}),
        None,
    ),
]


def _llama():
    return resolve_model("llama2-7b")[0]


def _estimate(**kw):
    return estimate("llama2-7b", "a100-80gb", 64, tokens=1e10, **kw)


def _python(call) -> str:
    with pytest.raises(InputError) as exc:
        call()
    return str(exc.value)


def _cli(capsys, flag: str, value: str) -> str:
    args = [
        "estimate",
        "-m",
        PLAN["model"],
        "--gpu",
        PLAN["gpu"],
        "--gpus",
        "64",
        "--tokens",
        "10B",
    ]
    code, out, err = run(capsys, *args, f"--{flag}", value, "--json")
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    return err.removeprefix("trilemma: error: ").rstrip("\n")


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trilemma.web import app as web

    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(("flag", "value", "call", "key"), BAD, ids=[f"{b[0]}={b[1]}" for b in BAD])
def test_every_front_door_refuses_the_same_value_with_the_same_line(
    capsys, client, tmp_path, flag, value, call, key
):
    line = _cli(capsys, flag, value)
    assert line.startswith(f"{flag}: ") and "is not allowed; expected" in line
    assert _python(call) == line
    typed = float(value) if flag in NUMBERS else value  # a JSON number where the flag takes one
    r = client.post("/api/estimate", json={**PLAN, flag: typed})
    assert r.status_code == 422 and r.json()["error"] == line and r.json()["field"] == flag
    if key is not None:
        scenario = tmp_path / "scenario.toml"
        scenario.write_text(f'deadline = "30d"\nbudget = "$1M"\n{key} = "{value}"\n', "utf-8")
        code, out, err = run(capsys, "solve", str(scenario), "--json")
        assert (code, out, err) == (2, "", f"trilemma: error: {line}\n")
