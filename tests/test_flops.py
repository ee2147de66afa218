"""FLOPs per token against hand counts and published formulas.

- PaLM (Chowdhery et al. 2022, arXiv 2204.02311) App. B: model FLOPs per token 6N + 12·L·H·Q·T.
- Narayanan et al. 2021 (arXiv 2104.04473) eq. (3), FLOPs per iteration with full recompute:
  96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)).
- Kaplan et al. 2020 (arXiv 2001.08361) §2.1: C_forward ≈ 2N + 2·n_layer·n_ctx·d_attn.
"""

from __future__ import annotations

import pytest

from trilemma.estimate.flops import (
    hardware_flop_per_token,
    kaplan_flop_per_token,
    model_flop_per_token,
    narayanan_flop_per_iteration,
    six_n_flop_per_token,
)
from trilemma.estimate.params import param_counts
from trilemma.presets import get_model


def test_llama2_7b_model_flops_by_hand():
    m = get_model("llama2-7b")
    d, f, L, V, s = 4096, 11008, 32, 32000, 4096
    matmul = L * (4 * d * d + 3 * d * f) + V * d  # Q,K,V,O + gate/up/down, + untied LM head
    assert matmul == 6_607_077_376
    assert model_flop_per_token(m, s) == 6 * matmul + 12 * L * s * d


def test_tied_head_still_costs_a_matmul():
    """GPT-2 ties the LM head to the embedding; the V×d matmul still runs (torchtitan's note)."""
    m = get_model("gpt2-124m")
    pc = param_counts(m)
    d, L, V = 768, 12, 50257
    assert pc.matmul_active == L * (4 * d * d + 8 * d * d) + V * d


@pytest.mark.parametrize("name", ["gpt3-175b", "gpt3-6.7b", "gpt3-2.7b"])
@pytest.mark.parametrize("s", [2048, 4096])
def test_narayanan_eq3_equals_hardware_flops_with_full_recompute(name, s):
    m = get_model(name)
    B = 1536
    ours = hardware_flop_per_token(m, s, "full") * B * s
    ref = narayanan_flop_per_iteration(B, s, m.n_layers, m.d_model, m.vocab_size)
    assert ours == pytest.approx(ref, rel=1e-12)


def test_selective_recompute_adds_only_attention_core_forward():
    m = get_model("llama2-13b")
    s = 4096
    extra = hardware_flop_per_token(m, s, "selective") - model_flop_per_token(m, s)
    assert extra == pytest.approx(4 * m.n_layers * s * m.d_attn)
    assert hardware_flop_per_token(m, s, "none") == model_flop_per_token(m, s)


def test_kaplan_counts_the_context_term_half_as_much_as_palm():
    m = get_model("gpt3-175b")
    s = 2048
    palm, kaplan = model_flop_per_token(m, s), kaplan_flop_per_token(m, s)
    assert palm - kaplan == pytest.approx(6 * m.n_layers * s * m.d_attn)


def test_mixtral_flops_use_active_parameters():
    m = get_model("mixtral-8x7b")
    pc = param_counts(m)
    d, f, L, V = 4096, 14336, 32, 32000
    attn = 2 * d * d + 2 * d * 1024  # Q and O d×d, K and V d×(8 kv heads × 128)
    matmul = L * (attn + d * 8 + 2 * 3 * d * f) + V * d  # router + 2 of 8 experts
    assert pc.matmul_active == matmul
    assert six_n_flop_per_token(m) == 6 * 12_879_925_248


def test_gpt3_175b_total_compute_matches_brown_2020():
    """Brown et al. 2020 Table D.1: GPT-3 175B used 3.14e23 FLOPs (≈ 6·N·D with D = 300B tokens)."""
    m = get_model("gpt3-175b")
    assert six_n_flop_per_token(m) * 300e9 == pytest.approx(3.14e23, rel=0.01)
