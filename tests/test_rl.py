"""RL post-training (--finetune grpo|ppo) against a whole published run (data/rl_steps.csv) and by hand."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import pytest

from trilemma.api import estimate
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.rl import reference_seconds, rollout_seconds
from trilemma.resolve import finetune_fields, make_plan, resolve_model
from trilemma.specs.rl import RolloutSpec

DATA = Path(__file__).resolve().parents[1] / "src" / "trilemma" / "data" / "rl_steps.csv"

#: the prompt ahead of each completion: not published for the Miles run (dapo-math-17k's prompts are one
#: math problem and a one-line instruction); an assumption, and the generation time barely moves with it
PROMPT = 512


def _row(framework: str) -> dict[str, str]:
    with open(DATA, encoding="utf-8") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return next(r for r in rows if r["framework"] == framework)


@cache
def _miles() -> tuple[dict[str, str], float, float, float]:
    """The Miles GRPO row and the planner's seconds for it: generation, the extra forward, training."""
    row = _row("miles")
    m, _ = resolve_model(row["model"])
    cap, batch = int(row["completion_cap"]), int(row["prompts_per_step"]) * int(row["generations"])
    seq = cap + PROMPT
    fields = finetune_fields(m, row["method"])
    fields["rl"] = RolloutSpec(generations=int(row["generations"]), completion_len=cap)
    plan = make_plan(m, batch * seq * 100, seq, batch * seq, **fields)
    est = estimate(row["model"], row["hardware"], int(row["gpus"]), plan=plan)
    hw = est.cluster.hardware
    gen = rollout_seconds(
        est.model, est.params, plan, LayoutArrays.from_layouts([est.layout]), seq, batch,
        hw.peak(plan.precision), hw.hbm_bw_bytes_per_s,
    )[0]  # fmt: skip
    return row, float(gen), float(reference_seconds(plan, est.time.step_s)), est.time.step_s


def test_grpo_generation_within_twenty_percent_of_a_published_run() -> None:
    """Miles on one 8-GPU MI300X node (LMSYS blog 2026-03-17, Figure 5): Qwen3-30B-A3B, GRPO with 32 prompts
    × 8 samples and an 8k response cap, rollout generation 152.79 s of a 388.50 s step. The planner's
    generation (decode-bound at the colocated engine's share of HBM bandwidth): within 20% (holds: 169 s)."""
    row, gen, _, _ = _miles()
    assert abs(gen / float(row["reported_generation_s"]) - 1) <= 0.20


@pytest.mark.xfail(
    strict=True,
    reason="Miles's training takes 95.30 s, 2.4x the planner's 39.8 s: its ~15-16k tokens/s over 8 GPUs is "
    "~3% of the MI300X bf16 peak for a 3.35B-active MoE (6 x 3.35e9 x 15.5e3 / 8 / 1.307e15), an efficiency "
    "the planner's MoE step time does not reach down to; generation's share of generation + log-prob + "
    "training is then 76% against the published 152.79 / 279.62 = 55%; the 33.85 s weight update is not "
    "modelled",
)
def test_grpo_time_split_within_twenty_percent_of_a_published_run() -> None:
    """The same run's split: training 95.30 s and generation's share of generation, log-prob pass (the
    planner's extra forward: no KL term, so no reference, but one forward of the policy all the same) and
    training, 152.79 / (152.79 + 31.53 + 95.30) = 54.6%: each within 20%."""
    row, gen, fwd, train = _miles()
    published = [float(row[k]) for k in ("reported_generation_s", "reported_logprob_s")]
    share = published[0] / (sum(published) + float(row["reported_training_s"]))
    assert abs(gen / (gen + fwd + train) / share - 1) <= 0.20
    assert abs(train / float(row["reported_training_s"]) - 1) <= 0.20
