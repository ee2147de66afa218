"""`trilemma fit --method averaged`: beside the staged law, the free, tied and literature-exponent forms
averaged by held-out error (trilemma.quality.extrapolate, the fit validate --kind quality checks), said
in the document (``method``) and on the terminal; on runs made from a known law the free form gives its
constants back and the average extrapolates it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from clitools import run

from trilemma.errors import InputError
from trilemma.quality.fit import fit_runs
from trilemma.quality.runs import Runs
from trilemma.request.fit import FitRequest

# Hoffmann et al. 2022 (arXiv 2203.15556) App. D.2's fitted law, α ≠ β so only the free form holds it
LAW = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def law(n, d):
    return LAW["E"] + LAW["A"] / n ** LAW["alpha"] + LAW["B"] / d ** LAW["beta"]


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory):
    # 5 sizes from 20M to 2B parameters at 5, 20 and 80 tokens per parameter, noise-free
    tmp = tmp_path_factory.mktemp("averaged")
    rows = [(n, r * n) for n in np.geomspace(2e7, 2e9, 5) for r in (5, 20, 80)]
    f = tmp / "runs.csv"
    f.write_text(
        "N,D,loss\n" + "".join(f"{float(n)!r},{float(d)!r},{float(law(n, d))!r}\n" for n, d in rows)
    )
    return f


def test_averaged_fit_recovers_the_law_and_extrapolates_it(runs_csv, capsys):
    code, out, err = run(
        capsys,
        "fit",
        str(runs_csv),
        "--method",
        "averaged",
        "--bootstrap",
        "0",
        "--holdout",
        "0",
        "--starts",
        "8",
        "--json",
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["method"] == "averaged" and d["law"]["alpha"] == pytest.approx(0.34, rel=1e-4)
    forms = {f["form"]: f for f in d["averaged"]["forms"]}
    assert set(forms) == {"free", "tied", "literature"}
    assert sum(f["weight"] for f in forms.values()) == pytest.approx(1.0)
    for k, v in LAW.items():  # the free form gives the law's constants back
        assert forms["free"][k] == pytest.approx(v, rel=1e-4), k
    # the literature form (α = β = 0.35) misses a law with β = 0.28: it weighs least
    assert forms["literature"]["weight"] < min(forms["free"]["weight"], forms["tied"]["weight"])
    # the average at 100x the largest run's compute (20B parameters, 400B tokens) within 0.5% of the law
    n, dd = 2e10, 4e11
    avg = sum(
        f["weight"] * (f["E"] + f["A"] / n ** f["alpha"] + f["B"] / dd ** f["beta"])
        for f in forms.values()
    )
    assert abs(avg / law(n, dd) - 1) < 0.005


def test_the_default_is_the_staged_fit_and_a_bad_method_is_refused(tmp_path):
    assert FitRequest(runs=str(tmp_path / "x.csv")).method == "staged"
    with pytest.raises(InputError) as e:
        FitRequest(runs=str(tmp_path / "x.csv"), method="best")
    assert "method" in str(e.value) and "staged" in str(e.value)
    runs = Runs(np.geomspace(1e8, 1e9, 5), np.full(5, 2e10), np.linspace(3.0, 2.6, 5), "runs")
    with pytest.raises(InputError) as e2:  # the Python API: the same refusal
        fit_runs(runs, method="best")
    assert str(e2.value) == str(e.value)
