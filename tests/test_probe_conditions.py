"""The probe's machine measurement knows its conditions.

The load reading is injected (``machine.load_reading``) and the timed microbenchmarks are replaced by
fakes, so these tests say what the cache does with a busy, stale or inconsistent measurement without
timing anything; one tiny real training run checks that a busy reading reaches the result.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime, timedelta, timezone

import pytest

torch = pytest.importorskip("torch")

from test_probe_dispatch import HOST  # the fake machine's host seconds per eager operator

from trilemma.probe import bench, bench_cache, machine
from trilemma.probe.profile import MatmulCurve
from trilemma.request import ProbeRequest

IDLE = machine.LoadReading(load_1min=0.1, others_cpu_share=0.01)
BUSY = machine.LoadReading(
    load_1min=6.0, others_cpu_share=0.9
)  # e.g. two busy loops on a 2-core machine
RATE = 50e9  # the fake machine's matmul rate, FLOP/s


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A config directory of its own and microbenchmarks that return ``state["rate"]`` at once; the number
    of full measurements (memory bandwidth is measured once per full measurement) is ``state["full"]``."""
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(tmp_path))
    state = {"rate": RATE, "full": 0, "reading": IDLE, "dispatch": 0}

    def curve(device, precision, sizes, passes=bench._PASSES):
        return MatmulCurve(precision, tuple(sizes), tuple(state["rate"] for _ in sizes))

    def bandwidth(device):
        state["full"] += 1
        return 10e9

    monkeypatch.setattr(bench, "matmul_curve", curve)
    monkeypatch.setattr(bench, "memory_bandwidth", bandwidth)
    monkeypatch.setattr(bench, "loopback_bandwidth", lambda: 1e9)
    monkeypatch.setattr(bench, "runtime_memory", lambda threads: 50e6)

    def dispatch(device):
        state["dispatch"] += 1
        return HOST

    monkeypatch.setattr(bench, "host_dispatch", dispatch)
    monkeypatch.setattr(machine, "load_reading", lambda cpus, sample_s=0.0: state["reading"])
    return state


def measure(**kw):
    return bench.machine("cpu", ("fp32",), threads=1, **kw)


def test_busy_reason_from_the_load_average_and_other_processes():
    assert machine.busy_reason(IDLE, 2) == ""
    # 1-minute load 1.5 on 2 cores: above BUSY_LOAD_PER_CORE = 0.5 per core
    assert "load average 1.50 on 2 cores" in machine.busy_reason(machine.LoadReading(1.5, 0.0), 2)
    assert machine.busy_reason(machine.LoadReading(0.9, 0.0), 2) == ""  # 0.45 per core
    assert "other processes using 30%" in machine.busy_reason(machine.LoadReading(None, 0.3), 8)
    assert (
        machine.busy_reason(machine.LoadReading(None, None), 2) == ""
    )  # nothing readable: not called busy


def test_conditions_are_stored_with_the_measurement(fake):
    fake["reading"] = BUSY
    m = measure()
    c = m.conditions
    assert not m.from_cache and c is not None and c.busy and "load average 6.00" in c.why
    assert c.load_1min == 6.0 and c.others_cpu_share == 0.9 and c.cpus == machine.usable_cores()
    assert c.cpu_model_hash == machine.cpu_hash(machine.cpu_model()) and len(c.cpu_model_hash) == 16
    doc = json.loads(bench_cache.cache_path().read_text())
    (entry,) = doc["entries"].values()
    assert entry["conditions"]["busy"] is True and entry["torch_version"] == torch.__version__
    assert entry["threads"] == 1 and entry["measured_at"]


def test_an_idle_fresh_consistent_measurement_is_reused(fake):
    measure()
    again = measure()
    assert again.from_cache and fake["full"] == 1 and again.remeasured_because == ""


def test_a_stale_measurement_is_measured_again(fake):
    measure()
    doc = json.loads(bench_cache.cache_path().read_text())
    (key,) = doc["entries"]
    old = datetime.now(timezone.utc) - timedelta(days=bench_cache.MAX_AGE_DAYS + 10)
    doc["entries"][key]["measured_at"] = old.isoformat(timespec="seconds")
    bench_cache.cache_path().write_text(json.dumps(doc))
    m = measure()
    assert not m.from_cache and fake["full"] == 2 and "40 days old" in m.remeasured_because
    assert measure().from_cache  # the fresh one is kept


@pytest.mark.parametrize("old", [None, "dispatch/0: another method"])
def test_a_cache_without_the_host_dispatch_cost_measures_that_alone(fake, old):
    """A cached measurement from before the host dispatch cost was measured (or measured another way)
    gets it measured and added; its matmul curve, bandwidth and link are kept."""
    measure()
    doc = json.loads(bench_cache.cache_path().read_text())
    for e in doc["entries"].values():
        e["host_dispatch"] = None if old is None else {**asdict(HOST), "method": old}
    bench_cache.cache_path().write_text(json.dumps(doc))
    before = fake["dispatch"]
    m = measure()
    assert not m.from_cache and fake["full"] == 1 and fake["dispatch"] == before + 1
    assert m.host_dispatch == HOST and m.remeasured_because == ""
    assert measure().from_cache


def test_a_measurement_without_conditions_is_measured_again(fake):
    measure()
    doc = json.loads(bench_cache.cache_path().read_text())
    for e in doc["entries"].values():
        del e["conditions"]  # what a profile written before this version holds
    bench_cache.cache_path().write_text(json.dumps(doc))
    m = measure()
    assert not m.from_cache and "conditions" in m.remeasured_because


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("torch_version", "1.0.0", "torch 1.0.0"),
        ("threads", 7, "7 threads"),
    ],
)
def test_stale_reason_names_what_changed(fake, field, value, needle):
    m = replace(measure(), **{field: value})
    assert needle in bench_cache.stale_reason(m, machine.cpu_model(), 1, "")


def test_another_processor_is_stale(fake):
    m = measure()
    m = replace(m, conditions=replace(m.conditions, cpu_model_hash=machine.cpu_hash("another CPU")))
    assert "another processor" in bench_cache.stale_reason(m, machine.cpu_model(), 1, "")


def test_a_busy_measurement_is_measured_again_once_idle_and_kept_while_busy(fake):
    fake["reading"] = BUSY
    measure()
    assert (
        measure().from_cache and fake["full"] == 1
    )  # still busy: the cache is no worse than a new one
    fake["reading"] = IDLE
    m = measure()
    assert not m.from_cache and fake["full"] == 2 and "busy" in m.remeasured_because
    assert not m.conditions.busy


@pytest.mark.parametrize(
    ("factor", "reading", "remeasured"),
    [
        (2.0, IDLE, True),  # the cached rate was a busy machine's: twice as fast now
        (1.2, IDLE, False),  # within 30%
        (0.5, IDLE, True),  # slower now on an idle machine: the cache is wrong
        (0.5, BUSY, False),  # slower now because the machine is busy now: keep the cache
    ],
)
def test_a_recheck_that_disagrees_by_more_than_30_percent_remeasures(
    fake, factor, reading, remeasured
):
    measure()
    fake["rate"], fake["reading"] = RATE * factor, reading
    m = measure()
    assert (not m.from_cache) is remeasured
    assert ("re-check" in m.remeasured_because) is remeasured


def test_a_probe_on_a_busy_machine_says_so(fake, capsys):
    """A busy reading at the start puts a warning in the table's output and `environment.busy` in --json."""
    from trilemma.probe import run_probe
    from trilemma.report.probe import print_probe

    fake["reading"] = BUSY
    r = run_probe(
        ProbeRequest(
            layers=1,
            d_model=32,
            heads=2,
            ffn=64,
            seq=32,
            micro_batch=2,
            steps=3,
            warmup=1,
            threads=1,
        )
    )
    doc = r.to_dict()
    assert (
        doc["environment"]["busy"] is True and "load average 6.00" in doc["environment"]["busy_why"]
    )
    assert doc["environment"]["load_1min"] == 6.0
    assert doc["machine"]["measurement"]["conditions"]["busy"] is True
    assert any(w.startswith("busy machine") for w in doc["warnings"])
    print_probe(r)
    assert "measured on a busy machine" in capsys.readouterr().out


def test_a_probe_on_an_idle_machine_does_not_say_busy(fake, monkeypatch):
    from trilemma.probe import run_probe

    monkeypatch.setattr(
        machine.OtherLoad, "share", lambda self: 0.0
    )  # training's own meter: nobody else ran
    r = run_probe(
        ProbeRequest(
            layers=1,
            d_model=32,
            heads=2,
            ffn=64,
            seq=32,
            micro_batch=2,
            steps=3,
            warmup=1,
            threads=1,
        )
    )
    assert r.environment.busy is False and r.environment.busy_why == ""
    assert not any(w.startswith("busy machine") for w in r.warnings)
