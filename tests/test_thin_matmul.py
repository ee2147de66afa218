"""benchmarks/thin_matmul.py, the device check of unfused attention's thin matmuls: it names the right
hardware preset for a CUDA device and runs end to end (on a CPU: fp32, the measurement alone)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import thin_matmul  # noqa: E402


@pytest.mark.parametrize(
    "name, preset",
    [
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H200", "h200"),
        ("Tesla V100-SXM2-32GB", None),
    ],
)
def test_device_names_map_to_presets(name, preset):
    from trilemma.presets import get_hardware

    assert thin_matmul.preset_for(name) == preset
    if preset:
        assert get_hardware(preset).name == preset


def test_runs_on_a_cpu(monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.setattr(
        sys,
        "argv",
        ["thin_matmul.py", "--heads", "1", "--seq", "128", "--reps", "1", "--gpu", "a100-80gb"],
    )
    thin_matmul.main()
    rows = [line for line in capsys.readouterr().out.splitlines() if "d_head" in line]
    assert len(rows) == 14
    law, ceiling = zip(*((float(r.split()[-2]), float(r.split()[-1])) for r in rows))
    assert all(
        0 < lw <= cl for lw, cl in zip(law, ceiling)
    )  # the shape penalty only slows a matmul


@pytest.mark.parametrize(
    "argv, field",
    [(["--gpu", "nope"], "--gpu"), (["--heads", "0"], "--heads"), (["--seq", "2x"], "--seq")],
)
def test_bad_input_is_one_line_and_exit_status_2(monkeypatch, capsys, argv, field):
    pytest.importorskip("torch")
    monkeypatch.setattr(sys, "argv", ["thin_matmul.py", *argv])
    with pytest.raises(SystemExit) as stop:
        thin_matmul.main()
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert field in last and ("not allowed" in last or "unknown preset" in last)
