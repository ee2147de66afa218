"""model_for_params: a Llama-style shape whose exact count is near the target."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trilemma.errors import InputError
from trilemma.estimate.params import param_counts
from trilemma.shape import ASPECT_RANGE, model_for_params
from trilemma.specs import FfnType, NormType, PositionType

log_targets = st.floats(min_value=math.log10(5e7), max_value=12.0).map(lambda x: 10.0**x)


def _total(target: float, vocab: int = 32000) -> int:
    return param_counts(model_for_params(target, vocab)).total


@settings(max_examples=300, deadline=None)
@given(log_targets)
def test_count_within_5_percent(target: float) -> None:
    assert abs(_total(target) / target - 1) <= 0.05


@settings(max_examples=200, deadline=None)
@given(log_targets)
def test_shape_follows_the_rule(target: float) -> None:
    m = model_for_params(target)
    assert m.d_model % m.n_heads == 0 and m.d_model // m.n_heads == m.d_head
    assert m.d_head == (64 if m.d_model < 2048 else 128)
    assert m.n_heads % m.kv_heads == 0
    assert ASPECT_RANGE[0] <= m.d_model / m.n_layers <= ASPECT_RANGE[1]
    assert m.ffn_dim % 256 == 0 and m.ffn_dim >= 8 * m.d_model / 3
    if m.d_model >= 4096:
        assert m.n_heads % 8 == 0  # tensor parallelism of 8 divides the heads
    total = param_counts(m).total
    assert m.n_kv_heads == (8 if total >= 30e9 else None)  # GQA from 30B (Llama 2)
    assert m.ffn_type == FfnType.SWIGLU
    assert (m.norm, m.position) == (NormType.RMSNORM, PositionType.ROTARY)
    assert not (m.tied_embeddings or m.qkv_bias or m.out_bias or m.mlp_bias)
    assert m.causal and m.seq_len is None


@settings(max_examples=300, deadline=None)
@given(log_targets, log_targets)
def test_larger_target_never_fewer_params(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert _total(lo) <= _total(hi)


@settings(max_examples=100, deadline=None)
@given(
    st.floats(min_value=math.log10(5e7), max_value=12.0), st.floats(min_value=1e-9, max_value=0.05)
)
def test_monotone_for_close_targets(x: float, rel: float) -> None:
    # pairs a hair apart, where a per-target tolerance rule would most easily step backwards
    target = 10.0**x
    assert _total(target) <= _total(target * (1 + rel))


def test_dense_sweep_is_monotone_and_close() -> None:
    previous, worst = 0, 0.0
    for i in range(1500):
        target = 10 ** (math.log10(5e7) + i * (13 - math.log10(5e7)) / 1499)
        total = _total(target)
        assert total >= previous
        previous, worst = total, max(worst, abs(total / target - 1))
    assert worst <= 0.035  # 3.2 % at worst (below 1B some 2 % bins hold no shape)


def test_known_points() -> None:
    # Llama-2-7B's own shape is the one the rule files for its count
    llama = model_for_params(6.74e9)
    assert (llama.n_layers, llama.d_model, llama.n_heads, llama.ffn_dim) == (32, 4096, 32, 11008)
    assert param_counts(llama).total == 6_738_415_616
    assert llama.name == "auto-6.74B (L=32, d=4096)"
    assert llama.source.startswith("shape rule")
    big = model_for_params(70e9)
    assert big.kv_heads == 8 and abs(param_counts(big).total / 70e9 - 1) < 0.02
    # named by the parameters it has (a solve's optimum is printed beside its count), not by the target
    assert param_counts(big).total != 70e9
    assert big.name.startswith(f"auto-{param_counts(big).total / 1e9:.3g}B (")


def test_vocab_size_is_used() -> None:
    m = model_for_params(1e9, vocab_size=128256)
    assert m.vocab_size == 128256
    assert abs(param_counts(m).total / 1e9 - 1) <= 0.05


@pytest.mark.parametrize("target", [0, -1, -7e9, math.nan, math.inf, 1.01e13, 1e20, "7e9", True])
def test_bad_targets(target: object) -> None:
    with pytest.raises(InputError) as exc:
        model_for_params(target)  # type: ignore[arg-type]
    assert exc.value.field == "target"


@pytest.mark.parametrize("vocab", [0, -5, 3.5, True])
def test_bad_vocab(vocab: object) -> None:
    with pytest.raises(InputError) as exc:
        model_for_params(1e9, vocab)  # type: ignore[arg-type]
    assert exc.value.field == "vocab_size"


def test_too_small_for_the_vocabulary() -> None:
    # 32000 × 256 × 2 embedding tables alone are 16M parameters
    with pytest.raises(InputError, match="nearest has 18,089,216"):
        model_for_params(1e6)
    with pytest.raises(InputError, match="vocab_size 128256"):
        model_for_params(1e8, vocab_size=128256)
