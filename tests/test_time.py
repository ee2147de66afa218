"""Time model: collectives, pipeline bubble, roofline, throughput and MFU definitions.

References
- Thakur, Rabenseifner & Gropp 2005 (ring all-reduce 2(n−1)/n·M/β; all-gather (n−1)/n·M/β).
- Narayanan et al. 2021 (arXiv 2104.04473) §2.2: 1F1B pipeline takes (m + p − 1) micro-batch
  times per step, bubble fraction (p − 1)/m of the ideal time; interleaving divides it by v.
- PaLM (arXiv 2204.02311) App. B: MFU = model FLOPs per second / peak.
"""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.api import estimate
from trilemma.estimate.comm import all_gather_s, all_reduce_s, all_to_all_s, group_link
from trilemma.estimate.time import gemm_efficiency


def test_ring_collectives_by_hand():
    M, n, bw, a = 1e9, 8, 100e9, 1e-5
    assert all_reduce_s(M, n, bw, a) == pytest.approx(2 * 7 * (a + M / (8 * bw)))
    assert all_gather_s(M, n, bw, a) == pytest.approx(7 * (a + M / (8 * bw)))
    assert all_to_all_s(M, n, bw, a) == pytest.approx(7 * (a + M / (8 * bw)))
    assert all_reduce_s(M, 1, bw, a) == 0.0
    # bandwidth term tends to 2·M/β for large n (the "bus bandwidth" convention)
    assert all_reduce_s(M, 10**6, bw, 0.0) == pytest.approx(2 * M / bw, rel=1e-5)


def test_groups_inside_a_node_use_the_scale_up_link():
    bw, alpha = group_link(np.array([1, 1, 8, 2]), np.array([8, 16, 2, 4]), 8, 300e9, 25e9, 5e-6, 1e-5)
    assert list(bw) == [300e9, 25e9, 25e9, 300e9]


def test_gemm_efficiency_grows_with_every_dimension_and_stays_below_max():
    small = gemm_efficiency(np.array(256.0), 256.0, 256.0, 0.85, 128.0)
    big = gemm_efficiency(np.array(8192.0), 8192.0, 8192.0, 0.85, 128.0)
    assert small < big < 0.85
    assert gemm_efficiency(np.array(128.0), 128.0, 128.0, 0.8, 128.0) == pytest.approx(0.8 / 8)


def _est(**layout):
    return estimate("gpt3-6.7b", "a100-80gb", 64, 10e9, seq_len=2048, global_batch_tokens=2048 * 256,
                    layout=layout)


def test_pipeline_bubble_is_p_minus_1_stage_times():
    e = _est(tp=2, pp=4, vp=1, zero=1, recompute="none", micro_batch=1)
    m = e.stages[0].micro_batches  # 256 / (dp 8 × 1) = 32
    assert m == 32
    stage = (e.time.compute_s + e.time.tp_comm_s + e.time.pp_comm_s) / m
    assert e.time.bubble_s == pytest.approx(3 * stage, rel=1e-9)
    assert e.time.bubble_s / (e.time.step_s - e.time.bubble_s - e.time.dp_comm_s - e.time.optimizer_s) == pytest.approx(3 / 32, rel=1e-9)


def test_interleaving_divides_the_bubble_by_v():
    one = _est(tp=2, pp=4, vp=1, zero=1, recompute="none", micro_batch=1)
    two = _est(tp=2, pp=4, vp=2, zero=1, recompute="none", micro_batch=1)
    per_stage_1 = one.time.bubble_s / 3
    per_stage_2 = two.time.bubble_s / 1.5
    # the stage time itself changes only by the extra point-to-point sends of interleaving
    assert per_stage_2 == pytest.approx(per_stage_1 + (two.time.pp_comm_s - one.time.pp_comm_s) / 32, rel=1e-9)


def test_throughput_mfu_and_gpu_hours_are_consistent():
    e = _est(tp=1, pp=1, zero=1, recompute="none", micro_batch=2)
    t = e.time
    tokens_per_step = e.stages[0].global_batch_tokens
    assert t.tokens_per_s == pytest.approx(tokens_per_step / t.step_s, rel=1e-9)
    peak = e.cluster.hardware.peak("bf16")
    assert t.mfu == pytest.approx(e.model_flop_per_token * t.tokens_per_s / (64 * peak), rel=1e-9)
    assert t.total_s == pytest.approx(t.busy_s / t.goodput)
    assert t.gpu_hours == pytest.approx(64 * t.total_s / 3600)
    assert 0 < t.mfu < 0.85  # cannot beat the best GEMM efficiency


def test_full_recompute_costs_time_and_raises_hfu_not_mfu():
    a = _est(tp=1, pp=1, zero=1, recompute="none", micro_batch=1)
    b = _est(tp=1, pp=1, zero=1, recompute="full", micro_batch=1)
    assert b.time.step_s > a.time.step_s
    assert b.time.hfu > b.time.mfu
    assert a.time.hfu == pytest.approx(a.time.mfu)
    # full recompute executes 4/3 of the model's layer FLOPs: the step grows by less than 1/3
    assert b.time.compute_s < a.time.compute_s * (1 + 1 / 3) + 1e-9


def test_slower_inter_node_link_never_speeds_up_a_multi_node_run():
    fast = estimate("llama2-7b", "a100-80gb", 64, 1e11, seq_len=4096, cluster={"inter_node_bw_bytes_per_s": 50e9})
    slow = estimate("llama2-7b", "a100-80gb", 64, 1e11, seq_len=4096, cluster={"inter_node_bw_bytes_per_s": 5e9})
    assert slow.time.total_s >= fast.time.total_s
