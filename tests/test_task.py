"""A classifier's plan (TrainingPlan.task = classification): no LM head, no vocabulary logits.

A sequence classifier (transformers' BertForSequenceClassification: a pooler and a d × classes
linear on the first token) has no V × d head: its training step runs none of the head's three GEMMs
(logits, their data and weight gradients) nor the softmax cross-entropy over V, and keeps no logits.
"""

from __future__ import annotations

import pytest

from tests.clitools import run
from trilemma.api import estimate
from trilemma.resolve import make_plan, resolve_model

LAYOUT = dict(tp=1, pp=1, zero=0, recompute="none", micro_batch=8)


def _both(model: str = "bert-large", seq: int = 512):
    m, _ = resolve_model(model)
    out = []
    for task in ("causal-lm", "classification"):
        plan = make_plan(m, 1e9, seq, 64 * seq, "bf16", task=task)
        out.append(estimate(m, "a100-80gb", 8, layout=LAYOUT, plan=plan))
    return m, out


def test_model_flops_drop_the_heads_six_v_d_by_hand():
    """BERT-large: V = 30,522, d = 1,024, pooler d × d (BertModel counts it with the head's matmuls):
    three GEMMs of 2 FLOPs per MAC each, 6·(V·d + d²) per token fewer."""
    m, (lm, cls) = _both()
    assert m.vocab_size == 30522 and m.d_model == 1024 and m.pooler
    assert lm.model_flop_per_token - cls.model_flop_per_token == pytest.approx(
        6 * (30522 * 1024 + 1024**2)
    )


def test_no_logits_and_no_head_time():
    _, (lm, cls) = _both()
    assert lm.memory.logits > 0 and cls.memory.logits == 0
    assert lm.time.ops_s["lm_head"] > 0 and cls.time.ops_s["lm_head"] == 0
    for op in ("gemm", "attention", "elementwise", "kernel_launch"):  # the layers are the same
        assert cls.time.ops_s[op] == pytest.approx(lm.time.ops_s[op])
    assert cls.memory.per_gpu_bytes < lm.memory.per_gpu_bytes


def test_bad_task_is_one_line_and_exit_2(capsys):
    rc, _, err = run(
        capsys,
        "estimate",
        "--model",
        "bert-large",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "1",
        "--tokens",
        "1B",
        "--task",
        "regression",
    )
    assert (
        rc == 2 and "task: 'regression' is not allowed; expected causal-lm or classification" in err
    )


def test_a_classifier_is_not_exported(capsys):
    rc, _, err = run(
        capsys,
        "estimate",
        "--model",
        "bert-large",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "8",
        "--tokens",
        "1B",
        "--task",
        "classification",
        "--export",
        "hf",
    )
    assert rc == 2 and "a sequence classifier is not one" in err


def test_solve_takes_the_task_from_a_scenario(tmp_path):
    from trilemma.solve import solve

    res = solve(
        model="bert-large",
        tokens="1B",
        finetune={"finetune": "full"},
        gpu="a100-80gb",
        max_gpus=8,
        budget="$1000",
        task="classification",
    )
    assert res.optimum.plan.task == "classification" and res.optimum.memory.logits == 0
