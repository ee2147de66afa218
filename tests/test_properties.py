"""Properties that must hold for any plan (Hypothesis).

- More sharding never raises per-device memory (ZeRO stage, TP, DP under ZeRO, recompute).
- Time is linear in tokens; cost = GPU-hours × price; energy ∝ GPU-hours.
- The vectorised evaluation of many layouts equals the scalar evaluation of each.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trilemma.api import estimate, make_cluster, make_plan
from trilemma.estimate.evaluate import evaluate
from trilemma.estimate.layouts import LayoutArrays, candidate_layouts
from trilemma.estimate.memory import memory_per_device
from trilemma.estimate.params import param_counts
from trilemma.presets import constants, get_model
from trilemma.specs import Layout

MODELS = [
    "gpt2-124m",
    "gpt3-1.3b",
    "llama2-7b",
    "llama2-70b",
    "mixtral-8x7b",
    "bert-base",
    "pythia-1b",
    "llama3-8b",
    "falcon-40b",
]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mem(name: str, seq: int, layouts: list[Layout], n_micro: float = 16.0) -> np.ndarray:
    m = get_model(name)
    plan = make_plan(m, 1e9, seq, seq * 512)
    L = LayoutArrays.from_layouts(layouts)
    return memory_per_device(
        m, param_counts(m), plan, L, seq, np.full(len(L), n_micro), constants()["memory"]
    ).total


#: NCCL's buffers for one communicator, bytes, by hand from NCCL's defaults (docs: NCCL_BUFFSIZE 4 MiB for
#: SIMPLE; src/init.cc: LL 8·512·8·16, LL128 120·640·8·8) × 16 channels × 2 ring peers (constants.toml):
#: going from 1 to 2 ranks on an axis creates that axis's communicator, which costs this much more
ONE_COMMUNICATOR = 16 * 2 * (4 * 2**20 + 120 * 640 * 8 * 8 + 8 * 512 * 8 * 16)


def _new_group(lay: dict, axis: str) -> float:
    """The buffers a doubling of ``axis`` adds: one communicator when the axis had one rank."""
    return ONE_COMMUNICATOR if lay[axis] == 1 else 0.0


layout_st = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2, 4]),
        "pp": st.sampled_from([1, 2, 4]),
        "dp": st.sampled_from([1, 2, 8, 64]),
        "zero": st.integers(0, 3),
        "recompute": st.sampled_from(["none", "selective", "full"]),
        "micro_batch": st.sampled_from([1, 2, 4]),
        "sp": st.booleans(),
    }
)


@SETTINGS
@given(name=st.sampled_from(MODELS), seq=st.sampled_from([512, 2048, 8192]), lay=layout_st)
def test_higher_zero_stage_never_raises_memory(name, seq, lay):
    lays = [Layout(**{**lay, "zero": z}) for z in range(4)]
    mem = _mem(name, seq, lays)
    assert np.all(np.diff(mem) <= 1e-6 * mem[:-1])


@SETTINGS
@given(name=st.sampled_from(MODELS), seq=st.sampled_from([512, 2048, 8192]), lay=layout_st)
def test_more_recompute_never_raises_memory(name, seq, lay):
    lays = [Layout(**{**lay, "recompute": r}) for r in ("none", "selective", "full")]
    mem = _mem(name, seq, lays)
    assert mem[1] <= mem[0] * (1 + 1e-9) and mem[2] <= mem[1] * (1 + 1e-9)


@SETTINGS
@given(name=st.sampled_from(MODELS), seq=st.sampled_from([512, 2048, 8192]), lay=layout_st)
def test_doubling_tensor_parallelism_never_raises_memory(name, seq, lay):
    a = Layout(**lay)
    b = Layout(**{**lay, "tp": lay["tp"] * 2})
    mem = _mem(name, seq, [a, b])
    assert mem[1] <= mem[0] * (1 + 1e-9) + _new_group(lay, "tp")


@SETTINGS
@given(name=st.sampled_from(MODELS), seq=st.sampled_from([512, 2048]), lay=layout_st)
def test_doubling_data_parallelism_never_raises_memory(name, seq, lay):
    a = Layout(**lay)
    b = Layout(**{**lay, "dp": lay["dp"] * 2})
    mem = _mem(name, seq, [a, b])
    assert mem[1] <= mem[0] * (1 + 1e-9) + _new_group(lay, "dp")
    if lay["zero"] >= 1 and lay["dp"] >= 2:
        assert mem[1] < mem[0]  # ZeRO shards something over DP: strictly less


def test_a_new_process_group_costs_one_communicator():
    """dp 1 → 2 without ZeRO changes no tensor, only adds the data-parallel communicator's buffers."""
    lay = dict(tp=1, pp=1, dp=1, zero=0, recompute="none", micro_batch=1, sp=False)
    mem = _mem("gpt2-124m", 512, [Layout(**lay), Layout(**{**lay, "dp": 2})])
    assert mem[1] - mem[0] == pytest.approx(ONE_COMMUNICATOR, rel=1e-9)
    assert ONE_COMMUNICATOR == 308_281_344


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["gpt2-124m", "llama2-7b", "mixtral-8x7b"]),
    tokens=st.floats(1e9, 1e13),
    k=st.floats(1.5, 50),
    gpus=st.sampled_from([16, 64, 512]),
)
def test_time_is_linear_in_tokens_and_cost_is_hours_times_price(name, tokens, k, gpus):
    a = estimate(name, "h100-sxm", gpus, tokens, seq_len=1024)
    b = estimate(name, "h100-sxm", gpus, tokens * k, seq_len=1024, layout=a.layout)
    assert b.time.busy_s == pytest.approx(k * a.time.busy_s, rel=1e-9)
    # wall time too once a run spans at least one checkpoint interval (every interval alike: the failure
    # model's goodput no longer depends on the length); a run shorter than its optimal interval is one
    # segment whose final save weighs more the shorter it is, so lengthening it raises its goodput
    if a.time.reliability["checkpoints"] > 1 + 1e-9:
        assert b.time.total_s == pytest.approx(k * a.time.total_s, rel=1e-9)
    else:
        assert b.time.goodput >= a.time.goodput * (1 - 1e-12)
        assert a.time.total_s < b.time.total_s <= k * a.time.total_s * (1 + 1e-9)
    for e in (a, b):
        assert e.cost.usd == pytest.approx(e.time.gpu_hours * e.cluster.price, rel=1e-12)
        assert e.time.gpu_hours == pytest.approx(gpus * e.time.total_s / 3600, rel=1e-12)
        # each device draws its board power × power fraction plus the host and network share, × PUE
        assert e.cost.energy_kwh == pytest.approx(
            e.time.gpu_hours
            * (
                e.cluster.hardware.board_power_w * e.cluster.power_fraction
                + e.cost.host_power_w_per_device
            )
            / 1000
            * e.cluster.pue,
            rel=1e-12,
        )
        # energy = facility power × wall time
        assert e.cost.energy_kwh == pytest.approx(
            e.cost.power_w * e.time.total_s / 3.6e6, rel=1e-12
        )


@settings(max_examples=10, deadline=None)
@given(
    name=st.sampled_from(["gpt2-355m", "llama2-7b", "mixtral-8x7b", "bert-large"]),
    gpus=st.sampled_from([8, 16, 128]),
    seq=st.sampled_from([512, 2048, 4096]),
    seed=st.integers(0, 2**31),
)
def test_vectorised_and_scalar_evaluation_agree(name, gpus, seq, seed):
    m = get_model(name)
    cl = make_cluster("a100-80gb", gpus)
    plan = make_plan(m, 1e10, seq, seq * 256)
    cands = candidate_layouts(m, gpus, 8, None, seq)
    rows = np.random.default_rng(seed).choice(len(cands), size=min(12, len(cands)), replace=False)
    ev = evaluate(m, cl, plan, cands, constants())
    for i in rows:
        one = evaluate(m, cl, plan, LayoutArrays.from_layouts([cands.row(int(i))]), constants())
        assert one.reasons[0] == ev.reasons[i]
        assert one.per_gpu_bytes[0] == pytest.approx(ev.per_gpu_bytes[i], rel=1e-12)
        assert one.total_s[0] == pytest.approx(ev.total_s[i], rel=1e-12)
        assert one.mfu[0] == pytest.approx(ev.mfu[i], rel=1e-12)


def test_no_nan_anywhere_in_a_full_candidate_sweep():
    m = get_model("mixtral-8x7b")
    cl = make_cluster("h100-sxm", 256)
    plan = make_plan(m, 1e12, 4096, 4096 * 1024)
    ev = evaluate(m, cl, plan, candidate_layouts(m, 256, 8, None, 4096), constants())
    for arr in (ev.total_s, ev.per_gpu_bytes, ev.mfu, ev.cost.usd):
        assert np.all(np.isfinite(arr))
        assert np.all(np.asarray(arr) > 0)
