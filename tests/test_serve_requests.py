"""The routes served from a typed request (trilemma.request): the body is the request, the answer's
document is declared in /openapi.json, and the route calls the library, never the CLI."""

from __future__ import annotations

import sys
import threading

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from trilemma.web import app as web  # noqa: E402

#: route → the documents its 200 answer declares, and keys the first must describe
ROUTES = {
    "/api/estimate": (
        {"EstimateDoc", "InfeasibleDoc"},
        {"schema", "time", "cost", "memory", "warnings"},
    ),
    "/api/solve": (
        {"SolveDoc", "InfeasibleDoc"},
        {"schema", "optimum", "pins", "frontier_points", "warnings"},
    ),
    "/api/solve/point": ({"PlanDoc", "InfeasibleDoc"}, {"model", "time", "cost", "stability"}),
    "/api/optimal": ({"OptimalDoc", "InfeasibleDoc"}, {"schema", "results", "warnings"}),
    "/api/validate": ({"ValidateDoc"}, {"schema", "summary", "rows", "warnings"}),
    "/api/presets": ({"PresetsDoc"}, {"schema", "models", "hardware", "devices", "warnings"}),
}
SOLVE = {"gpu": "h100-sxm", "params": "1B..7B", "budget": "$1M", "deadline": "30d"}


@pytest.fixture(scope="module")
def client():
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(("path", "docs", "described"), [(p, *d) for p, d in ROUTES.items()])
def test_every_route_declares_its_answer_schema(client, path, docs, described):
    """Not ``{"type": "object"}``: the answer's keys, each with a type and a description, or the
    infeasible answer."""
    spec = client.get("/openapi.json").json()
    schema = spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
    refs = {
        s.get("$ref", "").rsplit("/", 1)[-1]
        for s in schema["schema"].get("anyOf", [schema["schema"]])
    }
    assert refs == docs, schema
    for doc in docs:
        props = spec["components"]["schemas"][doc]["properties"]
        assert all(p.get("description") for p in props.values()), (doc, props)
    doc = next(d for d in docs if d != "InfeasibleDoc")
    assert described <= set(spec["components"]["schemas"][doc]["properties"])


def test_no_answer_in_the_openapi_document_is_a_bare_object(client):
    """Every route's 200 answer (and every refusal) names a schema with properties: /docs shows what
    comes back, not ``{"type": "object"}``."""
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert set(spec["paths"]) >= set(ROUTES)
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            for status, answer in op["responses"].items():
                schema = answer["content"]["application/json"]["schema"]
                for s in schema.get("anyOf", [schema]):
                    assert "$ref" in s, (path, method, status, schema)
                    assert schemas[s["$ref"].rsplit("/", 1)[-1]].get("properties"), (path, s)


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


#: route → a body it answers, and one it refuses naming the field given
BODIES = {
    "/api/estimate": ({"model": "llama2-7b", "gpus": 64, "tokens": "10B"}, {"seq": "1e9"}, "seq"),
    "/api/solve": (SOLVE, {**SOLVE, "seq": "1e9"}, "seq"),
    "/api/solve/point": (
        {"solve": SOLVE, "point": 0},
        {"solve": {**SOLVE, "seq": "1e9"}, "point": 0},
        "seq",
    ),
    "/api/optimal": ({"flops": 1e21}, {"flops": "1e400"}, "flops"),
    "/api/validate": ({"kind": "memory"}, {"kind": "all"}, "kind"),
    "/api/presets": ({"kind": "hardware"}, {"kind": "nope"}, "kind"),
}


@pytest.mark.parametrize(("path", "good", "bad", "field"), [(p, *b) for p, b in BODIES.items()])
def test_every_route_runs_the_library_not_the_cli(path, good, bad, field):
    """A fresh application, so that its worker thread starts (and is watched) inside the check."""
    assert set(BODIES) == set(ROUTES)
    answers = []

    def ask() -> None:
        with TestClient(web.create_app(), raise_server_exceptions=False) as c:
            answers.extend(c.post(path, json=body) for body in (good, bad))

    calls = _cli_calls(ask)
    assert answers[0].status_code == 200, answers[0].text[:300]
    assert answers[0].json().get("schema", "trilemma.").startswith("trilemma.")
    assert answers[1].status_code == 422 and answers[1].json()["field"] == field
    assert calls == []


def test_the_web_package_imports_nothing_from_the_cli():
    """No module of trilemma.web imports a trilemma.cli* module, at its top or inside a function:
    the routes, their bodies and documents are built from the requests and call the library."""
    import ast
    from pathlib import Path

    import trilemma.web

    imported = {}
    for path in sorted(Path(trilemma.web.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported[path.name] = {
            n.module if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        }
    assert {"app.py", "bodies.py", "routes.py", "errors.py"} <= set(imported)
    cli = {
        f: sorted(m for m in ms if m and m.startswith("trilemma.cli")) for f, ms in imported.items()
    }
    assert not any(cli.values()), cli
