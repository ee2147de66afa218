"""Memory: activations against Korthikanti et al. 2022 Table 2, model states against ZeRO.

References
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  arXiv 2205.05198, Table 2 (bytes per layer, fp16, GPT with dropout):
    no parallelism          s·b·h·(34 + 5·a·s/h)
    tensor parallel         s·b·h·(10 + 24/t + 5·a·s/(h·t))
    TP + sequence parallel  s·b·h/t·(34 + 5·a·s/h)
    TP + SP + selective     s·b·h/t·34
    full recompute (SP)     2·s·b·h/t
  and §4.2.3: with 1F1B the first stage holds p micro-batches, i.e. L layers' worth in total.
- Rajbhandari et al. 2020, "ZeRO", arXiv 1910.02054, Figure 1: per-device model states
  (2 + 2 + K)·Ψ, 2Ψ + 2Ψ + K·Ψ/N_d, 2Ψ + (2 + K)·Ψ/N_d, (2 + 2 + K)·Ψ/N_d with K = 12;
  for Ψ = 7.5B and N_d = 64: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB.
"""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.estimate.activations import activation_bytes_per_layer
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.memory import memory_per_device, model_state_bytes
from trilemma.estimate.params import param_counts
from trilemma.presets import constants, get_model
from trilemma.specs import DtypeSpec, Layout, ModelSpec, Precision, Stage, TrainingPlan

GPT3 = get_model("gpt3-175b")  # 96 layers, h = 12288, a = 96 heads, dropout
S, B = 2048, 1


def _L(**kw) -> LayoutArrays:
    return LayoutArrays.from_layouts([Layout(**kw)])


def _act(m: ModelSpec, lay: LayoutArrays, flash: bool = False) -> tuple[float, float]:
    full, kept = activation_bytes_per_layer(m, S, lay, 2.0, flash)
    return float(np.asarray(full)[0]), float(np.asarray(kept)[0])


def test_gpt3_dropout_and_shape_match_the_paper_setting():
    assert GPT3.dropout and GPT3.n_layers == 96 and GPT3.d_model == 12288 and GPT3.n_heads == 96


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_korthikanti_table2_tensor_parallel(t):
    h, a = GPT3.d_model, GPT3.n_heads
    full, kept = _act(GPT3, _L(tp=t, sp=False, micro_batch=B))
    assert kept == full
    assert full == pytest.approx(S * B * h * (10 + 24 / t + 5 * a * S / (h * t)), rel=1e-12)


def test_korthikanti_table2_no_parallelism_is_34_plus_5as_over_h():
    h, a = GPT3.d_model, GPT3.n_heads
    full, _ = _act(GPT3, _L(tp=1, sp=False))
    assert full == pytest.approx(S * B * h * (34 + 5 * a * S / h), rel=1e-12)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_korthikanti_table2_sequence_parallel_selective_and_full(t):
    h, a = GPT3.d_model, GPT3.n_heads
    full, _ = _act(GPT3, _L(tp=t, sp=True))
    assert full == pytest.approx(S * B * h / t * (34 + 5 * a * S / h), rel=1e-12)
    _, sel = _act(GPT3, _L(tp=t, sp=True, recompute="selective"))
    assert sel == pytest.approx(S * B * h / t * 34, rel=1e-12)
    _, fr = _act(GPT3, _L(tp=t, sp=True, recompute="full"))
    assert fr == pytest.approx(2 * S * B * h / t, rel=1e-12)


def test_flash_attention_removes_the_s_squared_term():
    h = GPT3.d_model
    full, _ = _act(GPT3, _L(tp=8, sp=True), flash=True)
    # 34·sbh/t plus FlashAttention's fp32 log-sum-exp (4 bytes × s·b·a/t), no 5·a·s² term
    assert full == pytest.approx(S * B * h / 8 * 34 + 4 * S * B * GPT3.n_heads / 8, rel=1e-12)


def _plan(m: ModelSpec, seq: int = S, grad: str = "fp32", flash: bool = False) -> TrainingPlan:
    return TrainingPlan(
        stages=(Stage(tokens=1e9, seq_len=seq, global_batch_tokens=seq * 1024),),
        precision=Precision.FP16,
        dtypes=DtypeSpec.for_precision(Precision.FP16, grad=grad),
        flash_attention=flash,
    )


def test_gpt3_175b_tp8_pp8_first_stage_holds_L_layers_worth():
    """Korthikanti §4.2.3: the first of p stages keeps p micro-batches of L/p layers = L layers."""
    h, a, L_ = GPT3.d_model, GPT3.n_heads, GPT3.n_layers
    consts = constants()["memory"]
    pc = param_counts(GPT3)
    for rc, sp, per_layer in [
        ("none", False, S * B * h * (10 + 24 / 8 + 5 * a * S / (h * 8))),
        ("none", True, S * B * h / 8 * (34 + 5 * a * S / h)),
        ("selective", True, S * B * h / 8 * 34),
    ]:
        lay = _L(tp=8, pp=8, dp=1, sp=sp, recompute=rc, micro_batch=B)
        mem = memory_per_device(GPT3, pc, _plan(GPT3), lay, S, np.array([64.0]), consts)
        # the first stage wins (it holds 8 micro-batches); embeddings' own activations are not counted
        assert float(mem.activations[0]) == pytest.approx(L_ * per_layer, rel=1e-9)


def test_full_recompute_keeps_inputs_plus_one_live_layer():
    h, L_ = GPT3.d_model, GPT3.n_layers
    pc = param_counts(GPT3)
    lay = _L(tp=8, pp=8, dp=1, sp=True, recompute="full")
    mem = memory_per_device(GPT3, pc, _plan(GPT3), lay, S, np.array([64.0]), constants()["memory"])
    one_layer, _ = _act(GPT3, lay)
    kept = (
        2 * S * B * h / 8
    )  # each layer's input, sequence-parallel over tp 8 (Korthikanti §4.1, "2sbh")
    # the layer being recomputed holds its full activations: one_layer beyond the input it kept
    assert float(mem.activations[0]) == pytest.approx(L_ * kept + (one_layer - kept), rel=1e-9)


@pytest.mark.parametrize(
    "zero,per_param",
    [
        (0, lambda P, n: 16 * P),
        (1, lambda P, n: 4 * P + 12 * P / n),
        (2, lambda P, n: 2 * P + 14 * P / n),
        (3, lambda P, n: 16 * P / n),
    ],
)
def test_zero_figure1_model_states(zero, per_param):
    """ZeRO Fig. 1 (K = 12, fp16 weights and gradients), pp = tp = 1."""
    m = get_model("llama2-7b")
    pc = param_counts(m)
    n = 64
    lay = _L(dp=n, zero=zero)
    w, g, o, local = model_state_bytes(m, pc, _plan(m, grad="fp16"), lay, first=True)
    assert float(local[0]) == pytest.approx(pc.total)
    states = float(w[0] + g[0] + o[0])
    gathered = (
        2 * pc.per_dense_layer * 2 * (1 - 1 / n) if zero == 3 else 0
    )  # ZeRO-3 prefetches two layers
    assert states - gathered == pytest.approx(per_param(pc.total, n), rel=1e-9)


@pytest.mark.parametrize("zero, published_gb", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.88)])
def test_zero_figure1_published_gigabytes(zero: int, published_gb: float):
    """The paper's own figures for Ψ = 7.5B on N_d = 64 (120, 31.4, 16.6, 1.88 GB), against the planner's
    model states per parameter (model_state_bytes on Llama-2-7B at fp16 weights and gradients, its ZeRO-3
    prefetch of two layers left out) times 7.5e9, to the paper's rounding."""
    m = get_model("llama2-7b")
    pc = param_counts(m)
    n = 64
    w, g, o, _ = model_state_bytes(m, pc, _plan(m, grad="fp16"), _L(dp=n, zero=zero), first=True)
    gathered = 2 * pc.per_dense_layer * 2 * (1 - 1 / n) if zero == 3 else 0
    per_param = (float(w[0] + g[0] + o[0]) - gathered) / pc.total
    assert per_param * 7.5e9 / 1e9 == pytest.approx(published_gb, abs=0.006 * published_gb)


def test_megatron_fp32_gradients_are_18_bytes_per_param():
    m = get_model("llama2-7b")
    pc = param_counts(m)
    w, g, o, _ = model_state_bytes(m, pc, _plan(m, grad="fp32"), _L(), first=True)
    assert float(w[0] + g[0] + o[0]) == pytest.approx(18 * pc.total, rel=1e-12)


def test_tensor_and_pipeline_sharding_divides_layer_states():
    m = get_model("llama2-70b")
    pc = param_counts(m)
    plan = _plan(m)
    _, _, _, local1 = model_state_bytes(m, pc, plan, _L(), first=True)
    _, _, _, local = model_state_bytes(m, pc, plan, _L(tp=8, pp=4), first=True)
    layers = m.n_layers / 4 * pc.per_dense_layer / 8
    assert float(local[0]) == pytest.approx(layers + pc.first_stage_extra / 8, rel=1e-12)
    assert float(local1[0]) == pytest.approx(pc.total, rel=1e-12)


def test_frozen_parameters_store_only_weights():
    m = get_model("llama2-7b")
    pc = param_counts(m)
    plan = _plan(m).replace(trainable_fraction=0.0, dtypes=DtypeSpec(frozen_weight="nf4"))
    w, g, o, _ = model_state_bytes(m, pc, plan, _L(), first=True)
    assert float(g[0]) == 0 and float(o[0]) == 0
    assert float(w[0]) == pytest.approx(0.5 * pc.total)
