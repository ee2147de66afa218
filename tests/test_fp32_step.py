"""benchmarks/fp32_step.py, the device check of fp32 plans on Hopper (the time floors' last line): the plan's
GEMM shapes by hand, bad input in one line with exit status 2, and an end-to-end run on a CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fp32_step  # noqa: E402


def test_plan_gemms_of_llama2_13b_at_tp_2_by_hand():
    """Llama 2 13B (d 5120, 40 heads of 128, no GQA, SwiGLU 13,824) at TP 2 and 4,096 tokens: QKV is
    (5120 + 2·5120)/2 = 7,680 wide, the MLP's up projection 13,824/2 = 6,912 (one shape for gate and up),
    the output and down projections row-parallel (K split). Backward: dgrad (M, K, N), wgrad (K, N, M)."""
    from trilemma.resolve import resolve_model

    g = dict(fp32_step.plan_gemms(resolve_model("llama2-13b")[0], 2, 4096))
    assert g["QKV fwd"] == (4096, 7680, 5120)
    assert g["QKV dgrad"] == (4096, 5120, 7680)
    assert g["QKV wgrad"] == (5120, 7680, 4096)
    assert g["attention out fwd"] == (4096, 5120, 2560)
    assert g["MLP up fwd"] == (4096, 6912, 5120)
    assert g["MLP down fwd"] == (4096, 5120, 6912)
    assert g["MLP down wgrad"] == (6912, 5120, 4096)
    assert len(g) == 12


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--gpu", "nope"], "--gpu"),
        (["--layers", "0"], "--layers"),
        (["--gpu", "h100-sxm", "--model", "nope"], "--model"),
        (["--seq", "2x"], "--seq"),
        ([], "--gpu"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(monkeypatch, capsys, argv, field):
    pytest.importorskip("torch")
    import torch

    if not argv and torch.cuda.is_available():
        pytest.skip("on a GPU the preset comes from the device name")
    monkeypatch.setattr(sys, "argv", ["fp32_step.py", *argv])
    with pytest.raises(SystemExit) as stop:
        fp32_step.main()
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert field in last


@pytest.mark.slow
def test_runs_on_a_cpu(monkeypatch, capsys, tmp_path):
    """The whole script on small shapes: each GEMM's measured rate beside the model's (which can only be
    below the preset's peak), a real fp32 training step measured and predicted, the JSON written."""
    pytest.importorskip("torch")
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(tmp_path / "config"))
    out = tmp_path / "fp32.json"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "fp32_step.py",
            "--gpu",
            "h100-sxm",
            "--model",
            "gpt2-124m",
            "--seq",
            "64",
            "--micro-batch",
            "2",
            "--tp",
            "1",
            "--layers",
            "1",
            "--steps",
            "2",
            "--reps",
            "1",
            "--out",
            str(out),
        ],
    )
    fp32_step.main()
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert [g["label"] for g in doc["gemms"]][:3] == ["QKV fwd", "QKV dgrad", "QKV wgrad"]
    assert all(
        0 < g["model_flop_per_s"] <= doc["peak_fp32_flop_per_s"] and g["measured_s"] > 0
        for g in doc["gemms"]
    )
    assert doc["highest_plan"]["model"] == "llama2-13b" and 0.5 < doc["highest_plan"]["mfu"] < 1.0
    step = doc["step"]
    assert step["step_s"] > 0 and 0 < step["predicted_mfu"] < 1 and step["layers"] == 1
    assert "floor:" in text
