"""The routes served from a typed request (trilemma.request): the body is the request, the answer's
document is declared in /openapi.json, and the route calls the library, never the CLI."""

from __future__ import annotations

import sys
import threading

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from trilemma.web import app as web  # noqa: E402

#: route → the document its 200 answer declares, and keys it must describe
CONVERTED = {
    "/api/estimate": ("EstimateDoc", {"schema", "time", "cost", "memory", "warnings"}),
    "/api/solve": ("SolveDoc", {"schema", "optimum", "pins", "frontier_points", "warnings"}),
}
SOLVE = {"gpu": "h100-sxm", "params": "1B..7B", "budget": "$1M", "deadline": "30d"}


@pytest.fixture(scope="module")
def client():
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(("path", "doc", "described"), [(p, *d) for p, d in CONVERTED.items()])
def test_a_converted_route_declares_its_answer_schema(client, path, doc, described):
    """Not ``{"type": "object"}``: the answer's keys, each with a type and a description, or the
    infeasible answer."""
    spec = client.get("/openapi.json").json()
    schema = spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
    refs = {s.get("$ref", "").rsplit("/", 1)[-1] for s in schema["schema"].get("anyOf", [])}
    assert refs == {doc, "InfeasibleDoc"}, schema
    props = spec["components"]["schemas"][doc]["properties"]
    assert described <= set(props)
    assert all(p.get("description") for p in props.values()), props


def _cli_calls(call) -> list[str]:
    """The functions of trilemma.cli* modules that run (in any thread) during ``call()``."""
    seen: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_globals.get("__name__", "").startswith("trilemma.cli"):
            seen.append(f"{frame.f_globals['__name__']}.{frame.f_code.co_name}")

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return seen


@pytest.mark.parametrize(
    ("path", "good", "bad"),
    [
        ("/api/estimate", {"model": "llama2-7b", "gpus": 64, "tokens": "10B"}, {"seq": "1e9"}),
        ("/api/solve", SOLVE, {**SOLVE, "seq": "1e9"}),
    ],
)
def test_a_converted_route_runs_the_library_not_the_cli(client, path, good, bad):
    answers = []
    calls = _cli_calls(lambda: answers.append(client.post(path, json=good)))
    assert answers[0].status_code == 200 and answers[0].json()["schema"].startswith("trilemma.")
    assert calls == []
    calls = _cli_calls(lambda: answers.append(client.post(path, json=bad)))
    assert answers[1].status_code == 422 and answers[1].json()["field"] == "seq"
    assert calls == []


def test_the_web_bodies_import_nothing_from_the_cli():
    """The routes' bodies and documents (trilemma.web.bodies) are built from the requests alone."""
    import ast
    from pathlib import Path

    import trilemma.web.bodies as bodies

    tree = ast.parse(Path(bodies.__file__).read_text(encoding="utf-8"))
    names = {
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert not {m for m in names if m and m.startswith("trilemma.cli")}, names
