"""The host's cost per eager operator: measured by the probe, carried by the `local` profile, and the
probe's step of a model of many small operators predicted with it.

Every test writes its measurements and profile to a temporary config directory.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

torch = pytest.importorskip("torch")

from trilemma.errors import InputError
from trilemma.probe.dispatch import (
    DISPATCH_METHOD,
    DispatchTiming,
    HostDispatch,
    host_constants,
    host_dispatch,
    reference_host_ops,
)
from trilemma.probe.profile import MachineMeasurement, MatmulCurve, local_hardware
from trilemma.request import ProbeRequest

#: a fake measured machine's host seconds: per operator 2 µs forward, 3 µs backward, 1.5 µs no-grad
#: (the floor); the reference layer 200 µs forward, 250 µs backward; AdamW 30 µs per tensor
HOST = HostDispatch(
    op=DispatchTiming(2e-6, 1.9e-6, 2.2e-6),
    bwd_op=DispatchTiming(3e-6, 2.8e-6, 3.3e-6),
    nograd_op=DispatchTiming(1.5e-6, 1.4e-6, 1.6e-6),
    layer_fwd=DispatchTiming(200e-6, 190e-6, 220e-6),
    layer_bwd=DispatchTiming(250e-6, 240e-6, 270e-6),
    opt_tensor=DispatchTiming(30e-6, 28e-6, 33e-6),
    opt_large=DispatchTiming(79.152e-6, 75e-6, 85e-6),
    repeats=21,
    method=DISPATCH_METHOD,
    # the attention core at 0.4 · d / (d + 12) of the fake curve's 50 GFLOP/s peak
    attention_head_dims=[16, 32, 64, 128],
    attention_flop_per_s=[0.4 * d / (d + 12) * 50e9 for d in (16, 32, 64, 128)],
)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(tmp_path))
    return tmp_path


def measurement(device: str = "cpu", host: HostDispatch | None = HOST) -> MachineMeasurement:
    """A measured machine without timing anything: a CPU (or GPU) with a matmul curve and ``host``."""
    return MachineMeasurement(
        device=device,
        device_name="Test CPU" if device == "cpu" else "NVIDIA H100 80GB HBM3",
        cores=2,
        threads=2,
        torch_version=torch.__version__,
        memory_bytes=8e9,
        memory_bw_bytes_per_s=20e9,
        link_bw_bytes_per_s=5e9,
        link_kind="TCP over 127.0.0.1",
        matmul={"fp32": MatmulCurve("fp32", (128, 256, 512), (20e9, 40e9, 50e9))},
        measured_at="2026-01-01T00:00:00+00:00",
        host_dispatch=host,
    )


def test_dispatch_measurement_is_a_plausible_per_operator_time():
    """Each kind is a positive, finite time inside the profile's bounds (100 ns to 1 ms per operator
    or tensor; ~1-5 µs per operator on a server core), its median between its 10th and 90th
    percentiles; a layer of the probe's model costs more than one operator of it. One thread, as
    a probe process of one core measures (two threads on a shared two-core machine wait on each
    other's barriers for tens of milliseconds whenever a neighbour holds a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        d = host_dispatch("cpu", repeats=5)
    finally:
        torch.set_num_threads(threads)
    assert d.repeats == 5 and d.method == DISPATCH_METHOD
    kinds = (d.op, d.bwd_op, d.nograd_op, d.layer_fwd, d.layer_bwd, d.opt_tensor, d.opt_large)
    for t in kinds:
        assert math.isfinite(t.median_s) and 1e-7 < t.median_s < 1e-3, t
        assert 0 < t.p10_s <= t.median_s <= t.p90_s
    assert d.layer_fwd.median_s > 5 * d.op.median_s and "µs" in d.describe()
    constants, _ = host_constants(d)
    per_element = constants.pop("host_opt_elem_s")
    assert all(1e-7 < v < 1e-3 for v in constants.values()), constants
    # AdamW's 80 bytes per fp32 element at 1-100 GB/s: 0.8-80 ns (0 where noise hid it)
    assert 0.0 <= per_element < 1e-7
    # the attention core by head dimension: positive, below ten times a core's ~100 GFLOP/s
    assert d.attention_head_dims == [16, 32, 64, 128]
    assert all(0 < r < 1e12 for r in d.attention_flop_per_s)


def test_host_op_s_is_per_operator_the_planner_counts():
    """The profile's seconds per operator are the reference layer's over the planner's own count of
    that layer's host operators (GPT-2 style, eager: 10 kernels and 10 views forward, 15 and 10
    backward); the optimizer's per parameter tensor as measured, and per element what a tensor of
    16,384 elements costs beyond a 1-element one: (79.152 - 30) µs / 16,384 = 3 ns."""
    assert reference_host_ops() == (20.0, 25.0)
    constants, said = host_constants(HOST)
    assert constants == pytest.approx(
        {
            "host_op_s": 10e-6,
            "host_bwd_op_s": 10e-6,
            "host_opt_tensor_s": 30e-6,
            "host_opt_elem_s": 3e-9,
        }
    )
    assert "20 forward, 25 backward" in said and host_constants(None) == ({}, "")


def test_profile_carries_the_host_dispatch_cost_and_round_trips():
    """A CPU profile holds the measured host constants and does not run ahead of its host; the
    measurement's JSON reads back equal; a record another method wrote reads as none."""
    meas = measurement()
    hw = local_hardware(meas)
    assert hw.efficiency["host_op_s"] == pytest.approx(10e-6)
    assert hw.efficiency["host_opt_tensor_s"] == pytest.approx(30e-6)
    assert "gemm_max" in hw.efficiency  # the GEMM fit is still there
    assert hw.async_launch is False and "host (measured)" in hw.notes
    again = MachineMeasurement.from_dict(json.loads(json.dumps(meas.to_dict())))
    assert again == meas and again.host_dispatch == HOST
    assert again.host_dispatch.op.spread == pytest.approx(0.15)
    first = {k: v for k, v in asdict(HOST).items() if k not in ("layer_fwd", "layer_bwd")}
    old = MachineMeasurement.from_dict({**meas.to_dict(), "host_dispatch": first})
    assert old.host_dispatch is None
    assert "host_op_s" not in local_hardware(old).efficiency  # unmeasured: the stated constant


def test_cpu_optimizer_runs_adamw_per_element_as_measured():
    """On the measured CPU the optimizer's arithmetic is the measured 3 ns per parameter element (its
    single-tensor loop's passes), not the fused update's one read and write at the copy bandwidth;
    a GPU, whose host queues ahead, keeps the read and write."""
    from trilemma.estimate.host import optimizer_elements_s

    c = local_hardware(measurement()).efficiency
    assert optimizer_elements_s(c, 1e6, False, 0.5e-3) == pytest.approx(3e-3)
    assert optimizer_elements_s(c, 1e6, True, 0.5e-3) == 0.5e-3
    assert optimizer_elements_s({}, 1e6, False, 0.5e-3) == 0.5e-3  # not measured


def test_attention_flops_are_the_planners():
    """Causal attention at 256 tokens, 4 heads of 64: forward 4·256²·(4·64)/2 = 33,554,432 FLOPs,
    backward 2.5 times that: 117,440,512 in all."""
    from trilemma.probe.attention_rate import attention_flop

    assert attention_flop(64) == 117_440_512


def test_cpu_attention_constants_fit_the_measured_curve():
    """The fit recovers the form the fake curve was made from (0.4 · d / (d + 12) of 50 GFLOP/s);
    a CPU profile carries it, a GPU's keeps the calibrated attention efficiency."""
    from trilemma.probe.attention_rate import attention_constants

    fit = attention_constants(HOST.attention_head_dims, HOST.attention_flop_per_s, 50e9)
    assert fit == pytest.approx({"attention_max": 0.4, "attention_half_dim": 12.0}, rel=1e-6)
    cpu = local_hardware(measurement()).efficiency
    assert cpu["attention_half_dim"] == pytest.approx(12.0, rel=1e-6)
    assert "attention_half_dim" not in local_hardware(measurement("cuda")).efficiency


def test_cpu_attention_is_timed_at_its_head_dimension():
    """The d 64, 4-head model (head dimension 16) on the fake CPU: each layer's attention core,
    2,097,152 FLOPs forward (4·128·128·64/2) and 2.5 times that backward, at 0.4 · 16 / 28 of the
    50 GFLOP/s peak: 8 layers × 7,340,032 / 11.43 GFLOP/s = 5.138 ms."""
    from trilemma.probe.compare import predict
    from trilemma.probe.inputs import probe_model

    spec = probe_model(None, layers=8, d_model=64, heads=4, ffn=256)[0]
    est, _ = predict(spec, local_hardware(measurement()), 1, 128, 1, 1, 1, "fp32", "none", False)
    rate = 50e9 * 0.4 * 16 / 28
    assert est.time.ops_s["attention"] == pytest.approx(8 * 7_340_032 / rate, rel=1e-6)


def test_gpu_profile_carries_it_and_runs_ahead_of_its_host():
    hw = local_hardware(measurement("cuda"))
    assert set(hw.efficiency) == {
        "host_op_s",
        "host_bwd_op_s",
        "host_opt_tensor_s",
        "host_opt_elem_s",
    }
    assert hw.async_launch is True


def test_saved_profile_reads_back_with_the_host_dispatch_cost(config_dir):
    from trilemma.presets import get_hardware
    from trilemma.probe.profile import save_local_profile

    meas = measurement()
    save_local_profile(local_hardware(meas), meas)
    hw = get_hardware("local")
    assert hw.efficiency == local_hardware(meas).efficiency and hw.async_launch is False


@pytest.mark.parametrize("value", [1e-9, 0.5])
def test_profile_with_an_implausible_host_op_s_is_refused(config_dir, value):
    """A hand-edited profile whose host cost per operator is outside 100 ns to 1 ms: one InputError
    naming the field, as for the other measured figures."""
    from trilemma.presets import get_hardware
    from trilemma.probe.profile import profile_path, save_local_profile

    meas = measurement()
    save_local_profile(local_hardware(meas), meas)
    doc = json.loads(profile_path().read_text())
    doc["hardware"]["efficiency"]["host_op_s"] = value
    profile_path().write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        get_hardware("local")
    assert err.value.field.endswith(".efficiency.host_op_s") and "1e-07 to 0.001 s" in str(
        err.value
    )


def test_probe_output_shows_the_host_dispatch_cost(capsys):
    from trilemma.console import console
    from trilemma.probe.result import ProbeMachine
    from trilemma.report.probe import _print_scaling_and_machine

    result = type("R", (), {})()
    result.scaling = None
    result.machine = ProbeMachine("local.json", ".", measurement(), None)
    _print_scaling_and_machine(console(), result)
    assert "host dispatch per operator forward 2.00 µs" in capsys.readouterr().out


# ------------------------------------------------------------------ the floor: a model of small operators

#: d_model 64, 8 layers, one sequence of 128 tokens in fp32: ~0.1 GFLOP a step, each kernel a few µs
#: of arithmetic, so the step is set by the host's dispatch of its operators
SMALL_OPS = {
    "layers": 8,
    "d_model": 64,
    "heads": 4,
    "ffn": 256,
    "seq": 128,
    "micro_batch": 1,
    "threads": 1,
    "precision": "fp32",
}


#: other processes' share of the CPU while the probe trained above which its timings hold their work
BUSY_SHARE = 0.2


@pytest.mark.slow
def test_small_operator_model_step_predicted_within_25_percent():
    """The probe on this CPU, a model of many small operators (d_model 64, 8 layers, one sequence of
    128 tokens, fp32, one thread): the planner predicts its measured step within 25% using the host
    costs the probe measured (the `local` profile's host_op_s, host_bwd_op_s; host and device time
    adding on a CPU: the CPU's own matmul curve from 64³, its attention kernel by head dimension and
    AdamW's arithmetic per element). Skipped where the probe reports other processes' work inside its
    timings: beside other work the host figures move by up to 75% (0.71-0.89 over eight loaded runs);
    quiet, 0.86-0.91."""
    from trilemma.probe import run_probe

    # the host costs measured now, beside the steps they predict (a cached measurement may have been
    # taken at another load)
    r = run_probe(ProbeRequest(**SMALL_OPS, steps=60, warmup=10, remeasure=True), eval_batches=0)
    meas = r.machine.per_process or r.machine.measurement
    assert meas.host_dispatch is not None and r.predicted.host_s > 0
    others = r.environment.other_processes_cpu_share
    if others is not None and others > BUSY_SHARE:
        pytest.skip(f"other processes used {others:.0%} of the CPU while the probe trained")
    c, p = r.comparison["step_time"], r.predicted
    why = (
        f"measured {c.measured * 1e3:.2f} ms, predicted {c.predicted * 1e3:.2f} ms (compute "
        f"{p.compute_s * 1e3:.2f} of which host {p.host_s * 1e3:.2f}, optimizer "
        f"{p.optimizer_s * 1e3:.2f} ms)"
    )
    assert 0.75 <= c.ratio <= 1.25, why
