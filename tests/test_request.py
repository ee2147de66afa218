"""The typed request of a verb (trilemma.request): each field written once, parsed when the request
is built, and the CLI's options, the web body and the Python API derived from it."""

from __future__ import annotations

import json

import pytest
from clitools import run

from trilemma.errors import InputError
from trilemma.request import EstimateRequest
from trilemma.specs import Precision, Recompute, ZeroStage
from trilemma.units import GlobalBatch


def test_text_with_units_is_parsed_into_typed_values_when_the_request_is_built():
    req = EstimateRequest(
        tokens="10B",
        seq="4k",
        price="$2.5",
        restart="30min",
        storage_bw="200GB/s",
        memory_headroom="10%",
        precision="FP8",
        zero="3",
        recompute="selective",
        **{"global-batch": "4M", "micro-batch": "2"},
    )
    assert (req.tokens, req.seq, req.price, req.restart) == (1e10, 4096, 2.5, 1800.0)
    assert (req.storage_bw, req.memory_headroom) == (2e11, 0.1)
    assert req.global_batch == GlobalBatch(4_000_000, approximate=True)  # a target: 4M is decimal
    assert (req.precision, req.zero, req.recompute) == (
        Precision.FP8,
        ZeroStage.THREE,
        Recompute.SELECTIVE,
    )
    assert req.micro_batch == 2 and req.gpus == 2048 and req.layout()["tp"] is None


def test_the_request_is_frozen():
    req = EstimateRequest(gpus=8)
    with pytest.raises(Exception, match="frozen"):
        req.gpus = 16  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [("seq", "20000000"), ("tokens", "-1"), ("pue", "high"), ("tp", "0"), ("context", "2k")],
)
def test_a_bad_value_is_refused_by_the_request_with_the_flags_line(capsys, field, value):
    """Building the request refuses the value with the one line the CLI prints for the flag (bounds
    the specs state, e.g. --restart's week, are refused when the specs are built)."""
    code, out, err = run(capsys, "estimate", f"--{field}", value, "--json")
    with pytest.raises(InputError) as exc:
        EstimateRequest(**{field: value})
    assert code == 2 and out == ""
    assert err == f"trilemma: error: {exc.value}\n"


def test_an_unknown_field_is_refused_naming_the_known_ones():
    with pytest.raises(InputError) as exc:
        EstimateRequest(colour="red")
    assert exc.value.field == "colour" and "gpus_per_node" in exc.value.allowed


def test_python_api_runs_a_request_as_the_cli_does(capsys):
    from trilemma.api import estimate

    args = [
        "--model",
        "llama2-7b",
        "--gpus",
        "64",
        "--tokens",
        "10B",
        "--tp",
        "2",
        "--price",
        "2.5",
    ]
    code, out, _ = run(capsys, "estimate", *args, "--json")
    est = estimate(EstimateRequest(model="llama2-7b", gpus=64, tokens="10B", tp=2, price=2.5))
    assert code == 0
    from trilemma.report.jsonout import dumps_json

    assert json.loads(dumps_json(est.to_dict())) == json.loads(out)


def test_the_estimate_command_options_are_the_request_fields():
    """The Typer options are generated from the fields: the same flags, plus the CLI's own output
    options (--json, --export)."""
    import typer.main

    from trilemma.cli import app

    cmd = typer.main.get_command(app).commands["estimate"]
    flags = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    fields = {f for o in EstimateRequest.options().values() for x in o.flags for f in x.split("/")}
    assert flags == fields | {"--json", "--export"}


SOLVE = ["--gpu", "h100-sxm", "--params", "1B..7B", "--budget", "$1M", "--deadline", "30d"]


def _no_timing(doc: dict) -> dict:
    doc["search"].pop("seconds")
    return doc


def test_python_api_solve_takes_a_request_or_its_fields_as_the_cli_does(capsys):
    from trilemma.api import solve
    from trilemma.report.jsonout import dumps_json
    from trilemma.request import SolveRequest

    code, out, _ = run(capsys, "solve", *SOLVE, "--failure-rate", "5e-5", "--json")
    fields = dict(gpu="h100-sxm", params="1B..7B", budget="$1M", deadline="30d")
    by_request = solve(SolveRequest(**fields, failure_rate="5e-5")).to_dict()
    by_fields = solve(**fields, failure_rate=5e-5).to_dict()
    assert code == 0
    cli = _no_timing(json.loads(out))
    assert _no_timing(json.loads(dumps_json(by_request))) == cli
    assert _no_timing(json.loads(dumps_json(by_fields))) == cli


def test_a_scenario_key_is_the_request_field_and_its_refusal_the_flags(capsys, tmp_path):
    """One name from flag to scenario to request (--failure-rate, failure_rate); an unknown key is
    refused with the list of known ones, which holds every field of the request."""
    from trilemma.request import SolveRequest

    path = tmp_path / "s.toml"
    path.write_text('deadline = "30d"\nbudget = "$1M"\nfailure-rate = "abc"\n', "utf-8")
    code, _, err = run(capsys, "solve", str(path), "--json")
    code_flag, _, err_flag = run(capsys, "solve", *SOLVE, "--failure-rate", "abc", "--json")
    with pytest.raises(InputError) as exc:
        SolveRequest(failure_rate="abc")
    assert code == code_flag == 2
    assert err == err_flag == f"trilemma: error: {exc.value}\n"
    path.write_text('deadline = "30d"\ncolour = "red"\n', "utf-8")
    code, _, err = run(capsys, "solve", str(path), "--json")
    assert code == 2 and err.startswith("trilemma: error: scenario colour: 'red' is not allowed")
    assert all(name in err for name in SolveRequest.options())
