"""Kaplan et al. 2020's non-separable form as a member of the extrapolation pool (measured, not used):
the formula against a hand calculation, its gradient against finite differences, the fit recovering an
exact law, and the weight it takes beside the additive members."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trilemma.quality.extrapolate import averaged_fit
from trilemma.quality.fit_kaplan import _Kaplan, backtest_error, fit_kaplan, with_kaplan
from trilemma.quality.forms import kaplan_loss

# Hoffmann 2022's published constants (E 1.69, A 406.4, B 410.7, α 0.34, β 0.28) in Kaplan's form: the
# limits E + (N_c/N)^α and E + (D_c/D)^β equal Hoffmann's terms when N_c = A^(1/α), D_c = B^(1/β)
LAW = {
    "E": 1.69,
    "N_c": 406.4 ** (1 / 0.34),
    "D_c": 410.7 ** (1 / 0.28),
    "alpha_N": 0.34,
    "alpha_D": 0.28,
}


def _runs(seed: int = 0, k: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(math.log(1e7), math.log(1e9), k)), np.exp(
        rng.uniform(math.log(1e9), math.log(1e11), k)
    )


def test_kaplan_loss_with_e_by_hand():
    n, d = 1e9, 2e10
    by_hand = 1.69 + ((406.4 ** (1 / 0.34) / n) ** (0.34 / 0.28) + 410.7 ** (1 / 0.28) / d) ** 0.28
    assert kaplan_loss(LAW, n, d) == pytest.approx(by_hand, rel=1e-12)
    # D → ∞: Hoffmann's E + A/N^α; N → ∞: E + B/D^β
    assert kaplan_loss(LAW, n, 1e40) == pytest.approx(1.69 + 406.4 / n**0.34, rel=1e-9)
    assert kaplan_loss(LAW, 1e60, d) == pytest.approx(1.69 + 410.7 / d**0.28, rel=1e-9)
    # without E, Kaplan's own form (the laws' kaplan entries) is unchanged
    no_e = {k: v for k, v in LAW.items() if k != "E"}
    assert kaplan_loss(no_e, n, d) == pytest.approx(by_hand - 1.69, rel=1e-12)


def test_objective_gradient_matches_finite_differences():
    n, d = _runs()
    loss = kaplan_loss(LAW, n, d) * np.exp(np.random.default_rng(1).normal(0, 0.01, n.size))
    obj = _Kaplan(n, d, loss, 1e-3)
    t = np.array([1.0, 2.0, 0.3, 0.4, math.log(0.5)])
    _, g = obj(t)
    h = 1e-6
    num = [(obj(t + h * e)[0] - obj(t - h * e)[0]) / (2 * h) for e in np.eye(5)]
    assert g == pytest.approx(num, rel=1e-5, abs=1e-10)


def test_fit_recovers_an_exact_law():
    n, d = _runs()
    c = fit_kaplan(n, d, kaplan_loss(LAW, n, d))
    for k, v in LAW.items():
        assert c[k] == pytest.approx(v, rel=1e-4), k


def test_one_token_count_has_no_member():
    n, _ = _runs()
    d = np.full_like(n, 3e11)
    loss = kaplan_loss(LAW, n, d)
    assert backtest_error(n, d, loss) is None
    avg = averaged_fit(n, d, loss)
    both = with_kaplan(avg, n, d, loss)
    assert both.weight == 0.0 and both.constants is None
    assert np.allclose(both.predict(n, d), avg.predict(n, d))


def test_weight_is_its_share_of_inverse_squared_errors():
    # an exact Kaplan-form law over 100x in compute: the member is scored and weighted 1/e² beside the
    # additive forms (Bates & Granger 1969), and the mix stays between its members
    n, d = _runs(2, 60)
    loss = kaplan_loss(LAW, n, d)
    avg = averaged_fit(n, d, loss)
    both = with_kaplan(avg, n, d, loss)
    e = backtest_error(n, d, loss)
    raw = sum(1 / avg.held_out_error[k] ** 2 for k in avg.names)
    assert both.weight == pytest.approx((1 / e**2) / (raw + 1 / e**2))
    mix = both.predict(n, d)
    ours = kaplan_loss(both.constants, n, d)
    lo, hi = np.minimum(avg.predict(n, d), ours), np.maximum(avg.predict(n, d), ours)
    assert np.all(mix >= lo - 1e-12) and np.all(mix <= hi + 1e-12)
