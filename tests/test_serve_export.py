"""``POST /api/export`` through FastAPI's TestClient: the plan the page shows as an engine's files is
the document `trilemma export --to ENGINE solve ... --json` prints for the same request (its
optimum, or a frontier point), and a refusal is the CLI's line."""

from __future__ import annotations

import json

import pytest

pytest.importorskip(
    "fastapi", reason="the web extra is not installed (pip install 'trilemma[web]')"
)
pytest.importorskip(
    "httpx", reason="httpx (FastAPI's TestClient) is not installed (the dev extra has it)"
)

from clitools import run  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from trilemma.web import app as web  # noqa: E402

#: a small search on one GPU type: the same request as flags and as JSON
FLAGS = ["--deadline", "30d", "--budget", "$2M", "--params", "50M..3B", "--gpu", "h100-sxm"]
BODY = {"deadline": "30d", "budget": "$2M", "params": "50M..3B", "gpu": "h100-sxm"}


@pytest.fixture(scope="module")
def client():
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(
    ("engine", "point"), [("torchtitan", None), ("megatron", 3), ("deepspeed", None), ("hf", 3)]
)
def test_export_is_the_cli_document(client, capsys, engine, point):
    body = {"to": engine, "solve": BODY, **({"point": point} if point is not None else {})}
    r = client.post("/api/export", json=body)
    assert r.status_code == 200, r.text
    where = ["--point", str(point)] if point is not None else []
    code, out, err = run(capsys, "export", "--to", engine, *where, "solve", *FLAGS, "--json")
    assert code == 0, err
    assert r.json() == json.loads(out)
    assert r.json()["files"]  # at least one file to download


def test_export_refusals_are_the_cli_lines(client, capsys):
    r = client.post("/api/export", json={"to": "jax", "solve": BODY})
    code, _, err = run(capsys, "export", "--to", "jax", "solve", *FLAGS)
    assert (r.status_code, code) == (422, 2)
    assert r.json()["field"] == "to" and err.strip().endswith(r.json()["error"])
    # a plan the engine cannot run (Hugging Face's Trainer: no tensor parallelism): the same line
    r = client.post("/api/export", json={"to": "hf", "solve": BODY})
    code, _, err = run(capsys, "export", "--to", "hf", "solve", *FLAGS)
    assert (r.status_code, code) == (422, 2) and err.strip().endswith(r.json()["error"])
    r = client.post("/api/export", json={"to": "hf", "solve": {**BODY, "model": "/etc/passwd"}})
    assert r.status_code == 422 and r.json()["field"] == "model"  # the server reads no file
