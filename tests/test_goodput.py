"""Goodput as a model of its own (trilemma.estimate.goodput): failures ∝ GPU-hours, checkpoint
writes, restarts and the Young/Daly interval.

References (each figure read in its source; presets/reliability.toml quotes them):
- Dubey et al. 2024, The Llama 3 Herd of Models, arXiv 2407.21783: §3.3.4, 466 interruptions in a
  54-day snapshot on 16,384 H100s, 47 planned and 419 unexpected, "higher than 90% effective
  training time"; §3.3.1, storage 2 TB/s sustained, each GPU's state 1 MB to 4 GB.
- Bekman 2022, The Technology Behind BLOOM Training (huggingface.co/blog): "1-2 GPU failures a week"
  on 384 A100s; bigscience tr11-176B-ml chronicles: a 2.3 TB checkpoint "saved in 40 secs".
- Zhang et al. 2022, OPT, arXiv 2205.01068 §2.4-2.5: 992 A100s, "at least 35 manual restarts",
  "we estimate 70+ automatic restarts"; 56 days by the metaseq chronicles' dates.
- Kokolis et al. 2024, arXiv 2410.21680 (via secondary reproductions): 6.50 and 2.34 failures per
  1000 node-days; projected job MTTF 1.8 h at 16,384 GPUs, 0.23 h at 131,072.
- Young 1974, CACM 17(9): τ = √(2δM). Daly 2006, FGCS 22(3) (doi 10.1016/j.future.2004.11.016),
  Figs. 3-5: δ = 5 min gives τ_opt = 117 min at M = 24 h, 57 min at 6 h, 9.1 min at 15 min.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trilemma.estimate.goodput import (
    Goodput,
    checkpoint_write_s,
    defaults,
    first_order_waste,
    goodput,
    mtbf_s,
    node_failures_per_gpu_hour,
    reliability_data,
    young_daly_interval_s,
)
from trilemma.units import DAY, HOUR, MINUTE, WEEK, YEAR

RUNS = reliability_data()["runs"]
#: bytes per parameter of a mixed-precision Adam checkpoint: bf16 weights 2 + fp32 master 4 + two
#: fp32 moments 8 (the count BLOOM's README uses for its 2.3 TB: 176e9 × 14 bytes)
CKPT_BYTES_PER_PARAM = 14
LLAMA3_BYTES = 405e9 * CKPT_BYTES_PER_PARAM


def test_default_rate_is_llama3_unexpected_interruptions_per_gpu_hour():
    """The default rate is the Llama 3 count by hand: 419 / (16,384 GPUs × 54 days × 24 h)."""
    assert defaults().failures_per_gpu_hour == pytest.approx(419 / (16384 * 54 * 24), rel=1e-12)
    assert defaults().failures_per_gpu_hour == pytest.approx(1.973e-5, rel=1e-3)


def test_llama3_54_days_give_its_419_interruptions():
    """The source of the rate, so this checks the arithmetic (MTBF, units), not the model."""
    assert 54 * DAY / mtbf_s(16384) == pytest.approx(419, rel=1e-9)
    assert mtbf_s(16384) / HOUR == pytest.approx(54 * 24 / 419, rel=1e-9)  # 3.09 h
    # through goodput(): the busy time whose wall time is 54 days sees ~419 interruptions
    g0 = goodput(54 * DAY, 16384, LLAMA3_BYTES).goodput
    r = goodput(54 * DAY * g0, 16384, LLAMA3_BYTES)
    assert r.wall_s == pytest.approx(54 * DAY, rel=0.01)
    assert r.expected_interruptions == pytest.approx(419, rel=0.02)


def test_llama3_goodput_above_its_published_90_percent_and_sensitive_to_restarts():
    run = RUNS["llama3-405b"]
    # the assumed checkpoint content is inside the published per-GPU state of 1 MB to 4 GB
    storage = reliability_data()["storage"]["llama3-tectonic"]
    assert (
        storage["state_bytes_per_gpu_min"]
        < LLAMA3_BYTES / 16384
        < storage["state_bytes_per_gpu_max"]
    )
    r = goodput(54 * DAY, 16384, LLAMA3_BYTES)
    assert run["effective_training_time_min"] < r.goodput < 0.99
    # the 47 planned interruptions cost a restart each but no rework: still above 90%
    with_planned = r.busy_s / (r.wall_s + run["planned_interruptions"] * defaults().restart_s)
    assert with_planned > run["effective_training_time_min"]
    # restarts dominate the loss at this scale: 30-minute restarts fall below 90%, none rise above 95%
    assert goodput(54 * DAY, 16384, LLAMA3_BYTES, restart_s=30 * MINUTE).goodput < 0.90
    assert goodput(54 * DAY, 16384, LLAMA3_BYTES, restart_s=0.0).goodput > 0.95
    assert r.restart_s > r.rework_s and r.restart_s > r.checkpoint_s


def test_bloom_failures_match_the_default_rate_within_3x():
    """An independent cluster (Jean Zay, 2022, A100): 1-2 GPU failures a week on 384 GPUs for 115 days
    against the Llama 3 rate (Meta, 2024, H100). Different clusters: a consistency check, factor 3."""
    run = RUNS["bloom-176b"]
    expected = run["duration_days"] * DAY / mtbf_s(run["gpus"])  # ≈ 20.9
    weeks = run["duration_days"] * DAY / WEEK
    low, high = run["gpu_failures_per_week_min"] * weeks, run["gpu_failures_per_week_max"] * weeks
    assert expected / 3 < low and high < expected * 3
    assert low < expected < high  # in fact inside BLOOM's own range


def test_kokolis_cluster_rates_bracket_the_default_and_reproduce_their_mttf_projections():
    clusters = reliability_data()["clusters"]
    rsc1, rsc2 = (node_failures_per_gpu_hour(clusters[k]) for k in ("kokolis-rsc1", "kokolis-rsc2"))
    assert rsc1 == pytest.approx(6.50e-3 / (8 * 24))  # 3.4e-5 per GPU-hour
    assert rsc2 < defaults().failures_per_gpu_hour < rsc1
    assert (
        defaults().failures_per_gpu_hour / 3 < rsc2 and rsc1 < 3 * defaults().failures_per_gpu_hour
    )
    # their projected MTTF is the node rate scaled by job size, as mtbf_s models it
    for gpus, hours in clusters["kokolis-rsc1"]["projected_mttf_h"].items():
        assert mtbf_s(int(gpus), rsc1) / HOUR == pytest.approx(hours, rel=0.03)


def test_opt_175b_is_an_outlier_above_the_default_rate():
    """OPT-175B (2021, cloud A100s) restarted for hardware ≥ 105 times in 56 days on 992 GPUs: ~4x the
    count the Llama 3 rate predicts (26). The chronicles blame the cloud cluster ("more often than not
    we would end up getting the same bad machine again"). Stated, not hidden: within 5x, above."""
    run = RUNS["opt-175b"]
    expected = run["duration_days"] * DAY / mtbf_s(run["gpus"])
    reported = run["manual_restarts_min"] + run["automatic_restarts_estimated_min"]
    assert expected == pytest.approx(26.3, rel=0.01)
    assert 1 < reported / expected < 5


def test_checkpoint_write_time_by_hand_and_against_bloom():
    # Llama 3 storage: 2 TB/s sustained over 16,384 GPUs
    assert defaults().write_bytes_per_s_per_gpu == pytest.approx(2e12 / 16384)
    assert checkpoint_write_s(LLAMA3_BYTES, 16384) == pytest.approx(LLAMA3_BYTES / 2e12)
    assert checkpoint_write_s(1e12, 1024, 1e9, max_write_bytes_per_s=1e11) == pytest.approx(10.0)
    bloom = reliability_data()["storage"]["bloom-gpfs"]  # 2.3 TB in 40 s from 384 GPUs
    predicted = checkpoint_write_s(bloom["checkpoint_bytes"], bloom["gpus"])
    assert bloom["write_s"] / 2 < predicted < bloom["write_s"] * 2  # 52.6 s


def test_a_12_hour_fine_tune_on_8_gpus_loses_under_1_percent():
    """The old constant charged every run 35%. A 7B model (14 bytes/parameter) for 12 h on 8 GPUs:
    MTBF 6,300 h, so one final save (~100 s) and almost nothing else."""
    r = goodput(12 * HOUR, 8, 7e9 * CKPT_BYTES_PER_PARAM)
    assert r.goodput > 0.99
    assert r.checkpoints == pytest.approx(
        1.0
    )  # the run is shorter than the interval: the final save
    assert r.checkpoint_interval_s == pytest.approx(12 * HOUR)
    assert r.expected_interruptions < 0.01


def test_young_interval_minimises_the_first_order_waste():
    for write, mtbf in [(5.0, HOUR), (60.0, DAY), (300.0, 10 * HOUR), (0.5, 2 * MINUTE)]:
        grid = np.geomspace(1e-3, 1e3, 600_001) * np.sqrt(2 * write * mtbf)
        best = grid[np.argmin(first_order_waste(grid, write, mtbf))]
        assert young_daly_interval_s(write, mtbf, higher_order=False) == pytest.approx(
            best, rel=1e-4
        )
        assert young_daly_interval_s(write, mtbf, higher_order=False) == pytest.approx(
            np.sqrt(2 * write * mtbf)
        )


@pytest.mark.parametrize(
    "mtbf, published_min, tol_min",
    [(24 * HOUR, 117, 0.5), (6 * HOUR, 57, 0.5), (15 * MINUTE, 9.1, 0.05)],
)
def test_daly_interval_reproduces_daly_2006_figures(mtbf, published_min, tol_min):
    """Daly 2006 Figs. 3-5 (δ = 5 min): the higher-order τ_opt printed in each caption."""
    assert young_daly_interval_s(5 * MINUTE, mtbf) / MINUTE == pytest.approx(
        published_min, abs=tol_min
    )


def test_daly_interval_is_near_the_optimum_of_the_exact_wall_time():
    def g(interval, write, mtbf):
        return goodput(
            1e4 * mtbf,
            1,
            write,
            failures_per_gpu_hour=HOUR / mtbf,
            restart_s=0.0,
            write_bytes_per_s_per_gpu=1.0,
            checkpoint_interval_s=interval,
        ).goodput

    for write, mtbf in [(3.0, 3 * HOUR), (300.0, HOUR), (HOUR, HOUR), (3 * HOUR, HOUR)]:
        grid = np.geomspace(1e-3, 1e2, 20_001) * mtbf
        assert g(young_daly_interval_s(write, mtbf), write, mtbf) > 0.999 * np.max(
            g(grid, write, mtbf)
        )


def _simulate_wall_s(busy, interval, write, restart, mtbf, rng):
    """Discrete-event run: segments of `interval` work + `write`; a failure (exponential, mean `mtbf`)
    restarts the segment after `restart` s, and a failure during the restart restarts the restart."""
    t, failures = 0.0, 0
    for _ in range(round(busy / interval)):
        while (f := rng.exponential(mtbf)) < interval + write:
            t, failures = t + f, failures + 1
            while (f := rng.exponential(mtbf)) < restart:
                t, failures = t + f, failures + 1
            t += restart
        t += interval + write
    return t, failures


def test_expected_wall_time_matches_a_simulation():
    mtbf, interval, write, restart, busy = (
        HOUR,
        20 * MINUTE,
        2 * MINUTE,
        10 * MINUTE,
        100 * 20 * MINUTE,
    )
    rng = np.random.default_rng(12)
    sims = np.array(
        [_simulate_wall_s(busy, interval, write, restart, mtbf, rng) for _ in range(400)]
    )
    r = goodput(
        busy,
        1,
        write,
        failures_per_gpu_hour=1.0,
        restart_s=restart,
        write_bytes_per_s_per_gpu=1.0,
        checkpoint_interval_s=interval,
    )
    assert r.mtbf_s == pytest.approx(mtbf)
    assert sims[:, 0].mean() == pytest.approx(r.wall_s, rel=0.015)  # ~4 standard errors
    assert sims[:, 1].mean() == pytest.approx(r.expected_interruptions, rel=0.04)


def test_losses_add_up_to_the_wall_time_and_to_dict_names_units():
    r = goodput(30 * DAY, 4096, 70e9 * CKPT_BYTES_PER_PARAM)
    assert r.wall_s == pytest.approx(r.busy_s + r.checkpoint_s + r.rework_s + r.restart_s, rel=1e-9)
    assert r.goodput == pytest.approx(r.busy_s / r.wall_s, rel=1e-9)
    assert r.checkpoint_s == pytest.approx(r.checkpoints * r.checkpoint_write_s)
    # rework ≈ half a segment per failure while segments are short against the MTBF
    segment = r.checkpoint_interval_s + r.checkpoint_write_s
    assert r.rework_s / r.expected_interruptions == pytest.approx(segment / 2, rel=0.05)
    d = r.to_dict()
    assert set(d) == {
        "busy_s",
        "mtbf_s",
        "checkpoint_write_s",
        "checkpoint_interval_s",
        "checkpoints",
        "expected_interruptions",
        "wall_s",
        "goodput",
        "lost_s",
    }
    assert set(d["lost_s"]) == {"checkpoint_writes", "rework", "restarts"}
    assert all(isinstance(v, float) for k, v in d.items() if k != "lost_s")


def test_vectorised_call_equals_elementwise_calls():
    busy = np.array([[HOUR], [3 * DAY], [90 * DAY]])
    gpus = np.array([1, 8, 512, 16384, 131072])
    ckpt = np.array([1e9, 1e11, 1e12, 1e13, 1e14])
    r = goodput(busy, gpus, ckpt, restart_s=300.0)
    assert isinstance(r, Goodput) and r.goodput.shape == (3, 5)
    for i in range(3):
        for j in range(5):
            one = goodput(float(busy[i, 0]), int(gpus[j]), float(ckpt[j]), restart_s=300.0)
            assert isinstance(one.goodput, float)
            for name, value in one.to_dict().items():
                if name != "lost_s":
                    assert getattr(r, name)[i, j] == pytest.approx(value, rel=1e-12)


def test_extreme_inputs_stay_finite_and_in_range():
    for busy in (1.0, 10 * YEAR):
        for gpus in (1, 1e6):
            for ckpt in (1.0, 1e15):
                r = goodput(busy, gpus, ckpt)
                assert 0 < r.goodput <= 1
                assert all(np.isfinite(v) for k, v in r.to_dict().items() if k != "lost_s")
                assert all(np.isfinite(v) for v in r.to_dict()["lost_s"].values())
    assert goodput(DAY, 1024, 1e12, failures_per_gpu_hour=0.0).expected_interruptions == 0.0


durations = st.floats(1.0, 10 * YEAR)
gpu_counts = st.floats(1.0, 1e6)
sizes = st.floats(1.0, 1e15)
restarts = st.floats(0.0, DAY)


@settings(max_examples=300, deadline=None)
@given(durations, gpu_counts, sizes, restarts, st.floats(1.01, 100.0))
def test_goodput_is_a_fraction_and_falls_with_gpus_and_restart_time(
    busy, gpus, ckpt, restart, factor
):
    r = goodput(busy, gpus, ckpt, restart_s=restart)
    assert 0 < r.goodput <= 1 and np.isfinite(r.wall_s)
    assert goodput(busy, gpus, ckpt, restart_s=restart * factor + 1).goodput < r.goodput

    # storage-bound (write time fixed by the aggregate limit): more GPUs, only more failures
    def capped(n):
        return goodput(busy, n, ckpt, restart_s=restart, max_write_bytes_per_s=1e8).goodput

    assert capped(gpus * factor) <= capped(gpus) * (1 + 1e-12)
    # bandwidth per GPU: falls too while the run spans the interval (δ/M fixed, R/M grows)
    more = goodput(busy, gpus * factor, ckpt, restart_s=restart)
    if more.checkpoint_interval_s < busy and r.checkpoint_interval_s < busy:
        assert more.goodput <= r.goodput * (1 + 1e-12)


def test_expected_maximum_is_the_exact_order_statistic():
    """stragglers.expected_max_normal against closed forms and adaptive quadrature: E[max of 2] = 1/√π,
    of 3 = 3/(2√π), of 8 = 1.42360 (tabulated expected normal order statistics); truncated at b, one draw
    has the truncated mean −φ(b)/Φ(b), and n draws b − ∫ (Φ/Φ(b))^n, computed here by scipy's quad. Far
    from the √(2 ln n) asymptote the share used to take (2.04 at n = 8)."""
    from scipy import integrate
    from scipy.special import ndtr
    from scipy.stats import norm

    from trilemma.estimate.stragglers import expected_max_normal

    assert expected_max_normal(1) == pytest.approx(0.0, abs=1e-12)
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-12)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-12)
    assert expected_max_normal(8) == pytest.approx(1.42360, abs=1e-5)
    b = 2.7
    assert expected_max_normal(1, b) == pytest.approx(-norm.pdf(b) / norm.cdf(b), rel=1e-10)
    for n in (5, 384, 16384, 1e6):
        quad = b - sum(
            integrate.quad(lambda x: (ndtr(x) / ndtr(b)) ** n, lo, hi, limit=500, epsabs=1e-14)[0]
            for lo, hi in ((-12, b - 0.1), (b - 0.1, b - 1e-3), (b - 1e-3, b))
        )
        assert expected_max_normal(n, b) == pytest.approx(quad, abs=1e-10)
    ns = np.array([[1.0, 8.0], [16384.0, 8.0]])
    got = expected_max_normal(ns, b)
    assert got.shape == (2, 2) and got[0, 1] == got[1, 1]
    assert got[1, 1] == pytest.approx(expected_max_normal(8, b), rel=1e-12)  # scalar = vectorised


def test_expected_maximum_matches_a_simulation():
    """The slowest of 512 truncated draws, simulated (20,000 jobs): the mean lies within 4 standard errors."""
    from trilemma.estimate.stragglers import expected_max_normal

    rng = np.random.default_rng(7)
    b, n = 2.7, 512
    z = rng.standard_normal((20_000, n))
    z = np.where(z > b, np.nan, z)  # redraw beyond the fence: rejection, done by resampling below
    while np.isnan(z).any():
        bad = np.isnan(z)
        z[bad] = rng.standard_normal(bad.sum())
        z[z > b] = np.nan
    m = z.max(axis=1)
    assert abs(m.mean() - expected_max_normal(n, b)) < 4 * m.std() / math.sqrt(len(m))


def test_gpu_spread_is_sinha_2022_variation_by_its_own_definition():
    """reliability.toml [stragglers.sinha2022]: 8% average variation, the whisker span 4·IQR over the
    median. Read as a normal, σ = 0.08 / (4 × 1.349) = 1.48%, and the upper whisker (Tukey's fence, the
    outliers beyond it drained) sits at Φ⁻¹(3/4) + 1.5·IQR = 2.698 σ. Back through the definition, the
    spread gives the published 8%."""
    from scipy.stats import norm

    from trilemma.estimate.stragglers import gpu_spread

    d = gpu_spread()
    assert d.sigma == pytest.approx(0.08 / (4 * 1.3489795), rel=1e-6)
    assert d.sigma == pytest.approx(0.01483, abs=1e-5)
    q1, q2, q3 = (1 + d.sigma * norm.ppf(p) for p in (0.25, 0.5, 0.75))
    iqr = q3 - q1
    assert ((q3 + 1.5 * iqr) - (q1 - 1.5 * iqr)) / q2 == pytest.approx(0.08, rel=1e-9)
    assert 1 + d.sigma * d.fence_z == pytest.approx(q3 + 1.5 * iqr, rel=1e-12)


def test_straggler_share_is_one_on_a_gpu_and_falls_with_the_gpu_count():
    """stragglers.straggler_share: 1 / (1 + σ·(E[M_n] − E[M_1])). By hand, untruncated, σ = 0.02 on 8 GPUs:
    1 / (1 + 0.02 × 1.42360) = 0.97232. With the shipped spread it falls with n and stays above its limit
    1 / (1 + σ·(b − E[M_1])) (the fence caps the slowest GPU at 4.0% behind the median); σ = 0 gives 1."""
    from trilemma.estimate.stragglers import expected_max_normal, gpu_spread, straggler_share

    assert straggler_share(1) == pytest.approx(1.0, abs=1e-12)
    assert straggler_share(8, sigma=0.02, fence_z=np.inf) == pytest.approx(
        1 / (1 + 0.02 * 1.4236003), rel=1e-7
    )
    d = gpu_spread()
    s = straggler_share(np.arange(1, 200_000, 97))
    floor = 1 / (1 + d.sigma * (d.fence_z - expected_max_normal(1, d.fence_z)))
    assert np.all(np.diff(s) <= 0) and np.all((s > floor) & (s <= 1))
    assert straggler_share(16384) == pytest.approx(0.9615, abs=5e-4)  # 3.9% lost at Llama 3's size
    assert straggler_share(4096, sigma=0.0) == 1.0
