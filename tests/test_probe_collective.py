"""gloo's all-reduce between a CPU's local processes, timed (trilemma.probe.collective) and used by the
planner for a probe profile's data-parallel collectives (trilemma.estimate.comm, measured fabric)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from test_probe_dispatch import measurement as dispatch_measurement

from trilemma.errors import InputError
from trilemma.estimate.comm import Fabric, all_gather_s, all_reduce_s, fabric
from trilemma.presets import constants
from trilemma.probe.collective import (
    COLLECTIVE_METHOD,
    SIZES,
    GlooAllReduce,
    alpha_beta,
    gloo_all_reduce,
)
from trilemma.probe.profile import MachineMeasurement, local_hardware
from trilemma.resolve import make_cluster
from trilemma.specs.hardware import COLLECTIVE_BUS_BW_KEY as BUS_BW_KEY
from trilemma.specs.hardware import COLLECTIVE_LATENCY_KEY as LATENCY_KEY

# a record by hand: 500 µs a call and 1.5 GB/s, timed exactly on that line
RECORD = GlooAllReduce(
    method=COLLECTIVE_METHOD,
    threads=1,
    sizes_bytes=list(SIZES),
    seconds=[5e-4 + m / 1.5e9 for m in SIZES],
    latency_s=5e-4,
    bus_bw_bytes_per_s=1.5e9,
)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(tmp_path))
    return tmp_path


def measurement(collective: GlooAllReduce | None = RECORD) -> MachineMeasurement:
    """test_probe_dispatch's CPU, one thread a process, its bulk TCP stream at 3.5 GB/s."""
    return replace(
        dispatch_measurement(), threads=1, link_bw_bytes_per_s=3.5e9, collective=collective
    )


def test_alpha_beta_recovers_an_exact_line_and_stays_non_negative():
    m = np.array([1e4, 1e5, 1e6, 1e7])
    a, b = alpha_beta(m, 2e-4 + m / 2e9)
    assert a == pytest.approx(2e-4, rel=1e-9) and b == pytest.approx(2e9, rel=1e-9)
    # times that fall with size have no positive slope: β infinite, α their relative-least-squares level
    a, b = alpha_beta(m, [4e-4, 3e-4, 2e-4, 1e-4])
    assert b == math.inf and 1e-4 <= a <= 4e-4
    # one size in a slow mode (6× its line, as gloo's calls sometimes settle): left out of the line
    m5 = np.array(SIZES, float)
    t5 = 4e-4 + m5 / 1.5e9
    t5[1] *= 6.0
    a, b = alpha_beta(m5, t5)
    assert a == pytest.approx(4e-4, rel=1e-6) and b == pytest.approx(1.5e9, rel=1e-6)


def test_record_round_trips_and_another_methods_is_measured_again():
    d = json.loads(json.dumps(RECORD.to_dict()))
    assert GlooAllReduce.from_dict(d) == RECORD
    assert GlooAllReduce.from_dict({**d, "method": "one TCP stream"}) is None
    assert GlooAllReduce.from_dict(None) is None
    meas = measurement()
    assert MachineMeasurement.from_dict(json.loads(json.dumps(meas.to_dict()))) == meas


def test_measured_fabric_times_ring_collectives_by_hand():
    f = Fabric(1, 1e9, 1e9, fabric(make_cluster("h100-sxm", 8), 1.0, constants()).nccl, (4e-4, 2e9))
    m = 8e6
    for n in (2, 4):
        # Thakur et al. 2005: an all-reduce is 2(n−1) ring steps moving 2(n−1)/n·M per rank, an
        # all-gather (n−1) steps moving (n−1)/n·M; α was timed on 2 ranks' 2 steps
        assert float(all_reduce_s(m, 1, n, f)) == pytest.approx(
            2 * (n - 1) * 2e-4 + 2 * (n - 1) / n * m / 2e9
        )
        assert float(all_gather_s(m, 1, n, f)) == pytest.approx(
            (n - 1) * 2e-4 + (n - 1) / n * m / 2e9
        )
    assert float(all_reduce_s(m, 1, 1, f)) == 0.0


def test_profile_carries_the_collective_and_the_planner_uses_it():
    hw = local_hardware(measurement())
    assert hw.efficiency[LATENCY_KEY] == 5e-4 and hw.efficiency[BUS_BW_KEY] == 1.5e9
    assert (
        hw.intra_node_bw_bytes_per_s == 1.5e9
    )  # gloo's bus rate, not the bulk TCP stream's 3.5 GB/s
    assert "gloo all-reduce" in hw.notes
    f = fabric(make_cluster(hw, 2), 0.5, constants())
    assert f.measured == (5e-4, 1.5e9)
    # two ranks: α + M/β, the measured line itself (the calibrated link share does not apply)
    assert float(all_reduce_s(1e6, 1, 2, f)) == pytest.approx(5e-4 + 1e6 / 1.5e9)
    plain = local_hardware(measurement(None))
    assert LATENCY_KEY not in plain.efficiency and plain.intra_node_bw_bytes_per_s == 3.5e9


def test_saved_profile_with_an_implausible_collective_latency_is_refused():
    from trilemma.presets import get_hardware
    from trilemma.probe.profile import profile_path, save_local_profile

    meas = measurement()
    save_local_profile(local_hardware(meas), meas)
    assert get_hardware("local").efficiency[LATENCY_KEY] == 5e-4
    doc = json.loads(profile_path().read_text())
    doc["hardware"]["efficiency"][LATENCY_KEY] = 5.0
    profile_path().write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        get_hardware("local")
    assert err.value.field.endswith(f".efficiency.{LATENCY_KEY}")


def test_gloo_all_reduce_on_this_machine():
    """Two real processes: a call costs microseconds to milliseconds, the bus rate is between 10 MB/s
    and the 100 GB/s no loopback reaches, and each size's time is the same magnitude as the line's."""
    rec = gloo_all_reduce(1)
    assert rec is not None and rec.method == COLLECTIVE_METHOD
    assert 0.0 <= rec.latency_s < 0.05 and 1e7 < rec.bus_bw_bytes_per_s < 1e11
    fitted = [rec.latency_s + m / rec.bus_bw_bytes_per_s for m in rec.sizes_bytes]
    # the line through the sizes it kept (alpha_beta leaves out one in a slow mode)
    assert sum(0.5 < f / t < 2.0 for f, t in zip(fitted, rec.seconds)) >= 3
    # the largest size is bandwidth-bound: its time is mostly bytes
    assert rec.sizes_bytes[-1] / rec.bus_bw_bytes_per_s > rec.latency_s
