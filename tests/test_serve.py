"""`trilemma serve`'s JSON API, through FastAPI's TestClient.

The API runs the CLI's own commands, so its references are the CLI: the same document as ``--json``,
the same error line as stderr (without ``trilemma: error:``), over the hostile-input corpus of
tests/test_hostile_corpus.py sent as JSON. Then the limits (search size, time, body, text, busy), the
static files (nothing outside static/ is served), that no endpoint writes a file, and that the
planning core never imports the web stack.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

pytest.importorskip(
    "fastapi", reason="the web extra is not installed (pip install 'trilemma[web]')"
)
pytest.importorskip(
    "httpx", reason="httpx (FastAPI's TestClient) is not installed (the dev extra has it)"
)

from fastapi.testclient import TestClient  # noqa: E402

from trilemma.cli import main  # noqa: E402
from trilemma.web import app as web  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src" / "trilemma"


@pytest.fixture(scope="module")
def client():
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


def cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def _no_timing(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.get("search", {}).pop("seconds", None)
    doc.pop("frontier_points", None)
    return doc


# ------------------------------------------------------------------ the same answers and errors as the CLI


def test_estimate_is_the_cli_document(client):
    r = client.post(
        "/api/estimate", json={"model": "llama2-7b", "gpus": 64, "tokens": "10B", "tp": "2"}
    )
    code, out, _ = cli(
        [
            "estimate",
            "--model",
            "llama2-7b",
            "--gpus",
            "64",
            "--tokens",
            "10B",
            "--tp",
            "2",
            "--json",
        ]
    )
    assert r.status_code == 200 and code == 0
    assert r.json() == json.loads(out)


def test_solve_is_the_cli_document_plus_its_frontier(client):
    body = {
        "deadline": "30d",
        "budget": "$1M",
        "gpu": ["h100-sxm", "a100-80gb"],
        "params": "1B..30B",
    }
    r = client.post("/api/solve", json=body)
    code, out, _ = cli(
        [
            "solve",
            "--deadline",
            "30d",
            "--budget",
            "$1M",
            "--gpu",
            "h100-sxm,a100-80gb",
            "--params",
            "1B..30B",
            "--json",
        ]
    )
    assert r.status_code == 200 and code == 0
    doc = r.json()
    assert _no_timing(doc) == _no_timing(json.loads(out))
    f = doc["frontier_points"]
    assert (
        len(f["time_s"])
        == doc["frontier"]["points"]
        == len(f["usd"])
        == len(f["loss"])
        == len(f["config"])
    )
    assert sum(f["feasible"]) == doc["frontier"]["feasible"]
    # the plan card's and runners' benchmark rows (static/plan.js benchmarkItems, scoreText) read these
    # fields of every plan: fractions with the point inside its 80% band
    for plan in (doc["optimum"], *doc["runners_up"]):
        items = plan["quality"]["benchmarks"]["items"]
        assert [i["name"] for i in items] == ["mmlu", "hellaswag", "arc_c", "gsm8k"]
        for i in items:
            assert {"label", "setting", "regime", "outside_fitted_range"} <= set(i)
            assert 0 <= i["low"] <= i["value"] <= i["high"] <= 1
    assert (
        min(f["time_s"]) == doc["frontier"]["time_s"][0]
        and max(f["loss"]) == doc["frontier"]["loss"][1]
    )
    # a point's plan: its configuration and tokens, realised as the optimum is (property: the optimum's row
    # is on the frontier's configurations, and a point's plan costs time × GPUs × price)
    k = len(f["time_s"]) // 2
    p = client.post("/api/solve/point", json={"solve": body, "point": k})
    assert p.status_code == 200
    plan, cfg = p.json(), f["configs"][f["config"][k]]
    assert (plan["hardware"]["name"], plan["hardware"]["n_gpus"], plan["model"]["name"]) == (
        cfg["gpu"],
        cfg["n_gpus"],
        cfg["model"],
    )
    assert plan["batch"]["tokens"] == pytest.approx(f["tokens"][k], rel=1e-12)
    assert plan["cost"]["usd"] == pytest.approx(
        plan["time"]["gpu_hours"] * plan["cost"]["price_usd_per_gpu_hour"], rel=1e-9
    )
    bad = client.post("/api/solve/point", json={"solve": body, "point": len(f["time_s"])})
    assert bad.status_code == 422 and bad.json()["field"] == "point"
    # a body without one of its two keys names the key and shows the shape, not a generic example
    for given, missing in (({"solve": body}, "point"), ({"point": k}, "solve")):
        r = client.post("/api/solve/point", json=given)
        assert r.status_code == 422 and r.json()["field"] == missing
        assert r.json()["error"].startswith(f'{missing}: missing; expected {{"solve"')


@pytest.mark.parametrize(
    ("body", "args"),
    [
        ({"tokens": "-1"}, ["estimate", "--tokens", "-1"]),
        ({"gpus": "abc"}, ["estimate", "--gpus", "abc"]),
        ({"precision": "fp64"}, ["estimate", "--precision", "fp64"]),
        ({"gpus": "4", "tp": "8"}, ["estimate", "--gpus", "4", "--tp", "8"]),
    ],
)
def test_errors_are_the_cli_lines(client, body, args):
    r = client.post("/api/estimate", json=body)
    code, out, err = cli([*args, "--json"])
    assert code == 2 and r.status_code == 422
    assert r.json()["error"] == err.removeprefix("trilemma: error: ").rstrip("\n")


def test_solve_errors_and_infeasible_as_the_cli(client):
    r = client.post("/api/solve", json={"deadline": "soon", "budget": "$1M"})
    _, _, err = cli(["solve", "--deadline", "soon", "--budget", "$1M", "--json"])
    assert r.status_code == 422 and r.json()["field"] == "deadline"
    assert r.json()["error"] == err.removeprefix("trilemma: error: ").rstrip("\n")
    # valid, but nothing meets it: the CLI's exit status 1 is an answer here, with what must give
    body = {"deadline": "1d", "target-loss": 1.9, "gpu": "h100-sxm", "params": "1B..70B"}
    r = client.post("/api/solve", json=body)
    code, out, err = cli(
        [
            "solve",
            "--deadline",
            "1d",
            "--target-loss",
            "1.9",
            "--gpu",
            "h100-sxm",
            "--params",
            "1B..70B",
            "--json",
        ]
    )
    assert code == 1 and out == ""
    assert r.status_code == 200
    assert r.json() == {
        "schema": web.INFEASIBLE_SCHEMA,
        "infeasible": True,
        "warnings": [],
        "message": err.removeprefix("trilemma: error: ").rstrip("\n"),
    }


def test_json_types_are_refused_naming_the_field(client):
    for verb, body, field in [
        ("estimate", {"pue": "high"}, "pue"),
        ("estimate", {"flash": "yes"}, "flash"),
        ("solve", {"target-loss": [2.0]}, "target-loss"),
        ("estimate", {"colour": 1}, "colour"),
        ("optimal", {"flops": True}, "flops"),
        ("estimate", {"model": {"n_layers": -1}}, "model.n_layers"),
    ]:
        r = client.post(f"/api/{verb}", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["field"] == field and r.json()["error"].startswith(field + ":"), r.json()
    for raw in (
        b"[1, 2]",
        b"{not json",
        b'"text"',
        b"[" * 30_000 + b"]" * 30_000,
        b"\xff\xfe",
        b"",
    ):
        r = client.post("/api/estimate", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["field"] == "body"


def test_a_model_spec_as_json_is_the_preset(client):
    """``model`` may be a ModelSpec as a JSON object (how the page asks for a solver's shape): the same plan."""
    from trilemma.resolve import resolve_model

    spec = resolve_model("llama2-7b")[0].model_dump(mode="json")
    a = client.post("/api/estimate", json={"model": spec, "gpus": 64, "tokens": "10B"}).json()
    b = client.post(
        "/api/estimate", json={"model": "llama2-7b", "gpus": 64, "tokens": "10B"}
    ).json()
    assert a["model"].pop("resolved_from") != b["model"].pop("resolved_from")
    assert a == b


def test_python_names_and_numbers_are_taken_as_the_flags(client):
    a = client.post("/api/optimal", json={"flops": 1e23, "inference_tokens": "1e12"}).json()
    b = client.post("/api/optimal", json={"flops": "1e23", "inference-tokens": 1e12}).json()
    assert a == b and a["flops"] == 1e23


# ------------------------------------------------------------------ the hostile corpus, sent as JSON

VERBS = {"estimate", "solve", "optimal", "validate", "presets"}


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _json_cases():
    """The corpus's cases of the verbs the API offers, as (verb, body, names): each ``--flag value`` a key,
    a value for a flag the CLI parses as a number sent as a JSON number when it is one (nan and inf as
    JSON's NaN and Infinity, which the server's parser reads). Cases with a positional argument (a
    scenario file) or a flag without a value are left out."""
    from test_hostile_corpus import CASES

    from trilemma import request as r

    numeric = {  # each request's fields that take numbers
        req.VERB: {
            o.key for o in req.options().values() if o.kind in ("number", "int", "bool", "items")
        }
        for req in (r.EstimateRequest, r.SolveRequest, r.OptimalRequest, r.ValidateRequest)
    }
    out = []
    for args, names in CASES:
        verb, rest = args[0], [a for a in args[1:] if a != "--json"]
        if verb not in VERBS:
            continue
        if verb == "presets":
            out.append((verb, {"kind": rest[0]}, names))
            continue
        if len(rest) % 2 or not all(a.startswith("--") for a in rest[::2]):
            continue
        body = {k.removeprefix("--"): v for k, v in zip(rest[::2], rest[1::2])}
        out.append(
            (verb, {k: _number(v) if k in numeric[verb] else v for k, v in body.items()}, names)
        )
    return out


def _reject_constant(name: str) -> float:
    raise AssertionError(f"non-standard JSON constant {name}")


def test_hostile_corpus_as_json(client, sandbox):
    """Every case answers 200 (a finite document, or infeasible with a message) or 400/422 with the field
    named, never 500. Files the cases name are never read: a path for --model or --law is refused."""
    from test_hostile_corpus import ALIASES, FILES, _fill

    cases = _json_cases()
    assert len(cases) >= 400
    extra = {
        "model": ("files are not read",),
        "law": ("files are not read",),
        "data": ("no such field",),
        "csv": ("no such field",),
    }
    for verb, body, names in cases:
        body = {k: _fill([v], sandbox)[0] if isinstance(v, str) else v for k, v in body.items()}
        r = client.post(
            f"/api/{verb}", content=json.dumps(body), headers={"content-type": "application/json"}
        )
        assert r.status_code in (200, 400, 422), (verb, body, r.status_code, r.text[:500])
        doc = json.loads(r.text, parse_constant=_reject_constant)
        if r.status_code == 200:
            assert doc.get("message") if doc.get("infeasible") else doc.get("schema"), (verb, body)
            continue
        low = doc["error"].lower()
        assert doc["field"], (verb, body, doc)
        ok = tuple(names) + tuple(a for n in names for a in ALIASES.get(n, ()) + extra.get(n, ()))
        assert any(n.lower() in low for n in ok), (verb, body, doc["error"][:300])
        assert len(doc["error"]) < 2000
    assert (
        FILES
    )  # the corpus's files exist in the sandbox, so a refusal above is not a missing file


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    from test_hostile_corpus import write_files

    return write_files(tmp_path_factory.mktemp("hostile_json"))


# ------------------------------------------------------------------ limits


def test_a_search_over_the_limit_is_refused_before_it_runs(client):
    body = {
        "deadline": "30d",
        "budget": "$1M",
        "params": "20M..1e13",
        "precision": "bf16,fp8,fp16,fp32,tf32",
    }
    t = time.perf_counter()
    r = client.post("/api/solve", json=body)
    assert r.status_code == 422 and r.json()["field"] == "search"
    assert f"at most {web.MAX_CONFIGURATIONS:,} configurations" in r.json()["error"]
    assert time.perf_counter() - t < 1.0  # refused before searching
    # the cap is the server's, passed as an argument: the Python API takes one only when given
    from trilemma.errors import InputError
    from trilemma.solve import solve

    with pytest.raises(InputError, match="search"):
        solve(
            deadline="30d",
            budget="$1M",
            gpu="h100-sxm,a100-80gb",
            params="1B..7B",
            max_configurations=10,
        )


def test_a_computation_over_the_time_limit_is_refused(monkeypatch):
    monkeypatch.setattr(web, "TIME_LIMIT_S", 0.05)
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        r = c.post("/api/solve", json={"deadline": "30d", "budget": "$1M", "gpu": "h100-sxm"})
    assert r.status_code == 422 and r.json()["field"] == "search"
    assert "longer than the 0.05 s limit" in r.json()["error"]


def test_busy_when_too_many_wait():
    runner = web.Runner(time_limit_s=5, max_waiting=0)
    release = threading.Event()
    first = threading.Thread(target=runner.run, args=(release.wait,))
    first.start()
    time.sleep(0.05)
    with pytest.raises(web.Busy):
        runner.run(lambda: None)
    release.set()
    first.join()
    assert runner.run(lambda: 7) == 7


def test_body_and_text_sizes(client):
    big = json.dumps({"model": "x" * (web.MAX_BODY_BYTES + 1)})
    r = client.post("/api/estimate", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "body"
    r = client.post("/api/estimate", json={"gpu": "h" * (web.MAX_TEXT_CHARS + 1)})
    assert r.status_code == 422 and r.json()["field"] == "gpu"
    r = client.post(
        "/api/solve",
        json={"gpu": ["h100-sxm"] * (web.MAX_LIST_ITEMS + 1), "deadline": "30d", "budget": "$1M"},
    )
    assert r.status_code == 422 and r.json()["field"] == "gpu"


# ------------------------------------------------------------------ files: only static/ is served, none is written


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e%2f%2e%2e%2fcli.py",
        "/static/..%5capp.py",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/",
        "/static/.",
        "/app.py",
        "/../pyproject.toml",
        "/vendor/../web/app.py",
        "/vendor/plotly.js",
        "/static/%00index.html",
    ],
)
def test_nothing_outside_static_is_served(client, path):
    r = client.get(path)
    assert r.status_code in (404, 400, 405), (path, r.status_code)
    assert b"import" not in r.content and b"root:" not in r.content


def test_static_files_and_plotly_are_served(client):
    scripts = sorted(p.name for p in web.STATIC.glob("*.js"))
    assert "app.js" in scripts
    for name in (*scripts, "style.css"):
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and r.content == (web.STATIC / name).read_bytes()
    assert client.get("/").content == (web.STATIC / "index.html").read_bytes()
    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200 and r.content == web.plotly_path().read_bytes()
    for name in ("index.html", *scripts, "style.css"):  # no CDN, no remote font: works offline
        text = (web.STATIC / name).read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


def test_the_api_docs_work_offline(client):
    page = client.get("/docs")
    assert page.status_code == 200 and "/openapi.json" in page.text
    assert "cdn" not in page.text.lower() and "https://" not in page.text
    files = web.swagger_ui_files()
    for name, path in files.items():
        r = client.get(f"/vendor/{name}")
        assert r.status_code == 200 and r.content == path.read_bytes()


def test_no_endpoint_writes_files(client, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for verb, body in [
        ("estimate", {"gpus": 8, "tokens": "1B"}),
        ("optimal", {"flops": 1e21}),
        ("solve", {"deadline": "30d", "budget": "$1M", "gpu": "h100-sxm", "params": "1B..3B"}),
        ("presets", {}),
        ("validate", {"kind": "memory"}),
        ("scenario", {"toml": 'deadline = "30d"\nbudget = "$1M"\nfrontier = "out.csv"'}),
        ("export", {"to": "deepspeed", "solve": {"deadline": "30d", "gpu": "h100-sxm"}}),
    ]:
        assert client.post(f"/api/{verb}", json=body).status_code in (200, 422)
    for verb, key in [
        ("solve", "frontier"),
        ("solve", "plot"),
        ("validate", "csv"),
        ("solve", "scenario"),
        ("validate", "data"),
    ]:
        r = client.post(f"/api/{verb}", json={key: "out.csv"})
        assert r.status_code == 422 and r.json()["field"] == key
    assert list(tmp_path.iterdir()) == []
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert not {"frontier", "plot", "csv", "scenario", "data", "loso", "json"} & set(
        schema["SolveRequest"]["properties"] | schema["ValidateRequest"]["properties"]
    )


def test_openapi_keys_are_the_cli_flags(client):
    """The request schema is the command's flags (from click's own parsed options), less output and files."""
    import typer.main

    from trilemma.cli import app

    spec = client.get("/openapi.json").json()
    assert {f"/api/{v}" for v in VERBS} | {"/api/solve/point"} <= set(spec["paths"])
    cmd = typer.main.get_command(app)
    for verb, hidden in [
        ("estimate", {"json", "export"}),
        ("solve", {"json", "frontier", "plot", "plot-range", "export"}),
        ("optimal", {"json"}),
    ]:
        flags = {
            o.removeprefix("--")
            for p in cmd.commands[verb].params
            for o in p.opts
            if o.startswith("--")
        }
        keys = set(spec["components"]["schemas"][f"{verb.title()}Request"]["properties"])
        assert keys == flags - hidden, (verb, keys ^ (flags - hidden))


# ------------------------------------------------------------------ the command and the architecture


def test_serve_prints_the_url_and_binds_localhost(monkeypatch, capsys):
    import trilemma.web.serve as serve

    calls = []
    monkeypatch.setattr(serve, "run", lambda host, port: calls.append((host, port)))
    assert main(["serve", "--port", "8123"]) == 0
    assert calls == [("127.0.0.1", 8123)] and serve.local("127.0.0.1") and serve.local("::1")
    assert "http://127.0.0.1:8123/" in capsys.readouterr().out
    assert main(["serve", "--port", "0"]) == 2 and "port" in capsys.readouterr().err
    assert serve.url("::", 80) == "http://[::1]:80/" and not serve.local("0.0.0.0")


def test_a_local_server_answers_only_local_host_names():
    app = web.create_app(allowed_hosts=web.LOCAL_HOSTS)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        assert c.post("/api/presets", json={"kind": "hardware"}).status_code == 200
    with TestClient(
        app, base_url="http://rebound.example:8000"
    ) as c:  # DNS rebinding: another name
        page, api = c.get("/"), c.post("/api/presets", json={})
        assert page.status_code == 400 and api.status_code == 400
        # the refusal is the JSON error document every other one is, naming the header and the value
        doc = api.json()
        assert doc["field"] == "host" and doc["error"].startswith(
            "host: 'rebound.example:8000' is not allowed"
        )
    with TestClient(app, base_url="http://[::1]:8000") as c:
        assert c.post("/api/presets", json={"kind": "hardware"}).status_code == 200


def test_the_planning_core_never_imports_the_web_stack():
    code = (
        "import sys; from trilemma.cli import main; import trilemma.api, trilemma.solve; "
        "main(['estimate', '--gpus', '8', '--tokens', '1B', '--json']); "
        "sys.stderr.write(repr([m for m in ('fastapi', 'starlette', 'uvicorn', 'plotly') if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "[]", r.stderr[-500:]
    import ast

    for f in SRC.rglob("*.py"):
        if "web" in f.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(
                m.split(".")[0] in ("fastapi", "starlette", "uvicorn", "plotly") for m in mods
            ), f


def test_no_nan_reaches_an_answer(client):
    r = client.post("/api/estimate", json={"gpus": 8, "tokens": "1B", "price": "1e308"})
    doc = json.loads(r.text, parse_constant=_reject_constant)
    assert r.status_code in (200, 422)
    if r.status_code == 200:
        assert doc.get("infeasible") or math.isfinite(doc["cost"]["usd"])
