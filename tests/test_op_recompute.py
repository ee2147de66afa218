"""torchtitan's op-level selective activation checkpointing as a recompute mode of its own.

torchtitan (distributed/activation_checkpoint.py, selective_ac_option = "op") saves the outputs of
attention and of every other matmul in call order and recomputes the rest in backward."""

from __future__ import annotations

import pytest

from trilemma.api import estimate
from trilemma.estimate.flops import (
    hardware_flop_per_token,
    model_flop_per_token,
    op_recompute_matmul_flop_fwd,
)
from trilemma.presets import model_presets
from trilemma.specs import Recompute


def test_op_mode_recomputes_k_output_and_the_second_mlp_matmul():
    """Llama 3 8B (d 4096, 8 KV heads of 128, SwiGLU 14336, 32 layers): matmuls Q, K, V, O, gate, up,
    down; recomputed K (4096×1024), O (4096×4096) and up (4096×14336), 2 FLOPs per MAC."""
    m = model_presets()["llama3-8b"]
    by_hand = 2 * 32 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336)
    assert op_recompute_matmul_flop_fwd(m) == by_hand
    extra = hardware_flop_per_token(m, 8192, Recompute.OP) - model_flop_per_token(m, 8192)
    assert extra == pytest.approx(by_hand)


def test_op_mode_sits_between_selective_and_full_in_flops_and_step_time():
    m = model_presets()["llama3-8b"]
    flops = [
        hardware_flop_per_token(m, 8192, r)
        for r in (Recompute.NONE, Recompute.SELECTIVE, Recompute.OP, Recompute.FULL)
    ]
    assert flops[0] < flops[1] < flops[2] < flops[3]
    steps = {
        r: estimate(
            "llama3-8b",
            "h100-sxm",
            8,
            1e9,
            seq_len=8192,
            global_batch_tokens=16 * 8192,
            layout={"tp": 1, "pp": 1, "zero": 3, "micro_batch": 1, "recompute": r},
            cluster={"memory_headroom": 0.0},
        ).time.step_s
        for r in ("none", "op", "full")
    }
    assert steps["none"] < steps["op"] < steps["full"]
