"""The mixture-of-experts loss (trilemma.quality.moe): Krajewski et al. 2024's law against the paper's
own compute-optimal points, a hand calculation for Mixtral 8x7B, and the properties of its band."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.presets import get_model
from trilemma.quality.forms import fine_grained_moe_loss
from trilemma.quality.laws import get_law
from trilemma.quality.moe import (
    beyond_moe_fit,
    moe_constants,
    moe_shape,
    reducible_ratio,
)
from trilemma.quality.moe_fast import moe_loss_mean
from trilemma.quality.predict import predict_loss, predict_loss_block

#: Krajewski et al. 2024 (arXiv 2402.07871) Table 2, compute-optimal MoE models at E = 64:
#: (active parameters, tokens, granularity, the loss the paper prints)
TABLE_2 = [
    (100e6, 4.37e9, 8, 3.133),
    (1e9, 28.94e9, 16, 2.491),
    (3e9, 72.90e9, 16, 2.245),
    (7e9, 137.60e9, 32, 2.076),
    (70e9, 941.07e9, 32, 1.694),
    (300e9, 2.96e12, 64, 1.503),
    (1e12, 7.94e12, 64, 1.367),
]


@pytest.mark.parametrize(("active", "tokens", "g", "loss"), TABLE_2)
def test_law_reproduces_the_papers_compute_optimal_losses(active, tokens, g, loss):
    # §6.1: N = d²·(8E + 4)·n_blocks with 12·d²·n_blocks active, so N = N_act·(8·64 + 4)/12 at E = 64.
    # Table 2 prints the active size rounded (64 x 1B): the losses agree within 1.5%.
    n = active * (8 * 64 + 4) / 12
    assert float(fine_grained_moe_loss(moe_constants()["moe"], n, tokens, g)) == pytest.approx(
        loss, rel=0.015
    )


def test_mixtral_ratio_by_hand():
    # Mixtral 8x7B (E = 8/2 = 4, G = 2): 12,617,781,248 active non-embedding parameters, of which the two
    # routed experts are 32 layers × 2 × 3·4096·14336 = 11,274,289,152. On 2T tokens, by hand from Table 1:
    #   dense at N_act: 0.47 + 16.3/12.62e9^0.126 + 26.7/2e12^0.127 = 0.47 + 0.870 + 0.732 = 2.072
    #   MoE at E = 64: N_64 = 1.343e9 + 64 × 11.27e9 = 722.9e9;
    #     0.47 + (2.1/2^0.58 + 18.1)/722.9e9^0.115 + 30.8/2e12^0.147 = 0.47 + 0.844 + 0.479 = 1.793
    #   E = 4 (Clark 2022: log L linear in log E): 2.072 × (1.793/2.072)^(ln 4/ln 64) = 1.974
    #   r = (1.974 − 0.47)/(2.072 − 0.47) = 0.939
    shape = moe_shape(get_model("mixtral-8x7b"))
    assert shape.expansion == 4 and shape.granularity == 2
    assert shape.routed_active == 32 * 2 * 3 * 4096 * 14336
    assert float(reducible_ratio(shape, 2e12)) == pytest.approx(0.939, abs=0.002)


def test_mixtral_scores_between_its_active_and_its_total_dense_sizes():
    m = get_model("mixtral-8x7b")
    moe = predict_loss_block(m, 2e12)
    law = get_law(None)
    dense_total = predict_loss(law, 46_702_792_704, 46_702_792_704 - 262_144_000, 2e12)
    dense_active = predict_loss(law, 12_879_925_248, 12_617_781_248, 2e12)
    # a dense 47B no longer scores the same: the MoE lies between its active and total dense sizes
    assert dense_total.mean + 0.02 < moe.mean < dense_active.mean
    assert moe.moe_ratio == pytest.approx(0.939, abs=0.002)
    assert moe.params_used == 12_879_925_248  # the host law at the active size
    assert any("Krajewski" in n for n in moe.notes)
    assert moe.to_dict()["moe_ratio"] == moe.moe_ratio


def test_one_expert_a_token_of_one_is_dense():
    m = get_model("mixtral-8x7b").model_copy(update={"n_experts": 2, "top_k": 2})
    shape = moe_shape(m)
    assert shape.expansion == 1 and float(reducible_ratio(shape, 1e12)) == pytest.approx(1.0)


def test_band_widens_beyond_the_fitted_runs():
    m = get_model("mixtral-8x7b")
    shape = moe_shape(m)
    f = moe_constants()["fit"]
    assert beyond_moe_fit(shape, 1e11) == pytest.approx(np.log(shape.n_at_fitted_expansion / 3.7e9))
    assert beyond_moe_fit(shape, 1e15) == pytest.approx(np.log(1e15 / f["D_max"]))
    near, far = predict_loss_block(m, 1e11), predict_loss_block(m, 1e15)
    width = lambda p: (p.high - p.low) / p.mean  # noqa: E731
    assert near.low < near.mean < near.high and width(far) > width(near)
    host = predict_loss(get_law(None), shape.active_total, shape.active_non_embedding, 1e11)
    assert width(near) > (host.high - host.low) / host.mean  # its own error added to the host's


def test_vectorised_point_matches_the_block():
    m = get_model("deepseek-v3")
    shape = moe_shape(m)
    d = np.array([1e12, 14.8e12])
    fast = moe_loss_mean(None, shape, d, None, np.array(["bf16", "fp8"]))
    assert fast[0] == pytest.approx(predict_loss_block(m, 1e12).mean, rel=1e-12)
    assert fast[1] == pytest.approx(predict_loss_block(m, 14.8e12, precision="fp8").mean, rel=1e-12)
