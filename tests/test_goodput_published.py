"""Goodput against published effective-training-time figures at three scales, and the Llama 3.1 405B plan.

Each test runs the model (trilemma.estimate.goodput for failures, checkpoints and restarts;
trilemma.estimate.stragglers for each step's wait on the slowest GPU) at the run's GPU count, duration
and checkpoint practice, and asserts the published figure; the run's figures are read from
presets/reliability.toml, where each is quoted from its source. "Effective training time" (Llama 3,
MegaScale: ETTR) counts the time lost to interruptions: checkpoint writes, lost work and restarts, the
failure model's goodput. A slow step is still training time there, so the straggler share is checked
only where the whole wall time is (the 405B plan).
"""

from __future__ import annotations

import json

import pytest
from clitools import run

from trilemma.estimate.goodput import goodput, reliability_data
from trilemma.estimate.stragglers import straggler_share
from trilemma.units import DAY, HOUR, WEEK

RELIABILITY = reliability_data()
RUNS = RELIABILITY["runs"]
#: bytes per parameter of a mixed-precision Adam checkpoint: bf16 weights 2 + fp32 master 4 + two fp32
#: moments 8 (BLOOM's README counts its 2.3 TB as 176e9 × 14 bytes)
CKPT_BYTES_PER_PARAM = 14.0


def test_llama3_405b_effective_training_time_above_90_percent_at_16k_gpus():
    """Dubey et al. 2024, The Llama 3 Herd of Models, arXiv 2407.21783, §3.3.4: 466 interruptions in a
    54-day snapshot on 16,384 H100s (Table 4), 419 unexpected, "higher than 90% effective training time".
    In part in-sample: the failure rate is this run's 419 (reliability.toml defaults); the checkpoint
    writes (Llama 3's 2 TB/s, §3.3.1) and 10-minute restarts (MegaScale's) are not fitted to it. The
    published figure is a lower bound; the upper bound 0.97 says the 466 interruptions cannot be nearly
    free: even at 5 minutes each they cost 466 × 5 min / 54 days = 3%."""
    r = RUNS["llama3-405b"]
    g = goodput(r["duration_days"] * DAY, r["gpus"], r["parameters"] * CKPT_BYTES_PER_PARAM)
    assert r["effective_training_time_min"] < g.goodput < 0.97
    # the 47 planned interruptions (a restart each, no lost work) keep it above 90%
    planned = r["planned_interruptions"] * 600.0
    assert g.busy_s / (g.wall_s + planned) > r["effective_training_time_min"]


def test_megascale_effective_training_time_above_90_percent_at_10k_gpus():
    """Jiang et al. 2024, MegaScale, NSDI '24, arXiv 2402.15627, §6.2-6.3: a job on more than 10,000 GPUs
    "lasts for several weeks", restarts "over 100 times", and keeps "over 90% effective training time
    rate". Modelled at 10,000 and at 12,288 GPUs (their largest run, §6.1) for three weeks, a 175B model
    (their experiments' size) saving 14 bytes per parameter, with reliability.toml's defaults: the failure
    rate is Meta's, not ByteDance's, and the 10-minute restart is MegaScale's own bound on detection and
    diagnosis. Tolerance on the count of restarts: a factor of 2 around "over 100" (another company's
    cluster, "several" weeks read as 2-4)."""
    m = RUNS["megascale"]
    weeks = 3
    for n in (m["gpus_min"], 12288):
        g = goodput(weeks * WEEK, n, 175e9 * CKPT_BYTES_PER_PARAM)
        assert g.goodput > m["effective_training_time_min"], n
    g = goodput(weeks * WEEK, m["gpus_min"], 175e9 * CKPT_BYTES_PER_PARAM)
    assert m["restarts_min"] / 2 < g.expected_interruptions < m["restarts_min"] * 2


def test_bloom_loses_what_its_one_to_two_crashes_a_week_cost_at_384_gpus():
    """Bekman 2022, The Technology Behind BLOOM Training (huggingface.co/blog/bloom-megatron-deepspeed):
    384 A100s, "1-2 GPU failures a week", "a checkpoint every 3h ... so on average we would lose 1.5h of
    training on hardware crash"; bigscience tr11-176B-ml chronicles: the 2.3 TB checkpoint "saved in 40
    secs". Published loss to lost work: 1-2 × 1.5 h a week = 0.89%-1.79% of the time, an effective time
    of 98.2%-99.1%. Modelled with BLOOM's own practice (3-hour interval, 40-s writes) for its 115 days.
    The model's lost work must sit in the published range; its goodput also pays the writes (40 s per
    3 h = 0.37%) and the restarts (1-2 a week × 10 min ≤ 0.2%) the blog does not count, so its lower
    bound is 0.6% under the published one."""
    r, store = RUNS["bloom-176b"], RELIABILITY["storage"]["bloom-gpfs"]
    per_gpu = store["checkpoint_bytes"] / store["write_s"] / store["gpus"]
    g = goodput(
        r["duration_days"] * DAY,
        r["gpus"],
        store["checkpoint_bytes"],
        write_bytes_per_s_per_gpu=per_gpu,
        checkpoint_interval_s=r["checkpoint_interval_h"] * HOUR,
    )
    assert g.checkpoint_write_s == pytest.approx(store["write_s"], rel=1e-9)
    lost_low = r["gpu_failures_per_week_min"] * r["checkpoint_interval_h"] / 2 * HOUR / WEEK
    lost_high = r["gpu_failures_per_week_max"] * r["checkpoint_interval_h"] / 2 * HOUR / WEEK
    assert lost_low < g.rework_s / g.wall_s < lost_high
    assert 1 - lost_high - 0.006 < g.goodput < 1 - lost_low


def test_llama31_405b_plan_keeps_88_percent_of_its_wall_time(capsys):
    """The Llama 3.1 405B plan (16,384 H100s, 15.6T tokens, 8,192-token sequences, 16M-token batches,
    TP 8, PP 16: Dubey et al. 2024 §3.3.2 and Table 4) keeps at least 88% of its wall time: the paper's
    "higher than 90% effective training time" (§3.3.4) less each step's wait on the slowest GPU, which the
    paper counts as training time. The wait at 16,384 GPUs is Sinha et al. 2022's spread: with its outliers
    drained, the slowest GPU is at most 4.0% (the upper whisker) behind the median, so 90% / 1.04 = 86.5%
    is the floor the two published figures allow; 88% asks the failure model to be no worse than 91.5%."""
    plan = "--model llama3.1-405b --gpu h100-sxm --gpus 16384 --tokens 15.6T --seq 8192"
    plan += " --global-batch 16777216 --tp 8 --pp 16 --json"
    code, out, err = run(capsys, "estimate", *plan.split())
    assert code == 0 and err == ""
    t = json.loads(out)["time"]
    assert t["goodput"] >= 0.88
    assert t["goodput"] == pytest.approx(t["reliability"]["goodput"] * t["other_share"], rel=1e-12)
    assert t["other_share"] == pytest.approx(float(straggler_share(16384)), rel=1e-12)
    # the fence: 4.0% behind the median, 4.02% behind the truncated mean: at least 1 / 1.0402 = 0.9613
    assert 0.9613 < t["other_share"] < 1.0
    assert t["reliability"]["goodput"] > RUNS["llama3-405b"]["effective_training_time_min"]
