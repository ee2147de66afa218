"""A fit that cannot go degenerate silently: constants the runs cannot pin are tied or fixed,
with the reason, and the band holds the out-of-sample error as well as the parameter spread.

The degenerate case is the tiny ladder's own nine fit runs and its held-out run (measured with
`trilemma ladder --tiny`, seed 0, on the standard library's source; nats per byte). Fitted free, they
give E ~ 1e-113 and an 80% band for alpha of about [-0.6, 33]: no irreducible loss, no exponent.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from clitools import run

from trilemma.quality.fit import fit_runs
from trilemma.quality.fit_pinning import E_FLOOR, EXP_MAX, LITERATURE_EXPONENT
from trilemma.quality.fit_procedure import TIE, fit_point
from trilemma.quality.laws import read_law_file, write_law
from trilemma.quality.predict import predict_loss, residual_sd
from trilemma.quality.runs import Runs

# (N non-embedding, D tokens, eval loss) of the tiny ladder's fit runs, and its held-out run
TINY_FIT = [
    (6736, 33792, 2.594892740249634),
    (6736, 67584, 2.39370197057724),
    (13944, 69632, 2.349941909313202),
    (6736, 134656, 2.266166388988495),
    (13944, 139264, 2.1438997983932495),
    (25248, 126464, 2.220237135887146),
    (13944, 279040, 1.9568231999874115),
    (25248, 252416, 1.9708158075809479),
    (25248, 504832, 1.7303644120693207),
]
TINY_HELD_OUT = (83280, 833024, 1.4741179943084717)


def tiny_runs() -> Runs:
    n, d, loss = (np.array(c, dtype=float) for c in zip(*TINY_FIT))
    return Runs(n, d, loss, "tiny-ladder")


@pytest.fixture(scope="module")
def tiny_fit():
    """The tiny ladder's runs fitted once with 200 bootstrap refits (the held-out test's count), shared by
    the tests that read the fit or its law file (each refit took 6-10 s; the suite's time is a budget)."""
    return fit_runs(tiny_runs(), n_boot=200, holdout=0)


def test_the_tiny_ladder_free_fit_is_degenerate():
    """The old answer, kept as the reason for the rest: free, E runs to 0."""
    r = tiny_runs()
    assert fit_point(r.n, r.d, r.loss).constants["E"] < E_FLOOR * r.loss.min()
    assert (
        fit_point(r.n, r.d, r.loss, fix=TIE).constants["E"] < E_FLOOR * r.loss.min()
    )  # tying is not enough


def test_degenerate_runs_get_fixed_exponents_with_a_reason(tiny_fit):
    rep = tiny_fit
    c = rep.law.constants
    assert c["alpha"] == c["beta"] == LITERATURE_EXPONENT  # fixed, and reported as fixed
    assert "fixed at 0.35" in rep.fixed and len(rep.unpinned) == 2
    assert "E = " in rep.unpinned[0] and "~0" in rep.unpinned[0]
    assert any("cannot pin" in w for w in rep.warnings)
    assert (
        E_FLOOR * rep.runs.loss.min() <= c["E"] < rep.runs.loss.min()
    )  # physical: 0 < E < every loss
    doc = rep.to_dict()
    assert doc["constants_fixed"]["fit"] == rep.fixed and doc["law"]["alpha"] == LITERATURE_EXPONENT
    assert rep.law.fit_report["constants_fixed"] == rep.fixed
    # the bootstrap refits keep the same constraint: alpha and beta do not move
    assert np.all(rep.samples[:, 3] == LITERATURE_EXPONENT) and np.all(
        rep.samples[:, 4] == LITERATURE_EXPONENT
    )


def test_the_held_out_run_lies_inside_the_band(tiny_fit):
    """The prediction 3.3x beyond the largest fitted N: the band must hold the measured loss."""
    rep = tiny_fit
    n, d, measured = TINY_HELD_OUT
    p = predict_loss(rep.law, n, n, d, precision="fp32")
    assert p.low <= measured <= p.high
    assert "out-of-sample" in p.interval


def test_well_pinned_runs_stay_free():
    """Noise-free-ish runs of a known law over 2 decades of N and D: nothing is tied or fixed."""
    truth = {"E": 1.8, "A": 400.0, "B": 1500.0, "alpha": 0.34, "beta": 0.36}
    n = np.repeat(np.geomspace(2e7, 2e9, 8), 5)
    d = n * np.tile([5.0, 10.0, 20.0, 40.0, 80.0], 8)
    loss = (
        truth["E"] + truth["A"] / n ** truth["alpha"] + truth["B"] / d ** truth["beta"]
    ) * np.exp(np.random.default_rng(0).normal(0, 0.003, n.size))
    rep = fit_runs(Runs(n, d, loss, "known"), n_boot=50, holdout=0)
    assert rep.fixed == "all five constants free" and rep.unpinned == ()
    assert 0 < rep.law.constants["alpha"] <= EXP_MAX


def test_residual_sd_grows_beyond_the_fitted_sizes(tiny_fit):
    rep = tiny_fit
    r = rep.law.uncertainty.residual
    n_max = rep.law.fit_range["N_max"]
    assert residual_sd(rep.law, n_max / 2) == pytest.approx(r["log_sd"])  # inside the fitted sizes
    # one e-fold beyond: sqrt(s0^2 + s1^2), by hand
    assert residual_sd(rep.law, n_max * math.e) == pytest.approx(
        math.hypot(r["log_sd"], r["log_sd_per_e_fold"])
    )
    near = predict_loss(rep.law, n_max, n_max, 5e5, precision="fp32")
    far = predict_loss(rep.law, 10 * n_max, 10 * n_max, 5e5, precision="fp32")
    assert math.log(far.high / far.low) > math.log(near.high / near.low)


def test_law_file_keeps_the_error_and_optimal_has_no_nan(capsys, tmp_path, tiny_fit):
    rep = tiny_fit
    path = write_law(rep.law, tmp_path / "law.toml")
    back = read_law_file(path)
    assert dict(back.uncertainty.residual) == dict(rep.law.uncertainty.residual)
    code, out, err = run(capsys, "optimal", "--flops", "1e18", "--law", str(path), "--json")
    assert code == 0 and err == "" and "NaN" not in out and "Infinity" not in out
    json.loads(out)


@pytest.mark.parametrize(
    "bad",
    [
        "log_sd = -1.0\nlog_sd_per_e_fold = 0.1\ndf = 3",
        "log_sd = 0.1\nlog_sd_per_e_fold = 0.1\ndf = 0",
        "log_sd = 0.1\ndf = 3",
    ],
)
def test_bad_residual_table_is_refused(capsys, tmp_path, bad, tiny_fit):
    rep = tiny_fit
    path = write_law(rep.law, tmp_path / "law.toml")
    text = path.read_text()
    head, tail = text.split("[uncertainty.residual]")
    rest = tail.split("\n[", 1)
    path.write_text(
        head + "[uncertainty.residual]\n" + bad + "\n" + ("\n[" + rest[1] if len(rest) > 1 else "")
    )
    code, out, err = run(capsys, "optimal", "--flops", "1e18", "--law", str(path), "--json")
    assert code == 2 and err.count("\n") == 1 and "uncertainty.residual" in err
