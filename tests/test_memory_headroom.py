"""Headroom in every memory verdict, and a CPU that is not a GPU."""

from __future__ import annotations

import math

import pytest

from trilemma.api import estimate
from trilemma.errors import LayoutError
from trilemma.estimate.bands import band_factors
from trilemma.estimate.capacity import memory_headroom
from trilemma.presets import calibration, constants, get_hardware
from trilemma.resolve import make_cluster


def test_default_headroom_is_the_upper_end_of_the_memory_band():
    """A plan fits when its peak is at most capacity · exp(q10) of the leave-one-source-out memory
    residuals r = log(predicted / measured): 90% of held-out measured peaks are below prediction · exp(−q10)."""
    q10 = calibration()["bands"]["memory_log_q10"]
    h = memory_headroom(make_cluster("a100-80gb", 8))
    assert h == pytest.approx(min(0.5, max(0.0, 1 - math.exp(q10))))
    assert memory_headroom(make_cluster("a100-80gb", 8, memory_headroom=0.25)) == 0.25


@pytest.mark.parametrize("headroom", [0.0, 0.1, 0.3])
def test_fits_means_peak_below_capacity_less_headroom(headroom):
    e = estimate("llama2-7b", "a100-80gb", 64, 1e11, cluster={"memory_headroom": headroom})
    m = e.memory
    assert m.headroom == headroom and m.usable_bytes == pytest.approx(
        m.capacity_bytes * (1 - headroom)
    )
    assert m.fits and m.per_gpu_bytes <= m.usable_bytes  # the chosen layout fits with its headroom
    assert m.free_bytes == pytest.approx(m.capacity_bytes - m.per_gpu_bytes)
    d = e.to_dict()["memory"]
    assert (
        d["free_fraction"] == pytest.approx(m.free_bytes / m.capacity_bytes)
        and d["headroom"] == headroom
    )


def test_more_headroom_never_picks_a_layout_that_uses_more_memory():
    """The layout search keeps only plans under capacity × (1 − headroom): raising it can only push the
    choice to layouts with lower peaks (and the same or longer step)."""
    lo = estimate("llama2-13b", "a100-40gb", 64, 1e11, cluster={"memory_headroom": 0.0})
    hi = estimate("llama2-13b", "a100-40gb", 64, 1e11, cluster={"memory_headroom": 0.4})
    assert hi.memory.per_gpu_bytes <= 0.6 * hi.memory.capacity_bytes
    assert hi.time.step_s >= lo.time.step_s * (1 - 1e-12)


def test_a_cpu_has_no_gpu_framework_overhead():
    """The CUDA context, NCCL buffers and the caching allocator's reserve do not exist in a CPU process:
    the same plan on a CPU profile predicts the tensors alone (the GPU: tensors + overhead); a
    probe-measured runtime overhead of the CPU is added as it is."""
    gpu = get_hardware("a100-80gb")
    cpu = gpu.model_copy(update={"name": "test-cpu", "family": "cpu"})
    layout = {"tp": 1, "pp": 1, "zero": 0, "recompute": "none", "micro_batch": 1}
    a = estimate("gpt2-124m", gpu, 1, 1e9, layout=layout).memory
    b = estimate("gpt2-124m", cpu, 1, 1e9, layout=layout).memory
    mem = constants()["memory"]
    outside = (
        gpu.cuda_context_bytes + mem["framework_residual_bytes"]
    )  # one GPU: no NCCL communicator
    assert outside > 0
    assert a.per_gpu_bytes == pytest.approx(b.per_gpu_bytes + outside, rel=1e-12)
    measured = cpu.model_copy(update={"framework_overhead_bytes": 1e8})
    c = estimate("gpt2-124m", measured, 1, 1e9, layout=layout).memory
    assert c.per_gpu_bytes == pytest.approx(b.per_gpu_bytes + 1e8, rel=1e-12)


def test_fused_loss_keeps_8_bytes_per_logit_and_eager_12():
    """The logits' bytes at the start of backward: eager cross_entropy(logits.float()) 12 per element
    (log-softmax output, its gradient and the cast's gradient, fp32), a fused kernel 8 (Megatron-LM's
    vocab-parallel cross entropy: fp32 logits and one fp32 gradient buffer)."""
    from trilemma.presets import get_model
    from trilemma.resolve import make_plan

    m = get_model("gpt2-124m")
    layout = {"tp": 1, "pp": 1, "zero": 0, "recompute": "none", "micro_batch": 2}
    eager = make_plan(m, 1e9, 1024, 1024 * 8)
    fused = eager.replace(fused_loss=True)
    a = estimate(m, "a100-80gb", 4, plan=eager, layout=layout).memory
    b = estimate(m, "a100-80gb", 4, plan=fused, layout=layout).memory
    assert a.other - b.other == pytest.approx(2 * 1024 * 50257 * (12 - 8))


def _unsloth_70b_l40s(seq: int, **cluster: float):
    """Unsloth's Llama 3.3 70B QLoRA (rank 32, all linear layers, adamw-8bit, one sequence) on a 48 GiB L40S:
    its README@2025-01-14 table has 12,106 tokens as the longest context that fit 48 GB."""
    return estimate(
        "llama3.3-70b", "l40s", 1, tokens="20M", seq_len=seq, global_batch_tokens=seq, finetune="qlora",
        lora_rank=32, lora_targets="all-linear", optimizer="adamw-8bit", trainer="unsloth", stack="unsloth",
        layout={"micro_batch": 1, "recompute": "full"}, cluster=cluster or None,
    )  # fmt: skip


def test_a_plan_that_fits_only_at_the_bands_favourable_end_is_tight_not_refused():
    """The verdict has three outcomes (docs/memory-verdict.md): fits (the band's upper end within the card),
    tight (only its lower end within: answered with a warning), refused (even the lower end over). Unsloth's
    70B at 12,106 tokens trained on 48 GB: tight, not refused; the same plan at 40,000 tokens is refused; with
    --memory-headroom given, the user's margin refuses past it."""
    lo, hi = band_factors("memory")
    est = _unsloth_70b_l40s(12106)
    m = est.memory
    assert m.tight and not m.fits and m.per_gpu_bytes <= m.capacity_bytes
    assert (
        m.per_gpu_bytes * lo <= m.capacity_bytes < m.per_gpu_bytes * hi
    )  # the definition, by hand
    assert est.to_dict()["memory"]["tight"] is True
    assert len([w for w in est.warnings if w.startswith("memory: tight")]) == 1
    with pytest.raises(LayoutError, match="favourable end"):
        _unsloth_70b_l40s(40000)
    with pytest.raises(LayoutError, match="memory-headroom"):
        _unsloth_70b_l40s(12106, memory_headroom=0.1)
