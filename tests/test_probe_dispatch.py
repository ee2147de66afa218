"""The host's cost per eager operator: measured by the probe and carried by the `local` profile.

Every test writes its measurements and profile to a temporary config directory.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from trilemma.errors import InputError
from trilemma.probe.dispatch import DISPATCH_METHOD, DispatchTiming, HostDispatch, host_dispatch
from trilemma.probe.profile import MachineMeasurement, MatmulCurve, local_hardware

#: a fake measured machine's host seconds per eager operator
HOST = HostDispatch(
    op=DispatchTiming(2e-6, 1.9e-6, 2.2e-6),
    bwd_op=DispatchTiming(3e-6, 2.8e-6, 3.3e-6),
    nograd_op=DispatchTiming(1.5e-6, 1.4e-6, 1.6e-6),
    repeats=21,
    chain=1000,
    method=DISPATCH_METHOD,
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
    """Each kind (forward in a graph, backward node, no-grad) is a positive, finite time per operator
    inside the profile's bounds (100 ns to 1 ms; ~1-5 µs on a server core), its median between its
    10th and 90th percentiles."""
    d = host_dispatch("cpu", repeats=5)
    assert d.repeats == 5 and d.chain > 0 and d.method == DISPATCH_METHOD
    for t in (d.op, d.bwd_op, d.nograd_op):
        assert math.isfinite(t.median_s) and 1e-7 < t.median_s < 1e-3, t
        assert 0 < t.p10_s <= t.median_s <= t.p90_s
    assert "µs" in d.describe()


def test_profile_carries_the_host_dispatch_cost_and_round_trips():
    """A CPU profile holds the measured forward and backward cost per operator as its efficiency
    constants and does not run ahead of its host; the measurement's JSON reads back equal."""
    meas = measurement()
    hw = local_hardware(meas)
    assert hw.efficiency["host_op_s"] == 2e-6 and hw.efficiency["host_bwd_op_s"] == 3e-6
    assert "gemm_max" in hw.efficiency  # the GEMM fit is still there
    assert hw.async_launch is False and "host dispatch" in hw.notes
    again = MachineMeasurement.from_dict(json.loads(json.dumps(meas.to_dict())))
    assert again == meas and again.host_dispatch == HOST
    assert again.host_dispatch.op.spread == pytest.approx(0.15)
    old = MachineMeasurement.from_dict({**meas.to_dict(), "host_dispatch": None})
    assert "host_op_s" not in local_hardware(old).efficiency  # unmeasured: the stated constant


def test_gpu_profile_carries_it_and_runs_ahead_of_its_host():
    hw = local_hardware(measurement("cuda"))
    assert hw.efficiency == {"host_op_s": 2e-6, "host_bwd_op_s": 3e-6} and hw.async_launch is True


def test_saved_profile_reads_back_with_the_host_dispatch_cost(config_dir):
    from trilemma.presets import get_hardware
    from trilemma.probe.profile import save_local_profile

    meas = measurement()
    save_local_profile(local_hardware(meas), meas)
    hw = get_hardware("local")
    assert hw.efficiency["host_op_s"] == 2e-6 and hw.efficiency["host_bwd_op_s"] == 3e-6
    assert hw.async_launch is False


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
    assert "host dispatch forward 2.00 µs" in capsys.readouterr().out
