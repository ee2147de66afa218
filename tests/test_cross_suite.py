"""Form weights learnt across suites (trilemma.quality.cross_suite): the weights by hand, a suite's own
held-out runs never setting its weights, and the forms' fits recovering an exact law."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.quality.cross_suite import KAPLAN, form_predictions, leave_one_suite_out
from trilemma.validate.quality import section


def test_weights_are_inverse_squares_of_the_other_suites_median_errors():
    # three suites, each holding out one run of loss 2.0; form a misses by 2% on B and 4% on C, form b
    # by 1% and 8%: for A, ē_a = median(2%, 4%) = 3%, ē_b = median(1%, 8%) = 4.5%, so
    # w_a = (1/0.03²) / (1/0.03² + 1/0.045²) = 0.045² / (0.03² + 0.045²) = 0.6923
    losses = {"A": [2.0], "B": [2.0], "C": [2.0]}
    preds = {
        "A": {"a": [2.2], "b": [1.9]},
        "B": {"a": [2.04], "b": [2.02]},
        "C": {"a": [2.08], "b": [2.16]},
    }
    out = leave_one_suite_out(preds, losses)
    wa = 0.045**2 / (0.03**2 + 0.045**2)
    assert out["A"]["weights"]["a"] == pytest.approx(wa)
    assert out["A"]["predicted"][0] == pytest.approx(wa * 2.2 + (1 - wa) * 1.9)
    # A's own predictions never move A's weights
    moved = {**preds, "A": {"a": [5.0], "b": [2.0]}}
    assert leave_one_suite_out(moved, losses)["A"]["weights"] == out["A"]["weights"]


def test_suites_of_one_source_never_weight_each_other():
    # B and C share a source (one recipe on two corpora): A is weighted by both, B by A alone (form a 1%
    # off on A, form b 5%: w_a = 25/26), and C's own figures never reach B
    losses = {"A": [1.0], "B": [1.0], "C": [1.0]}
    preds = {
        "A": {"a": [1.01], "b": [1.05]},
        "B": {"a": [1.0], "b": [1.0]},
        "C": {"a": [1.5], "b": [1.0]},
    }
    groups = {"A": "paper 1", "B": "paper 2", "C": "paper 2"}
    out = leave_one_suite_out(preds, losses, groups)
    assert out["B"]["weights"]["a"] == pytest.approx(25 / 26)
    moved = {**preds, "C": {"a": [1.0], "b": [3.0]}}
    assert leave_one_suite_out(moved, losses, groups)["B"]["weights"] == out["B"]["weights"]


def test_a_form_only_one_suite_can_take_is_weighted_by_the_others_alone():
    # Kaplan's form at one D is no member: B has no kaplan prediction; A's kaplan weight comes from C alone
    # (1% off, against 5% and 5% for the free form): w = 1/0.01² / (1/0.01² + 1/0.05²) = 25/26
    losses = {"A": [1.0], "B": [1.0], "C": [1.0]}
    preds = {
        "A": {"free": [1.0], KAPLAN: [1.0]},
        "B": {"free": [1.05]},
        "C": {"free": [0.95], KAPLAN: [1.01]},
    }
    w = leave_one_suite_out(preds, losses)["A"]["weights"]
    assert w[KAPLAN] == pytest.approx(25 / 26)
    assert set(leave_one_suite_out(preds, losses)["B"]["weights"]) == {"free"}


def test_form_predictions_recover_an_exact_law(exact_law):
    # the free form extrapolates Hoffmann et al.'s law to 10x the compute; runs at one D fit no tied
    # form and no Kaplan form
    x = exact_law
    p = form_predictions(x.n, x.d, x.loss, x.n_at, x.d_at)
    assert set(p) == {"free", "tied", "literature", KAPLAN}
    assert p["free"][0] == pytest.approx(x.truth[0], rel=1e-3)
    one_d = form_predictions(x.n, np.full_like(x.n, 3e11), x.loss, x.n_at, x.d_at)
    assert set(one_d) == {"free", "literature"}


def test_validate_cross_column_uses_only_the_other_suites():
    q = section()
    done = [s for s in q["loss_suites"] if "skipped" not in s]
    for s in done:
        assert sum(s["cross_weights"].values()) == pytest.approx(1.0)
        assert set(s["cross_weights"]) <= set(s["form_predictions"])
        assert np.isfinite(s["cross"]["median"])
    assert q["cross_median_abs_rel_error"] == pytest.approx(
        float(np.median([s["cross"]["median"] for s in done]))
    )
