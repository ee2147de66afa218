"""The loss band beyond the runs (trilemma.quality.extrapolation_band): the distance in N, D and compute
by hand, a suite's σ₁ by moments, the floor over sources, and on the shipped suites the band of each
suite's `trilemma fit` law holding its held-out runs, with the shipped floor the one the suites give."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trilemma.quality.extrapolation_band import (
    EXTRAPOLATION_FLOOR,
    e_folds_beyond,
    floor_from_suites,
    runs_range,
    suite_sd,
)
from trilemma.quality.fit import fit_runs
from trilemma.quality.predict import beyond_fit, residual_sd
from trilemma.quality.runs import Runs
from trilemma.validate.quality import section


def test_distance_is_the_most_of_n_d_and_compute_by_hand():
    # fitted runs up to N 1e9, D 2e10, the largest run 6·1e9·1e10 = 6e19 FLOP (not N_max·D_max)
    n_max, d_max, c_max = 1e9, 2e10, 6e19
    # a corner run: N and D at their maxima, its compute 2x the largest run's: ln 2 beyond
    assert e_folds_beyond(1e9, 2e10, n_max, d_max, c_max) == pytest.approx(math.log(2.0))
    # N 3x beyond, D and compute less so: ln 3 (compute 6·3e9·1e10 = 1.8e20, ln 3 too)
    assert e_folds_beyond(3e9, 1e10, n_max, d_max, c_max) == pytest.approx(math.log(3.0))
    # inside every range: 0, never negative
    assert e_folds_beyond(5e8, 1e10, n_max, d_max, c_max) == 0.0
    # without D (or without its maxima) the distance is N's alone
    assert e_folds_beyond(3e9, None, n_max, d_max, c_max) == pytest.approx(math.log(3.0))
    assert e_folds_beyond(1e9, 2e10, n_max, None, None) == 0.0


def test_runs_range_gives_the_largest_runs_compute_not_the_product_of_maxima():
    rng = runs_range([1e8, 1e9], [1e11, 1e10])
    assert rng["C_max"] == pytest.approx(6 * 1e9 * 1e10)  # 6e19, not 6·1e9·1e11
    assert (rng["N_min"], rng["N_max"], rng["D_min"], rng["D_max"]) == (1e8, 1e9, 1e10, 1e11)


def test_suite_sd_by_moments_by_hand():
    # residuals 0.03 and 0.05 at 2 and 3 e-folds, in-sample 0.01: (mean r² − σ₀²) / mean x²
    want = math.sqrt(((0.03**2 + 0.05**2) / 2 - 0.01**2) / ((4 + 9) / 2))
    assert suite_sd([0.03, -0.05], [2.0, 3.0], 0.01) == pytest.approx(want)
    assert suite_sd([0.001], [2.0], 0.01) == 0.0  # within the in-sample error
    assert suite_sd([0.05], [0.0], 0.0) == 0.0  # nothing beyond


def test_floor_is_the_rms_over_sources_of_each_sources_median_suite():
    suites = {
        "a1": {"source": "A", "sd": 0.01},
        "a2": {"source": "A", "sd": 0.03},
        "a3": {"source": "A", "sd": 0.05},  # A's median 0.03
        "b": {"source": "B", "sd": 0.04},
    }
    assert floor_from_suites(suites) == pytest.approx(math.sqrt((0.03**2 + 0.04**2) / 2))
    assert floor_from_suites(suites, leave_out="B") == pytest.approx(0.03)
    assert floor_from_suites({}) == 0.0


def test_a_fit_carries_the_floor_and_records_it_in_the_law(exact_law):
    # an exact law: the runs' own error beyond them is ~0, so the band carries the floor
    x = exact_law
    rep = fit_runs(Runs(x.n, x.d, x.loss, "exact"), n_boot=20, holdout=0)
    r = rep.law.uncertainty.residual
    assert r["log_sd_per_e_fold"] == pytest.approx(EXTRAPOLATION_FLOOR)
    assert rep.law.fit_range["C_max"] == pytest.approx(6 * float((x.n * x.d).max()))
    # 10x the largest run's compute at its N_max: ln 10 e-folds, by the law's own distance
    n_at = float(x.n.max())
    d_at = 10 * float((x.n * x.d).max()) / n_at
    assert beyond_fit(rep.law, n_at, d_at) == pytest.approx(math.log(10.0))
    assert residual_sd(rep.law, n_at, d_at) == pytest.approx(
        math.hypot(r["log_sd"], EXTRAPOLATION_FLOOR * math.log(10.0))
    )
    assert rep.to_dict()["extrapolation_sd"]["floor"] == EXTRAPOLATION_FLOOR


def test_shipped_suites_bands_hold_their_held_out_runs_and_give_the_shipped_floor():
    b = section()["band"]
    # the floor over every source, rounded as shipped
    assert EXTRAPOLATION_FLOOR == pytest.approx(b["floor_over_sources"], abs=5e-5)
    # an 80% band, each suite's floor measured without its source: at least 70% of the held-out runs
    # inside (before the floor and the compute distance: 5 of 13)
    assert b["runs"] >= 10 and b["inside"] / b["runs"] >= 0.7
    for s in section()["loss_suites"]:
        if s.get("band"):
            for (lo, hi), y in zip(s["band"]["bands"], s["held_out_loss"]):
                assert lo < hi and np.isfinite([lo, hi]).all()
                assert (lo <= y <= hi) in s["band"]["inside"]


def test_fit_prints_the_error_the_band_grows_by_beyond_the_runs(
    quality_app, capsys, tmp_path, exact_law
):
    from clitools import run

    x = exact_law
    path = tmp_path / "runs.csv"
    path.write_text("N,D,loss\n" + "".join(f"{a},{b},{c}\n" for a, b, c in zip(x.n, x.d, x.loss)))
    code, out, _ = run(
        capsys, "fit", str(path), "--bootstrap", "20", "--out", str(tmp_path / "l.toml")
    )
    assert code == 0
    flat = " ".join(out.split())
    assert f"the band grows by {EXTRAPOLATION_FLOOR:.3g} in log loss per e-fold" in flat
    assert "the floor: what fits of published suites erred by at ten times their compute" in flat
    # the law file carries the largest run's compute, read back as the same law's range
    from trilemma.quality import get_law

    law = get_law(str(tmp_path / "l.toml"))
    assert law.fit_range["C_max"] == pytest.approx(6 * float((x.n * x.d).max()), rel=1e-6)


def test_a_law_file_with_a_non_positive_c_max_is_refused_naming_the_field():
    from trilemma.errors import InputError
    from trilemma.quality import get_law
    from trilemma.quality.laws import law_from_dict, law_to_dict

    doc = {k: v for k, v in law_to_dict(get_law("besiroglu2024")).items() if v is not None}
    doc.pop("formula", None)
    doc["range"] = dict(doc["range"], C_max=-1.0)
    with pytest.raises(InputError, match=r"range\.C_max"):
        law_from_dict(doc, "my.law.toml")
