"""`trilemma serve` against a hostile client: JSON values of the wrong shape in every field of every
route, a computation queued behind others, the Host header of the address it was started on, and
(slow) hundreds of idle half-open connections.

The references: every refusal is the project's JSON error document (``field`` and a one-line
``error`` naming it) with status 400, 422 or 429; never a 500 with a plain-text body.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

pytest.importorskip(
    "fastapi", reason="the web extra is not installed (pip install 'trilemma[web]')"
)
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed (the dev extra)")

from fastapi.testclient import TestClient  # noqa: E402

from trilemma.web import app as web  # noqa: E402

#: a small valid request of each verb: one field at a time is replaced by a hostile value
BASE = {
    "estimate": {"gpus": 8, "tokens": "1B"},
    "solve": {
        "deadline": "30d",
        "budget": "$1M",
        "gpu": "h100-sxm",
        "params": "1B..2B",
        "precision": "bf16",
    },
    "optimal": {"flops": 1e21},
    "presets": {"kind": "hardware"},
    "validate": {"kind": "memory"},
}


def _deep(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


#: JSON values where text, a number or a flag is expected: objects (with the keyword names of the
#: Python functions behind the routes), arrays, null, numbers beyond a float, nesting
HOSTILE = [
    {},
    {"prefix": "x"},
    {"cls": {"a": 1}},
    {"self": 1},
    {"a": {"b": {"c": [1]}}},
    [],
    [{}],
    [None],
    [[1]],
    None,
    10**400,
    -(10**400),
    1.0e308,
    -1,
    0,
    True,
    "",
    _deep(200),
]


@pytest.fixture(scope="module")
def client():
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


def _post(client: TestClient, path: str, body: object):
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def _refused_or_answered(r, where: object) -> None:
    """200 with a document, or 400/422 with the error document naming a field; never a 500."""
    assert r.status_code in (200, 400, 422), (where, r.status_code, r.text[:300])
    doc = r.json()
    if r.status_code != 200:
        assert doc["field"] and doc["error"].startswith(doc["field"].split(".")[0]), (where, doc)
        assert "\n" not in doc["error"], (where, doc)


def _fields(client: TestClient, verb: str) -> list[str]:
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    return sorted(schema[f"{verb.title()}Request"]["properties"])


@pytest.mark.parametrize("verb", sorted(BASE))
def test_wrong_json_shapes_are_refused_not_a_server_error(client, verb):
    for key in _fields(client, verb):
        for value in HOSTILE:
            _refused_or_answered(
                _post(client, f"/api/{verb}", {**BASE[verb], key: value}), (key, value)
            )


def test_model_object_with_the_builders_own_keywords_is_refused_not_a_server_error(client):
    """A ModelSpec object whose keys are the names of the builder's own parameters (``prefix``,
    ``cls``) or no field at all: 422 naming ``model.<key>``."""
    for key in ("prefix", "cls", "self", "fields", "", "__class__", "model_config"):
        for value in ({"prefix": "x"}, "x", 3, None):
            r = _post(client, "/api/estimate", {"model": {key: value}})
            assert r.status_code == 422, (key, value, r.status_code, r.text[:300])
            assert r.json()["field"].startswith("model"), r.json()


def test_solve_point_with_wrong_shapes_is_refused_not_a_server_error(client):
    for value in HOSTILE:
        for body in (
            {"solve": value, "point": 0},
            {"solve": BASE["solve"], "point": value},
            {"solve": {**BASE["solve"], "model": {"cls": value}}, "point": 0},
        ):
            _refused_or_answered(_post(client, "/api/solve/point", body), body)


def test_numbers_beyond_a_float_are_refused_naming_the_field(client):
    for verb, key in (("estimate", "tokens"), ("solve", "max-gpus"), ("optimal", "flops")):
        r = _post(client, f"/api/{verb}", {**BASE[verb], key: 10**400})
        assert r.status_code == 422 and r.json()["field"] == key, r.text[:300]
    r = _post(client, "/api/solve", {**BASE["solve"], "target-loss": 10**400})
    assert r.status_code == 422 and r.json()["field"] == "target-loss", r.text[:300]


# ------------------------------------------------------------------ the queue and the run, limited apart


def test_queue_time_is_not_counted_as_run_time():
    """A fast computation that waited behind a slow one longer than the run limit is answered: the
    wait is the queue's limit, not the run's."""
    runner = web.Runner(time_limit_s=0.3, max_waiting=4, queue_limit_s=10)
    release = threading.Event()
    outcome: list[str] = []

    def slow() -> None:
        try:
            runner.run(release.wait)
        except web.TooSlow:
            outcome.append("too slow")

    first = threading.Thread(target=slow)
    first.start()
    timer = threading.Timer(1.0, release.set)  # holds the worker 1 s: over the 0.3 s run limit
    timer.start()
    try:
        time.sleep(0.05)
        assert runner.run(lambda: 7) == 7
    finally:
        release.set()
        first.join(timeout=10)
        timer.cancel()
    assert outcome == ["too slow"]  # the one that ran long is still refused, with its own message


def _refused_while_the_worker_is_held(monkeypatch, limit: str, value: float):
    """The answer to a small estimate while the app's one worker is busy (for up to 5 s), with
    ``web.<limit>`` set to ``value``; then a second estimate once it is free, which must answer."""
    monkeypatch.setattr(web, limit, value)
    app = web.create_app()
    release = threading.Event()
    with TestClient(app, raise_server_exceptions=False) as c:
        holder = threading.Thread(target=app.state.runner.run, args=(lambda: release.wait(5),))
        holder.start()
        time.sleep(0.05)
        try:
            r = c.post("/api/estimate", json=BASE["estimate"])
        finally:
            release.set()
            holder.join(timeout=10)
        assert c.post("/api/estimate", json=BASE["estimate"]).status_code == 200
    return r


def test_a_request_queued_too_long_is_told_to_retry(monkeypatch):
    r = _refused_while_the_worker_is_held(monkeypatch, "QUEUE_LIMIT_S", 0.2)
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1, r.text[:300]
    doc = r.json()
    assert doc["field"] == "queue" and doc["error"].startswith("queue: the request waited 0.2 s")
    assert "ran longer" not in doc["error"]


def test_busy_is_told_when_to_retry(monkeypatch):
    r = _refused_while_the_worker_is_held(monkeypatch, "MAX_WAITING", 0)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1, r.text[:300]
    assert r.json()["field"] == "queue" and r.json()["error"].startswith("busy: ")
