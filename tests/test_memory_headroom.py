"""Headroom in every memory verdict, and a CPU that is not a GPU."""

from __future__ import annotations

import math

import pytest

from trilemma.api import estimate
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
