"""Two stack features of the step model, each checked against a hand count from the stack's code:
the host operators an asynchronous TP written as Python autograd Functions issues per layer
(StackSpec.async_tp_host_ops), and the pipeline split by block cost (StackSpec.pp_cost_split).

References
- huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py@2025-02-19 (e24d2483):
  _ColumnLinearAsyncCommunication and _RowLinearAsyncCommunication, forward and backward.
- huggingface/nanotron src/nanotron/models/base.py@2025-02-19 build_model ('Balance compute across PP
  blocks') and models/llama.py get_block_compute_costs.
- The Ultra-Scale Playbook's benchmark model (nanotron scripts/scaling_benchmarks.py@2025-02-19): 16
  layers, hidden 2048, 32 heads, intermediate 8192, vocab 131072.
"""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.api import estimate
from trilemma.estimate.host import async_tp_ops
from trilemma.estimate.pipeline import cost_split
from trilemma.presets import get_model, stack

#: the playbook's "1B": a layer costs 4·2048·2048 + 3·8192·2048 = 67,108,864 and the head
#: 131072·2048 = 268,435,456, 4 layers' worth
HEAD_UNITS = 131072 * 2048 / (4 * 2048 * 2048 + 3 * 8192 * 2048)


def test_nanotron_async_tp_operators_are_the_hand_count_of_its_four_linears():
    """A middle rank's column linear runs 21 host operators forward (apply, contiguous, the buffer's slice
    and view, all-gather, empty, split, two views, t, wait, then slice, two views, t, mm for each of the
    two other shards) and 11 backward; a row linear 5 forward and 20 backward. Two of each per layer,
    less the two collectives each way the step model already counts (TP_CALLS_PER_LAYER)."""
    from trilemma.estimate.host import TP_CALLS_PER_LAYER

    by_hand = 2 * (21 + 11 + 5 + 20) - sum(TP_CALLS_PER_LAYER)
    assert stack("nanotron").async_tp_host_ops == by_hand == 110
    assert stack("megatron-core").async_tp_host_ops == 0  # userbuffers: C++ kernels
    got = async_tp_ops(stack("nanotron"), np.array([True, True, False]), np.array([1, 8, 8]))
    assert got.tolist() == [0, 110, 0]  # one rank, or no async TP: nothing issued


def test_cost_split_places_nanotrons_blocks_by_hand():
    """16 layers and a head of 4 layers' cost: 20 units, thresholds 20·(r + 1)/pp. Each block goes to
    the current rank, which moves on once the sum passes its threshold: pp 4 puts layers 1-6 on rank 0
    (6 > 5), 7-11 on rank 1, 12-16 on rank 2 and the head alone on rank 3; pp 8 puts 3, 3, 2, 3, 2, 3
    layers on ranks 0-5 and the head on rank 6; pp 2 puts 11 layers on rank 0 and 5 with the head on
    rank 1."""
    assert HEAD_UNITS == 4.0
    assert cost_split(16, 4, HEAD_UNITS) == (6, 0)
    assert cost_split(16, 8, HEAD_UNITS) == (3, 0)
    assert cost_split(16, 2, HEAD_UNITS) == (11, 5)
    assert cost_split(16, 1, HEAD_UNITS) == (0, 16)


def _playbook_1b(pp: int, name: str = "nanotron"):
    m = get_model("llama3.2-1b").replace(
        n_layers=16,
        d_model=2048,
        n_heads=32,
        n_kv_heads=32,
        ffn_dim=8192,
        vocab_size=131072,
        name="bench-1b",
    )
    return estimate(
        m,
        "h100-sxm",
        8,
        1e9,
        seq_len=4096,
        global_batch_tokens=4096 * 256,
        layout=dict(tp=1, pp=pp, vp=1, zero=1, recompute="none", micro_batch=1),
        stack=stack(name),
    )


def test_a_cost_split_stage_is_the_slowest_of_its_ranks():
    """On 4 stages nanotron's slowest rank is rank 0's 6 layers or the head alone (by hand above),
    each layer timed as on one stage; an even split (4 layers, the last with the head) is 4 layers
    and the head."""
    # 256 sequences a step, micro-batch 1, data parallelism 8 / pp: 32·pp micro-batches per pipeline
    one = _playbook_1b(1)
    head = one.time.ops_s["lm_head"] / 32
    layer = (one.time.compute_s / 32 - head) / 16
    assert _playbook_1b(4).time.compute_s / 128 == pytest.approx(max(6 * layer, head), rel=1e-6)
    even = stack("nanotron").replace(pp_cost_split=False)
    assert _playbook_1b(4, even).time.compute_s / 128 == pytest.approx(4 * layer + head, rel=1e-6)
