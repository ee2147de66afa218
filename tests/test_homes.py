"""Each formula has one home: the homes against hand calculations and published
figures, and the callers against the homes."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from trilemma.errors import InputError
from trilemma.estimate.cost import energy_j, run_cost, wall_power_w
from trilemma.estimate.params import param_counts
from trilemma.quality.forms import chinchilla_loss, kaplan_loss, tokens_for_loss
from trilemma.quality.laws import get_law, law_from_dict, law_to_dict
from trilemma.quality.predict import LossPrediction, loss_block, precision_bits, predict_loss_block
from trilemma.shape import heads_for_width, llama_ffn, llama_spec, nearest_divisor
from trilemma.specs.enums import DTYPE_BYTES, LossUnit, NCounts, Precision
from trilemma.units import HOUR, KWH

SRC = Path(__file__).resolve().parents[1] / "src" / "trilemma"


# ------------------------------------------------------------------ the loss laws


def test_chinchilla_and_kaplan_forms_by_hand():
    # E + A/N^α + B/D^β with E = A = B = α = β = 1 at N = 2, D = 4: 1 + 1/2 + 1/4
    c = {"E": 1.0, "A": 1.0, "B": 1.0, "alpha": 1.0, "beta": 1.0}
    assert chinchilla_loss(c, 2.0, 4.0) == pytest.approx(1.75, rel=1e-15)
    # [(N_c/N)^(α_N/α_D) + D_c/D]^α_D with N_c = N, D_c = D, α_N = α_D = 0.5: 2^0.5
    k = {"N_c": 3.0, "D_c": 5.0, "alpha_N": 0.5, "alpha_D": 0.5}
    assert kaplan_loss(k, 3.0, 5.0) == pytest.approx(math.sqrt(2), rel=1e-15)


def test_chinchilla_published_point():
    # Hoffmann 2022 Approach 3 (E 1.69, A 406.4, B 410.7, α 0.34, β 0.28) at Chinchilla's 70B / 1.4T:
    # 1.69 + 406.4/70e9^0.34 + 410.7/1.4e12^0.28 = 1.69 + 0.0828 + 0.1632 ≈ 1.936 (by hand)
    c = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    assert float(chinchilla_loss(c, 70e9, 1.4e12)) == pytest.approx(1.936, abs=1e-3)


def test_tokens_for_loss_inverts_the_law_in_closed_form():
    # D = (B / (L* − E − A/N^α))^(1/β): the chinchilla form solved for D
    c = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    n = np.array([1e9, 1e10, 7e10])  # E + A/N^α = 2.04, 1.86, 1.77: below the target
    target = 2.3
    d = tokens_for_loss(
        lambda dd: chinchilla_loss(c, n, dd), target, n.shape, d_min=1.0, d_max=1e18, iters=90
    )
    exact = (c["B"] / (target - c["E"] - c["A"] / n ** c["alpha"])) ** (1 / c["beta"])
    np.testing.assert_allclose(d, exact, rtol=1e-9)
    # out of reach: below E + A/N^α even with d_max tokens
    far = tokens_for_loss(
        lambda dd: chinchilla_loss(c, n, dd), 1.7, n.shape, d_min=1.0, d_max=1e18, iters=90
    )
    assert np.isinf(far).all()


def test_solver_and_optimal_share_the_inverse():
    from trilemma.quality.allocation import tokens_for_loss as optimal_tokens
    from trilemma.solve.optimize import D_MAX, D_MIN
    from trilemma.solve.optimize import tokens_for_loss as solver_tokens

    law = get_law("chinchilla")
    c = law.constants
    n = np.array([1e9, 7e9])
    a = optimal_tokens(law, c, n, 2.2, None, 1.0)
    b = solver_tokens(
        lambda nt, nn, d, p: chinchilla_loss(c, nt, d), n, n, 2.2, np.array(["bf16"] * 2)
    )
    exact = (c["B"] / (2.2 - c["E"] - c["A"] / n ** c["alpha"])) ** (1 / c["beta"])
    assert (D_MIN <= exact).all() and (exact <= D_MAX).all()
    np.testing.assert_allclose(a, exact, rtol=1e-9)
    np.testing.assert_allclose(b, exact, rtol=1e-9)


def test_quality_imports_no_report_module():
    for f in (SRC / "quality").glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("trilemma.report"), (
                    f"{f.name} imports {node.module}"
                )


# ------------------------------------------------------------------ energy


def test_energy_llama2_7b_published():
    # Touvron et al. 2023 (Llama 2, arXiv 2307.09288) Table 2: 7B took 184,320 GPU-hours at 400 W
    # (GPU power only, no PUE): 184,320 h × 0.4 kW = 73,728 kWh.
    watts = wall_power_w(400.0)
    joules = energy_j(184_320, HOUR, watts)
    assert joules / KWH == pytest.approx(73_728, rel=1e-12)


def test_energy_factors_by_hand_and_run_cost_uses_them():
    # 8 devices × 2 h × 700 W × 0.8 × (1 + 0.1) × 1.2 = 8 × 7200 s × 739.2 W
    w = wall_power_w(700.0, 0.8, 0.1, 1.2)
    assert w == pytest.approx(739.2, rel=1e-12)
    assert energy_j(8, 2 * HOUR, w) == pytest.approx(8 * 7200 * 739.2, rel=1e-12)
    c = run_cost(8, 2 * HOUR, 2.0, 700.0, 0.8, 0.1, 1.2, 0.5)
    assert c.energy_j == pytest.approx(8 * 7200 * 739.2, rel=1e-12)
    assert c.gpu_hours == pytest.approx(16) and c.usd == pytest.approx(32)
    assert c.co2_kg == pytest.approx(8 * 7200 * 739.2 / KWH * 0.5, rel=1e-12)


def test_facility_power_and_homes_by_hand():
    # Llama 3.1 405B's 16,384 H100 SXM (Dubey et al. 2024 §3.3.1) at 700 W (TDP), PUE 1.1, no host:
    # 16,384 × 700 × 1.1 = 12.616 MW; an average US home uses 10,791 kWh a year (EIA 2022) =
    # 10,791,000 Wh / 8,766 h = 1,231.0 W, so that draw is 12,615,680 / 1,231.0 = 10,248 homes
    from trilemma.estimate.cost import facility_power_w, homes_powered

    p = facility_power_w(16_384, wall_power_w(700.0, pue=1.1))
    assert p == pytest.approx(12_615_680.0, rel=1e-12)
    assert homes_powered(p, 10_791.0) == pytest.approx(
        12_615_680.0 / (10_791_000.0 / 8_766.0), rel=1e-12
    )
    # a DGX H100's host share: (10,200 − 8 × 700) / 8 = 575 W per GPU on top of its 700 W, × PUE
    assert wall_power_w(700.0, pue=1.1, host_w_per_device=575.0) == pytest.approx(
        (700 + 575) * 1.1, rel=1e-12
    )


def test_estimate_power_default_and_host_power_flag():
    from trilemma.api import estimate

    e = estimate("llama2-7b", "h100-sxm", 64, tokens=1e9)
    assert e.cost.host_power_w_per_device == pytest.approx((10_200 - 8 * 700) / 8)
    assert e.cost.power_w == pytest.approx(64 * (700 + 575) * e.cluster.pue, rel=1e-12)
    assert e.cost.energy_kwh == pytest.approx(e.cost.power_w * e.time.total_s / KWH, rel=1e-12)
    # --host-power per node: 0 gives the devices alone (the published convention); 8 kW over 8 devices = 1 kW each
    z = estimate("llama2-7b", "h100-sxm", 64, tokens=1e9, cluster={"host_power_w_per_node": 0.0})
    assert z.cost.power_w == pytest.approx(64 * 700 * z.cluster.pue, rel=1e-12)
    k = estimate("llama2-7b", "h100-sxm", 64, tokens=1e9, cluster={"host_power_w_per_node": 8000.0})
    assert k.cost.host_power_w_per_device == pytest.approx(1000.0)


def test_parse_power():
    from trilemma.units import parse_power

    assert (
        parse_power("4.6kW") == pytest.approx(4600.0)
        and parse_power("4600W") == 4600.0
        and parse_power("0") == 0.0
    )
    with pytest.raises(InputError):
        parse_power("-3kW")
    with pytest.raises(InputError):
        parse_power("4.6 kWh")


# ------------------------------------------------------------------ bit widths


def test_precision_bits_are_the_dtype_sizes():
    for p in Precision:
        assert precision_bits(p.value) == DTYPE_BYTES[p.value] * 8
    assert (
        precision_bits("bf16") == 16 and precision_bits("fp8") == 8 and precision_bits("int4") == 4
    )


# ------------------------------------------------------------------ shape rule


def test_llama_ffn_and_block_reproduce_llama2_7b():
    # Llama-2-7B: d 4096, 32 layers, 32 heads, MLP 11008, vocab 32000, untied: 6,738,415,616 parameters
    assert llama_ffn(4096, 256) == 11008
    spec = llama_spec(
        32,
        4096,
        heads_for_width(4096, 128),
        vocab_size=32000,
        tied_embeddings=False,
        ffn_multiple=256,
    )
    assert spec.n_heads == 32
    assert param_counts(spec).total == 6_738_415_616


def test_nearest_divisor_scales():
    # divisors of 16: 1, 2, 4, 8, 16. Target 5.8: |4 − 5.8| = 1.8 < |8 − 5.8| = 2.2, but 8/5.8 < 5.8/4
    assert nearest_divisor(16, 5.8, log_scale=False) == 4
    assert nearest_divisor(16, 5.8) == 8
    # ties go to the larger: 4 and 8 are both 2 from 6
    assert nearest_divisor(16, 6, log_scale=False) == 8
    for n in range(1, 200):
        assert n % nearest_divisor(n, n / 7 + 0.5) == 0


def test_heads_rule_shared_by_ladder():
    from trilemma.ladder.plan import HEAD_WIDTH, MAX_HEADS, shape_for_width

    for d in range(16, 1025, 8):
        s = shape_for_width(d)
        assert d % s.heads == 0 and 2 <= s.heads <= MAX_HEADS
        assert s.heads == heads_for_width(d, HEAD_WIDTH, min_heads=2, max_heads=MAX_HEADS)
        assert s.spec().ffn_dim == llama_ffn(d, 8) and s.spec().ffn_matrices == 3


# ------------------------------------------------------------------ enums and the typed loss block


def test_law_closed_choices_are_enums():
    law = get_law("chinchilla")
    assert law.n_counts is NCounts.TOTAL and law.loss_unit is LossUnit.NATS_PER_TOKEN
    doc = law_to_dict(law)
    with pytest.raises(InputError):
        law_from_dict({**doc, "n_counts": "embedding"}, "test")
    with pytest.raises(InputError):
        law_from_dict({**doc, "loss_unit": "nats/byte"}, "test")
    assert (
        law_from_dict({**doc, "n_counts": "non-embedding"}, "test").n_counts
        is NCounts.NON_EMBEDDING
    )


def test_predict_loss_block_is_typed_and_matches_the_dict():
    from trilemma.presets import get_model, model_presets

    for name in ("llama2-7b", next(n for n, m in model_presets().items() if m.is_moe)):
        m = get_model(name)
        block = predict_loss_block(m, 2e12)
        assert isinstance(block, LossPrediction) and isinstance(block.warnings, tuple)
        assert block.to_dict() == loss_block(m, 2e12)
        assert (any("mixture of experts" in n for n in block.notes)) == m.is_moe
        p = param_counts(m)
        total = (
            p.active if m.is_moe else p.total
        )  # a mixture of experts: the law at its active size
        assert block.params_used == (
            total if block.n_counts is NCounts.TOTAL else total - p.embedding
        )
