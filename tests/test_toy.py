"""A toy model computed entirely by hand: parameters, memory per device, FLOPs.

Model: 2 layers, d = 64, 4 heads, GELU MLP f = 256, vocab 100, 32 learned positions, tied
embeddings, LayerNorm, biases, no dropout. Training: seq 32, micro-batch 2, bf16 with fp32
gradients and Adam (2 + 4 + 12 = 18 bytes/param), one GPU, flash attention.
"""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.api import evaluate_layout, make_cluster, make_plan
from trilemma.estimate.flops import model_flop_per_token
from trilemma.estimate.params import param_counts
from trilemma.presets import constants
from trilemma.specs import Layout, ModelSpec

TOY = ModelSpec(
    n_layers=2, d_model=64, n_heads=4, ffn_dim=256, vocab_size=100, max_positions=32, name="toy"
)


def test_toy_parameters_by_hand():
    # per layer: attention 4·64² + (3·64 + 64) biases = 16,640; MLP 2·64·256 + 256 + 64 = 33,088;
    # two LayerNorms 2·(64 + 64) = 256  → 49,984; × 2 layers = 99,968
    # embeddings 100·64 = 6,400; positions 32·64 = 2,048; final LayerNorm 128
    assert param_counts(TOY).total == 99_968 + 6_400 + 2_048 + 128 == 108_544
    assert param_counts(TOY).embedding == 6_400 + 2_048


def test_toy_memory_by_hand():
    plan = make_plan(TOY, 1e6, 32, 32 * 2)
    est = evaluate_layout(
        TOY,
        make_cluster("a100-80gb", 1),
        plan,
        Layout(tp=1, pp=1, dp=1, zero=0, recompute="none", micro_batch=2),
    )
    mem = est.memory
    assert mem.weights == 2 * 108_544
    assert mem.gradients == 4 * 108_544
    assert mem.optimizer == 12 * 108_544
    # activations per layer, s·b = 64 tokens, d = 64, 2 bytes each:
    #   norm-1 input + QKV input 2·(2·64·64) = 16,384; Q, K, V 2·64·192 = 24,576;
    #   attention output 2·64·64 = 8,192; flash log-sum-exp 4·64·4 heads = 1,024;
    #   norm-2 input + MLP input 2·(2·64·64) = 16,384; GELU input and output 2·(2·64·256) = 65,536
    per_layer = 16_384 + 24_576 + 8_192 + 1_024 + 16_384 + 65_536
    assert mem.activations == 2 * per_layer == 264_192
    # eager cross-entropy on fp32 logits at the start of backward: log-softmax output + its gradient +
    # the cast's gradient, 4 bytes each; beside them the LM head's input and the final norm's input,
    # 2·64·64 bytes each
    logits = 64 * 100 * 12 + 2 * (2 * 64 * 64)
    c = constants()["memory"]
    base = 18 * 108_544 + 264_192 + logits
    # what the plan needs: the allocated peak + what is outside the allocator (fragmentation is not
    # needed): the A100's CUDA context 287,047,680 bytes (hardware.toml), no NCCL on one GPU, the residual
    outside = 287_047_680 + c["framework_residual_bytes"]
    assert mem.other == pytest.approx(logits + outside)
    assert mem.per_gpu_bytes == pytest.approx(base + outside)


def test_toy_flops_by_hand():
    # matmul params: 2 layers × (4·64² + 2·64·256) + LM head 100·64 = 2 × 49,152 + 6,400 = 104,704
    # 6 × 104,704 + 12 · 2 layers · 32 · 64 = 628,224 + 49,152
    assert param_counts(TOY).matmul_active == 104_704
    assert model_flop_per_token(TOY, 32) == 628_224 + 49_152
    assert np.isfinite(model_flop_per_token(TOY, 32))
