"""Specs are validated and frozen; bad values name the field, the value and what is allowed.
Multi-stage plans (batch and context ramps) add up stage by stage."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trilemma.api import estimate, estimate_plan, make_cluster, make_plan
from trilemma.errors import InputError
from trilemma.presets import get_model
from trilemma.specs import Layout, ModelSpec, Stage

BASE = dict(n_layers=4, d_model=256, n_heads=4, ffn_dim=1024, vocab_size=1000)


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("n_layers", 0, "n_layers"),
        ("n_heads", 3, "n_heads"),
        ("n_kv_heads", 3, "n_kv_heads"),
        ("ffn_type", "swish", "ffn_type"),
        ("vocab_size", -5, "vocab_size"),
        ("top_k", 3, "top_k"),
        ("colour", "red", "colour"),
    ],
)
def test_bad_model_field_is_named(field, value, needle):
    fields = {**BASE, field: value}
    if field == "top_k":
        fields["n_experts"] = 2
    with pytest.raises(InputError) as exc:
        ModelSpec.build(**fields)
    msg = str(exc.value)
    assert needle in msg and str(value) in msg and "\n" not in msg


def test_specs_are_frozen():
    m = ModelSpec(**BASE)
    with pytest.raises(ValidationError):
        m.n_layers = 8  # type: ignore[misc]


def test_layout_rejects_zero_stage_4():
    with pytest.raises(InputError) as exc:
        Layout.build(zero=4)
    assert "zero" in str(exc.value)


def test_three_stage_ramp_adds_up():
    """Llama 3 (Dubey et al. 2024 §3.4.1) doubles the batch 4M → 8M → 16M tokens during pre-training."""
    m = get_model("llama2-7b")
    stages = [
        Stage(tokens=t, seq_len=4096, global_batch_tokens=b)
        for t, b in ((0.25e12, 4 * 2**20), (0.75e12, 8 * 2**20), (1e12, 16 * 2**20))
    ]
    cl = make_cluster("h100-sxm", 256)
    ramp = estimate_plan(m, cl, make_plan(m, stages=stages))
    parts = [estimate_plan(m, cl, make_plan(m, stages=[s]), ramp.layout) for s in stages]
    assert ramp.time.total_s == pytest.approx(sum(p.time.total_s for p in parts), rel=1e-9)
    assert ramp.memory.per_gpu_bytes == pytest.approx(
        max(p.memory.per_gpu_bytes for p in parts), rel=1e-9
    )
    assert [s.global_batch_tokens for s in ramp.stages] == [4 * 2**20, 8 * 2**20, 16 * 2**20]
    # bigger batches per step with the same layout: fewer, longer steps, never less throughput
    assert parts[2].time.tokens_per_s >= parts[0].time.tokens_per_s


def test_explicit_batch_is_not_rounded_and_fails_when_indivisible():
    e = estimate("gpt2-124m", "a100-80gb", 8, 1e9, seq_len=1024, global_batch_tokens=1024 * 96)
    assert e.stages[0].global_batch_sequences == 96
    with pytest.raises(Exception) as exc:
        estimate(
            "gpt2-124m",
            "a100-80gb",
            8,
            1e9,
            seq_len=1024,
            global_batch_tokens=1024 * 97,
            layout={"tp": 1, "pp": 1},
        )
    assert "batch" in str(exc.value)


def test_published_batch_is_a_target_rounded_to_the_layout():
    e = estimate("llama2-7b", "a100-80gb", 2048, 2e12)
    seqs = e.stages[0].global_batch_sequences
    assert seqs % (e.layout.dp * e.layout.micro_batch) == 0
    assert abs(seqs * 4096 - 4e6) / 4e6 <= 0.1


def test_gpus_that_dp_cannot_use_go_to_tp_or_pp():
    """BERT-large's published batch is 256 sequences; on 1024 GPUs DP can use at most ~256."""
    e = estimate("bert-large", "v100-32gb", 1024, 3.3e9 * 40, precision="fp16")
    assert e.layout.dp * e.layout.micro_batch <= 256 * 1.1
    assert e.layout.tp * e.layout.pp * e.layout.cp >= 4
