"""The planner's memory inventory against PyTorch's own tracker on fake tensors.

The fast tests check the harness itself against a hand count; the slow ones run a subset of
benchmarks/memory_vs_torch.py and hold the planner to the memory floors on it."""

from __future__ import annotations

import statistics

import pytest

torch = pytest.importorskip("torch")

from trilemma.estimate.params import param_counts  # noqa: E402
from trilemma.presets import model_presets  # noqa: E402


def _tiny():
    return model_presets()["gpt3-125m"].model_copy(update={"n_layers": 2, "name": "gpt3-125m-2l"})


def test_tracker_counts_adamw_states_by_hand():
    """fp32 AdamW: 4 bytes of weight, 4 of gradient and 8 of moments per parameter; bf16 mixed
    (DtypeSpec.for_precision): 2 + 4 (fp32 main grad) + 12 (fp32 master + moments). AdamW also keeps
    one fp32 step counter per parameter tensor (torch.optim.AdamW state["step"])."""
    from trilemma.probe.memtrack import track_step
    from trilemma.probe.model import build_model

    spec = _tiny()
    n = param_counts(spec).total
    steps = 4 * len(
        list(build_model(spec, "meta").parameters())
    )  # AdamW's fp32 step count per tensor
    r = track_step(spec, 1024, 2, "fp32")  # logits big enough for the peak to fall in backward
    assert (r.weights_bytes, r.gradients_bytes, r.optimizer_bytes) == (4 * n, 4 * n, 8 * n + steps)
    r = track_step(spec, 1024, 2, "bf16")
    assert r.phase == "backward"
    assert (r.weights_bytes, r.gradients_bytes, r.optimizer_bytes) == (2 * n, 4 * n, 12 * n + steps)
    # the peak holds the model states and at least everything the layers saved for backward
    assert r.peak_bytes >= r.model_state_bytes + r.forward_layers_bytes


def test_tracker_layer_inventory_by_hand():
    """One GPT layer without dropout saves, in bf16, 2·sbd (LayerNorm input) ×2, QKV input, Q/K/V,
    attention output and its (b, s, a) copy, MLP input, GELU input and output: s·b·d·(2·(1+1+1+3+1+1+1+1)
    + 2·2·4) bytes, plus fp32 LayerNorm statistics and the log-sum-exp — within 3 %."""
    from trilemma.probe.memtrack import track_step

    spec = _tiny()
    s, d = 512, spec.d_model
    one = track_step(spec.model_copy(update={"n_layers": 1}), s, 1, "bf16").forward_layers_bytes
    two = track_step(spec, s, 1, "bf16").forward_layers_bytes
    per_layer = two - one
    hand = s * d * (2 * 10 + 2 * 2 * 4)
    assert per_layer == pytest.approx(hand, rel=0.03)


SUBSET = [  # (model, seq, micro_batch, precision, recompute, world, fsdp): a few seconds each
    ("gpt3-125m", 1024, 1, "fp32", "none", 1, False),
    ("gpt3-125m", 2048, 2, "bf16", "full", 1, False),
    ("llama-350m", 4096, 1, "bf16", "none", 1, False),
    ("llama-350m", 2048, 4, "bf16", "selective", 4, True),
    ("llama-1b-gqa", 2048, 1, "bf16", "none", 1, False),
]


@pytest.fixture(scope="module")
def subset_rows():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import memory_vs_torch as bench

    specs = bench.models()
    return [bench.run_one(c, specs) for c in SUBSET]


@pytest.mark.slow
def test_total_tensor_memory_floors(subset_rows):
    err = [abs(r["plan_total"] / r["torch_peak"] - 1) for r in subset_rows]
    assert statistics.median(err) <= 0.05, err
    assert max(err) <= 0.10, err


@pytest.mark.slow
def test_activation_floor(subset_rows):
    err = [abs(r["plan_activations"] / r["torch_activations"] - 1) for r in subset_rows]
    assert statistics.median(err) <= 0.08, err


@pytest.mark.slow
def test_model_states_exact_without_sharding(subset_rows):
    """ZeRO-0: weights, gradients and optimizer state are exactly the planner's."""
    for r in subset_rows:
        if "zero0" in r["config"]:
            for k in ("weights", "grads", "optimizer"):
                assert r[f"plan_{k}"] == pytest.approx(r[f"torch_{k}"], rel=1e-5), (
                    r["config"],
                    k,
                )  # AdamW adds 4 bytes per tensor (step)
