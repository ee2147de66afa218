"""Hostile scenario files give one line and exit 2; an optimum is never dominated."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trilemma.cli import main
from trilemma.solve.optimize import Choice, best_index


@pytest.mark.parametrize(
    "text, needle",
    [
        (b'gpu = 7\nbudget = "$1M"\n', "scenario gpu"),
        (b"\xff\xfe\x00\x81 binary", "UTF-8"),
        (b"max-gpus = 8\nmax_gpus = 16\n", "one spelling"),
        (b'gpu = []\nbudget = "$1M"\n', "non-empty list"),
        (b"budget = true\n", "scenario budget"),
    ],
)
def test_bad_scenario_file_is_one_line(tmp_path, capsys, text, needle):
    f = tmp_path / "s.toml"
    f.write_bytes(text)
    code = main(["solve", str(f), "--deadline", "1d"])
    err = capsys.readouterr().err
    assert (
        code == 2 and err.count("\n") == 1 and err.startswith("trilemma: error:") and needle in err
    ), err


def test_scenario_path_that_is_a_directory(tmp_path, capsys):
    code = main(["solve", str(tmp_path), "--deadline", "1d"])
    err = capsys.readouterr().err
    assert code == 2 and "not a directory" in err and err.count("\n") == 1


def test_optimum_breaks_ties_on_the_other_corners():
    """Three plans at the same loss and cost: the fastest wins (the others are dominated)."""
    one = np.ones(3)
    ch = Choice(
        tokens=one,
        time_s=np.array([16.9, 4.2, 9.0]),
        usd=np.array([1000.0, 1000.0, 1000.0]),
        gpu_hours=one,
        kwh=one,
        loss=np.array([2.3, 2.3, 2.3]),
        feasible=np.array([True, True, True]),
    )
    assert best_index(ch, "loss") == 1
    ch2 = Choice(
        tokens=one,
        time_s=np.array([5.0, 5.0, 5.0]),
        usd=np.array([900.0, 1000.0, 900.0]),
        gpu_hours=one,
        kwh=one,
        loss=np.array([2.4, 2.3, 2.3]),
        feasible=np.array([True, True, True]),
    )
    assert best_index(ch2, "time") == 2  # equal time: cheaper, then lower loss


def test_units_a_user_leaves_out_or_abbreviates(capsys):
    """`--inter-node-bw 400` is not 400 B/s without a word; `--seq 4k` is 4,096 tokens."""
    from trilemma.units import parse_bandwidth

    with pytest.raises(Exception, match="with its unit"):
        parse_bandwidth("400", "inter-node-bw")
    assert parse_bandwidth("2.5e10") == 2.5e10 and parse_bandwidth("400Gb/s") == 5e10
    assert main(["estimate", "--seq", "4k", "--gpus", "8", "--tokens", "1B", "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["batch"]["stages"][0]["seq_len"] == 4096


def test_json_never_carries_nan_or_infinity(capsys):
    """`optimal --inference-tokens 1e30` overflowed to Infinity in --json with exit 0. The search
    now keeps the training tokens at or below 1e18 (the smallest model that reaches the loss within them),
    so 1e30 has a finite answer; a count whose FLOPs overflow a double is refused naming the flag, exit 2,
    nothing on stdout, no numpy warning on stderr."""
    import json

    assert main(["optimal", "--flops", "1e23", "--inference-tokens", "1e30", "--json"]) == 0
    inf = json.loads(capsys.readouterr().out)["results"][0]["inference_optimal"]
    assert 0 < inf["tokens"] <= 1e18 and math.isfinite(inf["total_flops"])
    assert any("limit of 1e+18" in w for w in inf["warnings"])
    code = main(["optimal", "--flops", "1e23", "--inference-tokens", "1e300", "--json"])
    out, err = capsys.readouterr()
    assert (
        code == 2
        and out == ""
        and err.count("\n") == 1
        and "inference-tokens" in err
        and "Warning" not in err
    )


def test_dumps_json_names_the_key_of_a_nan():
    from trilemma.errors import InfeasibleError
    from trilemma.report.jsonout import dumps_json

    with pytest.raises(InfeasibleError, match=r"a\.b\.1 would be nan"):
        dumps_json({"a": {"b": [1.0, float("nan")]}})
    assert dumps_json({"a": [1.0, 2]}).startswith("{")


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (
            ["estimate", "--tokens", "1"],
            2,
            "tokens: 1.0 is not allowed; expected at least one global batch",
        ),
        (["estimate", "--model", "100T"], 2, "model: "),
        (["solve", "--params", "1k..2k", "--budget", "$1M", "--deadline", "1d"], 2, "params: "),
        (["solve", "--budget", "$0.001", "--deadline", "30d"], 1, "no plan meets the pins"),
    ],
)
def test_errors_name_the_users_flag_and_what_cannot_be_done(capsys, args, code, needle):
    """No internal field names (plan.global_batch_tokens, target) in errors; a pin only an
    impossible run meets is infeasible (exit 1), not a plan that breaks it."""
    got = main(args)
    err = capsys.readouterr().err
    assert got == code and needle in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda s: s.replace("A = 406.4", "A = 1e308"), "constants.A` in [1e-06, 1e+15]"),
        (
            lambda s: s.replace('schema = "trilemma.law/1"', 'schema = "trilemma.law/99"'),
            "`schema`",
        ),
        (lambda s: 'colour = "blue"\n' + s, "unknown: colour"),
        (lambda s: s.replace("N_min = 5.73e7", "N_min = 1e12"), "range.N_min"),
    ],
)
def test_law_files_out_of_physics_are_refused(tmp_path, capsys, edit, needle):
    """A law TOML with A = 1e308, another schema version, an unknown key or an inverted
    range is refused in one line (it once overflowed or passed silently)."""
    from importlib import resources

    text = (resources.files("trilemma") / "presets" / "laws" / "hoffmann2022.toml").read_text(
        encoding="utf-8"
    )
    bad = edit(text)
    assert bad != text
    f = tmp_path / "law.toml"
    f.write_text(bad, encoding="utf-8")
    code = main(["optimal", "--flops", "1e23", "--law", str(f), "--json"])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1, err
