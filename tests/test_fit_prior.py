"""The loss-law fit with a Gaussian prior on its exponents (trilemma.quality.fit_prior): the prior's width
by hand from the published exponents, its gradient against finite differences, and its two limits (no
weight: the free fit; a large weight: the literature's centre)."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.quality.fit_pinning import LITERATURE_EXPONENT
from trilemma.quality.fit_prior import WIDTH, Prior, noise_weight, prior_fit
from trilemma.quality.fit_procedure import fit_point
from trilemma.quality.objective import _Objective

# a hand-written law (Hoffmann 2022's constants, App. D.2) on a small ladder, with 0.5% log noise
N = np.repeat(np.geomspace(5e7, 1e9, 5), 3)
D = N * np.tile([10.0, 20.0, 40.0], 5)
LAW = 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28
LOSS = LAW * np.exp(np.random.default_rng(3).normal(0.0, 0.005, N.size))


def test_width_is_the_spread_of_the_published_exponents():
    # by hand: 0.34, 0.28 (Hoffmann), 0.3478, 0.3658 (Besiroglu), 0.353, 0.353 (Muennighoff);
    # mean 0.339933, squared deviations sum 0.0046644, /5 -> 0.00093288, sqrt -> 0.030543
    assert WIDTH == pytest.approx(0.030543, abs=2e-6)


def test_penalty_gradient_matches_finite_differences():
    obj = Prior(weight=0.01).wrap(_Objective(N, D, LOSS, 1e-3, True))
    t = np.array([1.0, 2.0, 0.5, 0.4, 0.3])
    _, g = obj(t)
    h = 1e-6
    for j in (3, 4):
        e = np.zeros(5)
        e[j] = h
        fd = (obj(t + e)[0] - obj(t - e)[0]) / (2 * h)
        assert g[j] == pytest.approx(fd, rel=1e-4)


def test_no_weight_is_the_free_fit_and_a_large_one_the_literature():
    free = fit_point(N, D, LOSS, starts=8)
    same = fit_point(N, D, LOSS, starts=8, prior=Prior(weight=0.0)).constants
    assert same["alpha"] == pytest.approx(free.constants["alpha"], abs=1e-6)
    held = fit_point(N, D, LOSS, starts=8, prior=Prior(weight=1e3)).constants
    assert held["alpha"] == pytest.approx(LITERATURE_EXPONENT, abs=1e-3)
    assert held["beta"] == pytest.approx(LITERATURE_EXPONENT, abs=1e-3)


def test_sigma_from_the_residuals_and_the_literature_without_any_degree_of_freedom():
    # σ²/2 = F/(n - k): 15 runs, 5 constants -> F/10; 3 runs at one D with 3 constants -> none left
    assert noise_weight(2e-5, 15, 5) == pytest.approx(2e-6)
    assert noise_weight(1e-6, 3, 3) is None
    n3, d3 = N[::5][:3], np.full(3, 3e11)
    loss3 = 1.7 + 400.0 / n3**0.5
    c = prior_fit(n3, d3, loss3, fit_point(n3, d3, loss3, starts=8), starts=8).constants
    assert c["alpha"] == LITERATURE_EXPONENT
