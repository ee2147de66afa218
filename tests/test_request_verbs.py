"""The typed requests of the verbs that run on this machine or hand a plan on (fit, probe, ladder,
export, serve): the command's options are the request's fields, and the Python API refuses a value
with the line the command line prints for it."""

from __future__ import annotations

import json
import socket

import pytest
import typer.main
from clitools import run

from trilemma.errors import InputError
from trilemma.request import (
    EstimateRequest,
    ExportRequest,
    FitRequest,
    LadderRequest,
    ProbeRequest,
    ServeRequest,
    SolveRequest,
)

RUNS = "N,D,loss\n" + "".join(
    f"{n:.0f},{d:.0f},{1.8 + 480 / n**0.35 + 2000 / d**0.37:.5f}\n"
    for n in (1e7, 3e7, 1e8, 3e8)
    for d in (2e8, 6e8, 2e9)
)


@pytest.fixture
def runs(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text(RUNS, "utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("verb", "request_type", "cli_only"),
    [
        ("fit", FitRequest, {"--json"}),
        ("probe", ProbeRequest, {"--json"}),
        ("ladder", LadderRequest, {"--json"}),
        ("export", ExportRequest, set()),
        ("serve", ServeRequest, set()),
    ],
)
def test_a_verb_option_written_outside_its_request_is_absent(verb, request_type, cli_only):
    """Each command's options are generated from its request's fields (plus the CLI's own --json):
    no flag is declared twice, none is missing."""
    from trilemma.cli import app

    cmd = typer.main.get_command(app).commands[verb]
    flags = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    args = {p.name for p in cmd.params if p.param_type_name == "argument"}
    opts = request_type.options()
    fields = {x for o in opts.values() if not o.argument for x in o.flags}
    assert flags == fields | cli_only
    assert args == {n for n, o in opts.items() if o.argument}


@pytest.mark.parametrize(
    ("args", "fields"),
    [
        (["--bootstrap", "-1"], {"bootstrap": -1}),
        (["--ci", "1"], {"ci": 1.0}),
        (["--holdout", "0.99"], {"holdout": 0.99}),
        (["--starts", "99999"], {"starts": 99999}),
        (["--seed", "-1"], {"seed": -1}),
        (["--n-counts", "nope"], {"n_counts": "nope"}),
        (["--name", ""], {"name": ""}),
    ],
)
def test_fit_bound_refused_by_the_request_with_the_flags_line(capsys, runs, args, fields):
    code, out, err = run(capsys, "fit", runs, *args, "--json")
    with pytest.raises(InputError) as exc:
        FitRequest(runs=runs, **fields)
    assert code == 2 and out == ""
    assert err == f"trilemma: error: {exc.value}\n"


def test_fit_request_runs_as_the_command_does(capsys, runs, tmp_path):
    from trilemma.quality.fitting import run_fit

    out_cli, out_api = str(tmp_path / "cli.law.toml"), str(tmp_path / "api.law.toml")
    code, out, _ = run(
        capsys, "fit", runs, "--bootstrap", "2", "--starts", "1", "--out", out_cli, "--json"
    )
    doc = run_fit(FitRequest(runs=runs, bootstrap=2, starts=1, out=out_api))
    cli = json.loads(out)
    assert code == 0 and cli.pop("law_path") == out_cli and doc.pop("law_path") == out_api
    from trilemma.report.jsonout import dumps_json

    assert json.loads(dumps_json(doc)) == cli


def test_ladder_sizes_as_text_or_a_list_are_one_value():
    text = LadderRequest(out="x", sizes="14k, 25k,40k", tokens_per_param="5,10")
    listed = LadderRequest(out="x", sizes=[14e3, 25e3, 40e3], tokens_per_param=(5, 10))
    assert text.sizes == listed.sizes == (14e3, 25e3, 40e3)
    assert text.tokens_per_param == listed.tokens_per_param == (5.0, 10.0)


@pytest.mark.parametrize(
    ("flag", "value"), [("--sizes", "14k,-1"), ("--tokens-per-param", ","), ("--price", "$-1")]
)
def test_ladder_value_refused_by_the_request_with_the_flags_line(capsys, tmp_path, flag, value):
    out = str(tmp_path / "lad")
    code, stdout, err = run(capsys, "ladder", "--out", out, "--dry-run", flag, value, "--json")
    with pytest.raises(InputError) as exc:
        LadderRequest(out=out, dry_run=True, **{flag.lstrip("-").replace("-", "_"): value})
    assert code == 2 and stdout == ""
    assert err == f"trilemma: error: {exc.value}\n"


def test_probe_request_refused_by_run_probe_with_the_flags_line(capsys):
    """Rules that need the machine are checked by run_probe before anything is measured, for the
    command line and the Python API alike."""
    from trilemma.probe import run_probe

    code, out, err = run(capsys, "probe", "--steps", "3", "--warmup", "3", "--json")
    with pytest.raises(InputError) as exc:
        run_probe(ProbeRequest(steps=3, warmup=3))
    assert code == 2 and out == ""
    assert err == f"trilemma: error: {exc.value}\n"


def test_probe_data_is_one_path_or_a_list_of_them():
    assert ProbeRequest(data="a.txt").data == ("a.txt",)
    assert ProbeRequest(data=["a.txt", "b"]).data == ("a.txt", "b")
    with pytest.raises(InputError, match="data"):
        ProbeRequest(data=[1, 2])


def test_export_point_with_an_estimate_refused_with_the_flags_line(capsys):
    code, out, err = run(capsys, "export", "--to", "megatron", "--point", "1", "estimate")
    with pytest.raises(InputError) as exc:
        ExportRequest(to="megatron", point=1, plan=EstimateRequest())
    assert code == 2 and out == ""
    assert err == f"trilemma: error: {exc.value}\n"
    with pytest.raises(InputError) as exc_default:  # no plan: the default estimate
        from trilemma.api import run_export

        run_export(ExportRequest(to="megatron", point=1))
    assert str(exc_default.value) == str(exc.value)


def test_export_request_runs_as_the_command_does(capsys, tmp_path):
    from trilemma.api import run_export
    from trilemma.report.jsonout import dumps_json

    args = ["--gpus", "64", "--tokens", "10B"]
    code, out, _ = run(capsys, "export", "--to", "deepspeed", *args, "--json")
    doc = run_export(
        ExportRequest(to="DeepSpeed", plan=EstimateRequest(gpus=64, tokens="10B"), out=tmp_path)
    )
    assert code == 0 and json.loads(dumps_json(doc.to_dict())) == json.loads(out)
    assert set(doc.files) <= {p.name for p in tmp_path.iterdir()}  # and the notes beside them


def test_export_of_a_solve_point_runs_as_the_command_does(capsys):
    from trilemma.api import run_export
    from trilemma.report.jsonout import dumps_json

    pins = ["--gpu", "h100-sxm", "--params", "1B..7B", "--budget", "$1M", "--deadline", "30d"]
    code, out, _ = run(
        capsys, "export", "--to", "megatron", "--point", "1", "solve", *pins, "--json"
    )
    plan = SolveRequest(gpu="h100-sxm", params="1B..7B", budget="$1M", deadline="30d")
    doc = run_export(ExportRequest(to="megatron", point=1, plan=plan))
    assert code == 0 and json.loads(dumps_json(doc.to_dict())) == json.loads(out)


@pytest.mark.parametrize(("field", "value"), [("port", 0), ("port", 65536), ("host", " ")])
def test_serve_value_refused_by_the_request_with_the_flags_line(capsys, field, value):
    code, out, err = run(capsys, "serve", f"--{field}", str(value))
    with pytest.raises(InputError) as exc:
        ServeRequest(**{field: value})
    assert code == 2 and out == ""
    assert err == f"trilemma: error: {exc.value}\n"


def test_serve_on_a_busy_port_is_refused_before_the_banner(capsys, monkeypatch):
    import trilemma.web.serve as serve

    monkeypatch.setattr(serve, "run", lambda host, port: pytest.fail("served on a busy port"))
    said: list[str] = []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code, out, err = run(capsys, "serve", "--port", str(port))
        with pytest.raises(InputError) as exc:
            serve.serve(ServeRequest(port=port), say=said.append)
    assert code == 2 and out == "" and said == []
    assert err == f"trilemma: error: {exc.value}\n" and "port" in err
