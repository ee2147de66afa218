"""Values that parse but make no physical sense: each refused in one line naming its field (or, where
the rule is to repair, repaired with a warning), never trusted quietly and never a traceback.

Laws: constants outside their stated bounds (trilemma.quality.law.constant_bounds), an unknown constant,
a repeated uncertainty parameter, a covariance whose draws leave the bounds; a law inside its bounds
whose allocation still leaves a double's range. The `local` hardware profile, `fit`'s runs (perplexity
as loss, N in two units, repeated rows) and lists of GPU types are below them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import run  # the tests' folder is on the path

from trilemma.errors import InputError
from trilemma.quality.laws import law_from_dict

# ------------------------------------------------------------------ laws

LAW = {
    "schema": "trilemma.law/1",
    "name": "mylaw",
    "form": "chinchilla",
    "n_counts": "total",
    "loss_unit": "nats/token",
    "data": "a test corpus",
    "tokenizer": "a test tokenizer",
    "source": "a test",
    "constants": {"E": 1.8, "A": 480.0, "B": 2000.0, "alpha": 0.35, "beta": 0.37},
}
COV_PARAMS = ["ln_A", "ln_B", "ln_E", "alpha", "beta"]
BESIROGLU_SD = [0.25, 0.42, 0.014, 0.015, 0.021]  # its published covariance's standard deviations


def _toml(doc: dict) -> str:
    from trilemma.tomlw import toml_dumps

    return toml_dumps(doc)


def _law_file(tmp_path: Path, **changes: object) -> Path:
    """LAW with top-level keys replaced and ``constants`` merged, written to a TOML file."""
    doc = {**LAW, **{k: v for k, v in changes.items() if k != "constants"}}
    doc["constants"] = {**LAW["constants"], **changes.get("constants", {})}  # type: ignore[dict-item]
    p = tmp_path / "law.toml"
    p.write_text(_toml(doc), encoding="utf-8")
    return p


def _covariance(sd: list[float]) -> dict:
    cov = [[(s * s if i == j else 0.0) for j, s in enumerate(sd)] for i in range(len(sd))]
    return {
        "kind": "covariance",
        "level": 0.8,
        "source": "t",
        "params": COV_PARAMS,
        "covariance": cov,
    }


def _refused(capsys, law: Path, *needles: str, verb: str = "optimal") -> str:
    """The law refused by the CLI in one line naming every needle; the same by the Python API."""
    args = ["--flops", "1e23"] if verb == "optimal" else ["--gpus", "64", "--tokens", "10B"]
    code, out, err = run(capsys, verb, *args, "--law", str(law), "--json")
    assert code == 2 and out == "", (code, out[:300])
    assert err.count("\n") == 1 and err.startswith("trilemma: error: law: "), err
    assert all(n in err for n in needles), err
    import sys

    tomllib = __import__("tomllib" if sys.version_info >= (3, 11) else "tomli")
    with pytest.raises(InputError) as e:
        law_from_dict(tomllib.loads(law.read_text()), str(law))
    assert all(n in str(e.value) for n in needles) or needles[0] == "allocation"
    return err


def test_vanishing_exponent_is_refused_not_divided_by(tmp_path, capsys):
    """alpha = 1e-300 divided by zero in the closed form (a traceback); now a bound on the constant."""
    for k in ("alpha", "beta"):
        law = _law_file(tmp_path, constants={k: 1e-300})
        _refused(capsys, law, f"constants.{k}", "[0.01, 3]")


@pytest.mark.parametrize(
    ("name", "value", "bound"),
    [("A", 1e-300, "[1e-06, 1e+15]"), ("B", 1e-300, "[1e-06, 1e+15]"), ("E", 1e14, "13.8")],
)
def test_constant_outside_its_physical_bound_is_refused(tmp_path, capsys, name, value, bound):
    law = _law_file(tmp_path, constants={name: value})
    _refused(capsys, law, f"constants.{name}", bound, verb="estimate")


def test_allocation_outside_a_double_is_refused_not_answered(tmp_path, capsys):
    """Every constant in bounds, but N* = (αA/βB)^(1/(α+β)) overflows: one line, no inf in an answer."""
    law = _law_file(tmp_path, constants={"A": 1e15, "B": 1e-6, "alpha": 0.01, "beta": 0.01})
    code, out, err = run(capsys, "optimal", "--flops", "1e23", "--law", str(law), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "compute-optimal allocation is finite" in err and "N* = inf" in err


def test_law_without_a_data_term_has_no_allocation_not_a_crash(tmp_path, capsys):
    """B = beta = 0 (what `fit` writes for runs at one D) divided by zero in `optimal --flops`."""
    law = _law_file(tmp_path, constants={"B": 0.0, "beta": 0.0})
    code, out, err = run(capsys, "optimal", "--flops", "1e23", "--law", str(law), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "law" in err and "data term" in err
    code, out, err = run(capsys, "optimal", "--loss", "2.5", "--law", str(law), "--json")
    assert code == 0 and "NaN" not in out and "Infinity" not in out, err


def test_unknown_constant_is_refused(tmp_path, capsys):
    law = _law_file(tmp_path, constants={"gamma": 0.5})
    _refused(capsys, law, "unknown gamma", "constants E, A, B, alpha, beta")


def test_repeated_uncertainty_parameter_is_refused(tmp_path, capsys):
    unc = _covariance(BESIROGLU_SD[:2]) | {"params": ["alpha", "alpha"]}
    law = _law_file(tmp_path, uncertainty=unc)
    _refused(capsys, law, "uncertainty.params", "repeated: alpha")
    unc = _covariance(BESIROGLU_SD[:2]) | {"params": ["ln_A", "A"]}  # one constant under two names
    _refused(capsys, _law_file(tmp_path, uncertainty=unc), "repeated: ln_A")


def test_covariance_of_1e300_is_refused_not_a_band_from_zero(tmp_path, capsys):
    law = _law_file(tmp_path, uncertainty=_covariance([1e150] * 5))
    _refused(capsys, law, "uncertainty.covariance", "sd(ln_A)")


def test_covariance_whose_draws_leave_the_bounds_is_refused(tmp_path, capsys):
    """sd(alpha) = 0.2 around 0.35: a 3-sigma draw is negative, a loss that grows with N."""
    sd = [*BESIROGLU_SD[:3], 0.2, BESIROGLU_SD[4]]
    _refused(capsys, _law_file(tmp_path, uncertainty=_covariance(sd)), "3-sigma draws of alpha")


def test_published_covariance_is_still_accepted(tmp_path, capsys):
    law = _law_file(tmp_path, uncertainty=_covariance(BESIROGLU_SD))
    code, out, err = run(capsys, "optimal", "--flops", "1e23", "--law", str(law), "--json")
    assert code == 0, err
    loss = json.loads(out)["results"][0]["compute_optimal"]["loss"]
    assert 0 < loss["low"] < loss["mean"] < loss["high"] < 13.8


# ------------------------------------------------------------------ the hostile corpus's law files

#: each law file of tests/test_hostile_corpus.py and what its refusal must name: the check it was
#: written for (None: a valid law, accepted). Its base file lacked `data`, so a file that passed its
#: own check stopped at that one, and law_unknown_key's key landed inside [range].
LAW_CASES: dict[str, tuple[str, ...] | None] = {
    "law_ok.toml": None,
    "law_A_huge.toml": ("constants.A",),
    "law_alpha_huge.toml": ("constants.alpha",),
    "law_alpha_zero.toml": ("constants.alpha",),
    "law_alpha_neg.toml": ("constants.alpha",),
    "law_E_nan.toml": ("constants.E",),
    "law_E_inf.toml": ("constants.E",),
    "law_E_neg.toml": ("constants.E",),
    "law_B_str.toml": ("constants.B",),
    "law_no_E.toml": ("missing E",),
    "law_unknown_key.toml": ("unknown: colour",),
    "law_schema_99.toml": ("`schema`",),
    "law_range_inverted.toml": ("range.N_min",),
    "law_form_bad.toml": ("`form`",),
    "law_cov_huge.toml": ("uncertainty.covariance",),
    "law_binary.toml": ("TOML", "UTF-8", "utf-8", "text"),
    "law_dir.toml": ("file",),
    "law_empty.toml": ("`name`", "empty"),
    "law_nested.toml": ("nested",),
}


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory) -> Path:
    from test_hostile_corpus import write_files

    return write_files(tmp_path_factory.mktemp("corpus"))


def test_every_corpus_law_file_has_its_intended_check():
    from test_hostile_corpus import FILES

    laws = {n for n in FILES if n.startswith("law_")} - {"law_huge.toml"}  # size: the file reader's
    assert laws == set(LAW_CASES)


@pytest.mark.parametrize("verb", ["optimal", "estimate"])
@pytest.mark.parametrize("name", sorted(LAW_CASES))
def test_corpus_law_file_reaches_the_check_it_was_written_for(corpus_files, capsys, name, verb):
    args = ["--flops", "1e23"] if verb == "optimal" else ["--gpus", "64", "--tokens", "10B"]
    code, out, err = run(capsys, verb, *args, "--law", str(corpus_files / name), "--json")
    if LAW_CASES[name] is None:
        assert code == 0, err
        return
    assert code == 2 and err.count("\n") == 1 and err.startswith("trilemma: error: law"), err
    assert "`data`" not in err, f"{name} stopped at the base file's missing `data`: {err}"
    assert any(n in err for n in LAW_CASES[name]), f"{name}: {err}"


# ------------------------------------------------------------------ the `local` hardware profile


@pytest.fixture
def local_profile(tmp_path, monkeypatch) -> Path:
    """A stated `local` CPU profile in a config directory of this test's own; its JSON's path."""
    from clitools import save_stated_cpu_profile

    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(tmp_path / "config"))
    save_stated_cpu_profile()
    return tmp_path / "config" / "hardware" / "local.json"


ESTIMATE_LOCAL = ("estimate", "--gpu", "local", "--gpus", "1", "--model", "100M", "--tokens", "1B")


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        (("peak_flop_per_s", "fp32"), 1e30, "peak_flop_per_s.fp32: 1e+30"),
        (("hbm_bw_bytes_per_s",), 0.001, "hbm_bw_bytes_per_s: 0.001"),
    ],
)
def test_hand_edited_profile_outside_physical_bounds_is_refused(
    local_profile, capsys, field, value, shown
):
    code, _, err = run(capsys, *ESTIMATE_LOCAL, "--precision", "fp32", "--json")
    assert code == 0, err  # the profile as the probe wrote it is used
    doc = json.loads(local_profile.read_text())
    target = doc["hardware"]
    for k in field[:-1]:
        target = target[k]
    target[field[-1]] = value
    local_profile.write_text(json.dumps(doc))
    code, out, err = run(capsys, *ESTIMATE_LOCAL, "--precision", "fp32", "--json")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"hardware profile {local_profile}.{shown}" in err and "largest preset" in err, err


# ------------------------------------------------------------------ fit's runs


def _runs_csv(tmp_path: Path, rows: list[tuple[float, float, float]], repeat: int = 1) -> Path:
    p = tmp_path / "runs.csv"
    body = "".join(f"{n:.6g},{d:.6g},{loss:.6g}\n" for n, d, loss in rows) * repeat
    p.write_text("N,D,loss\n" + body, encoding="utf-8")
    return p


def _ladder() -> list[tuple[float, float, float]]:
    return [
        (n, d, 1.8 + 480 / n**0.35 + 2000 / d**0.37)
        for n in (1e7, 3e7, 1e8, 3e8)
        for d in (2e8, 6e8, 2e9)
    ]


def _fit(capsys, tmp_path: Path, runs: Path) -> tuple[int, str, str]:
    out = tmp_path / "fit.law.toml"
    return run(
        capsys, "fit", str(runs), "--bootstrap", "2", "--starts", "1", "--out", str(out), "--json"
    )


def test_perplexity_in_the_loss_column_is_refused(tmp_path, capsys):
    import math

    runs = _runs_csv(tmp_path, [(n, d, math.exp(loss)) for n, d, loss in _ladder()])
    code, out, err = _fit(capsys, tmp_path, runs)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "losses at most 13.8 nats/token" in err and "row 1 has" in err


@pytest.mark.parametrize(
    ("scale", "needle"),
    [(1e-6, "at least 1,000 (125M, not 125)"), (1e-4, "model sizes jump from")],
)
def test_n_in_two_units_is_refused(tmp_path, capsys, scale, needle):
    """The smaller half of the sizes written in millions (or in units of 10k) beside raw counts."""
    rows = [(n * scale if n < 1e8 else n, d, loss) for n, d, loss in _ladder()]
    code, out, err = _fit(capsys, tmp_path, _runs_csv(tmp_path, rows))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "runs" in err and needle in err, err


def test_rows_repeated_21_times_are_fitted_once_with_a_warning(tmp_path, capsys):
    code, out, err = _fit(capsys, tmp_path, _runs_csv(tmp_path, _ladder(), repeat=21))
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["runs"]) == 12, len(doc["runs"])
    assert any("240 repeated rows dropped" in w for w in doc["warnings"]), doc["warnings"]


# ------------------------------------------------------------------ lists of GPU types

SOLVE = ("solve", "--params", "1B..7B", "--budget", "$1M", "--deadline", "30d")


def test_gpu_listed_three_times_is_searched_once(capsys):
    counts = []
    for gpu in ("h100-sxm", "h100-sxm,h100-sxm,H100"):
        code, out, err = run(capsys, *SOLVE, "--gpu", gpu, "--json")
        assert code == 0, err
        counts.append(json.loads(out)["search"]["candidates"])
    assert counts[0] == counts[1], counts


def test_long_gpu_list_is_refused_at_parse_everywhere(tmp_path, capsys):
    """200,000 repeats hung the search; the same one-line refusal from CLI, scenario, API and web."""
    from trilemma.solve import MAX_LIST_NAMES, solve

    many = ["h100-sxm"] * 200_000
    code, out, err = run(capsys, *SOLVE, "--gpu", ",".join(many), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert (
        f"gpu: 'a list of 200,000 names' is not allowed; expected at most {MAX_LIST_NAMES}" in err
    )
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'params = "1B..7B"\nbudget = "$1M"\ndeadline = "30d"\ngpu = [' + '"h100-sxm",' * 100 + "]\n"
    )
    code, out, err = run(capsys, "solve", str(scenario), "--json")
    assert code == 2 and "gpu: 'a list of 100 names'" in err, err
    with pytest.raises(InputError, match="a list of 200,000 names"):
        solve(params="1B..7B", budget="$1M", deadline="30d", gpu=many)
    web = pytest.importorskip("trilemma.web.app")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    with TestClient(web.create_app(), raise_server_exceptions=False) as client:
        body = {"params": "1B..7B", "budget": "$1M", "deadline": "30d", "gpu": many[:100]}
        r = client.post("/api/solve", json=body)
    assert r.status_code == 422 and r.json()["field"] == "gpu", r.text[:300]
    assert f"at most {MAX_LIST_NAMES}" in r.json()["error"], r.text[:300]


def test_too_little_compute_for_the_inference_search_names_flops(capsys):
    """At 1,000 FLOP the compute-optimal loss is ~792 nats, beyond any target the inference-aware
    search takes: the refusal names --flops, which the user gave, not the loss derived from it."""
    code, out, err = run(
        capsys, "optimal", "--flops", "1000", "--inference-tokens", "1e12", "--json"
    )
    assert code == 2 and out == "" and err.startswith("trilemma: error: flops: ")
