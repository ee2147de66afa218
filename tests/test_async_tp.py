"""Asynchronous tensor parallelism (TrainingPlan.async_tp, trilemma.estimate.parallel_time.async_tp_s).

References
- Wang et al., ASPLOS 2023, "Overlap Communication with Dependent Computation via Decomposition in
  Large Deep Learning Models": a collective split into n chunks hides n − 1 of them behind n − 1
  chunks of the matmul it feeds.
- torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 4 (Llama 3.1 70B, 256 H100s, FSDP 32
  × TP 8, torch.compile + Float8, full activation checkpointing, local batch 16 at 8,192 tokens):
  829 tokens/s per GPU without async TP, 876 with it (+5.7%). A calibration row pair, and the pair the
  form (the forward's four collectives only) was chosen on: in-sample.
- PyTorch's announcement of async TP ("[Distributed w/ TorchTitan] Introducing Async Tensor Parallelism
  in PyTorch", discuss.pytorch.org/t/209487, September 2024): up to ~20% in the forward and ~8% end to end
  on Llama 3 70B in torchtitan. Not a calibration row and not the pair the form was chosen on: the
  held-out check, as loose as "~8%, up to" allows.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.clitools import run
from trilemma.api import estimate
from trilemma.estimate.parallel_time import async_tp_s
from trilemma.resolve import make_plan, resolve_model

MEASURED_GAIN = 876 / 829 - 1  # torchtitan Table 4: 2D + AsyncTP over 2D (a calibration row pair)

#: PyTorch's announcement: "~8% E2E speedup" on Llama 3 70B ("up to"; its layout is not stated)
ANNOUNCED_GAIN = 0.08


def test_each_collective_hides_all_but_one_chunk_behind_its_matmul_by_hand():
    """tp 8, one collective 1 s: exposed max(1/8, 1 − matmul·7/8) per pair."""
    got = async_tp_s(np.array(1.0), np.array(8.0), (2.0, 0.5), (0.1, 4.0))
    by_hand = (
        max(1 / 8, 1 - 2.0 * 7 / 8)
        + max(1 / 8, 1 - 0.5 * 7 / 8)
        + max(1 / 8, 1 - 0.1 * 7 / 8)
        + max(1 / 8, 1 - 4.0 * 7 / 8)
    )
    assert by_hand == pytest.approx(0.125 + 0.5625 + 0.9125 + 0.125)
    assert float(got) == pytest.approx(by_hand)


def _step_s(async_tp: bool, **layout) -> float:
    m, _ = resolve_model("llama3-70b")
    plan = make_plan(m, 1e9, 8192, 512 * 8192, "fp8", compile=True, async_tp=async_tp)
    lay = dict(tp=8, pp=1, zero=3, recompute="full", micro_batch=16) | layout
    return estimate(m, "h100-sxm", 256, layout=lay, plan=plan).time.step_s


@pytest.mark.in_sample
def test_the_gain_on_torchtitans_70b_row_in_sample():
    """In-sample: the form was chosen on this pair of calibration rows. The model's async-TP speed-up on it
    is the measured +5.7% within 1 point (+5.3%; hiding every collective of the step instead, backward and
    recomputation too, gives about +14%)."""
    gain = _step_s(False) / _step_s(True) - 1
    assert gain == pytest.approx(MEASURED_GAIN, abs=0.01), gain


def test_the_gain_held_out_is_the_announced_end_to_end_gain():
    """Held out: PyTorch's announcement reports ~8% end to end on Llama 3 70B (up to; no layout stated).
    On torchtitan's 70B layout the model's gain lies within a factor 1.6 of it, 5% to 13%: a model that
    hid no collective (0%) or every one of the step (about +14%) fails."""
    gain = _step_s(False) / _step_s(True) - 1
    assert ANNOUNCED_GAIN / 1.6 <= gain <= ANNOUNCED_GAIN * 1.6, gain


def test_async_tp_changes_nothing_without_sequence_parallelism_or_tp():
    assert _step_s(True, sp=False, micro_batch=1) == _step_s(False, sp=False, micro_batch=1)
    m, _ = resolve_model("llama3-8b")
    plans = [make_plan(m, 1e9, 4096, 64 * 4096, "bf16", async_tp=a) for a in (False, True)]
    s = [
        estimate(
            m, "h100-sxm", 8, layout=dict(tp=1, pp=1, zero=1, micro_batch=1), plan=p
        ).time.step_s
        for p in plans
    ]
    assert s[0] == s[1]


def test_cli_marks_the_layout_and_warns_where_it_cannot_apply(capsys):
    rc, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama3-70b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "64",
        "--tokens",
        "1B",
        "--tp",
        "8",
        "--async-tp",
    )
    assert rc == 0 and "· async TP" in out
    rc, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama3-8b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "8",
        "--tokens",
        "1B",
        "--tp",
        "1",
        "--async-tp",
    )
    assert rc == 0 and "--async-tp has no effect on this layout" in out and "· async TP" not in out


def test_exports_name_the_engines_switch(capsys):
    base = (
        "estimate",
        "--model",
        "llama3-70b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "64",
        "--tokens",
        "1B",
        "--tp",
        "8",
        "--zero",
        "3",
        "--async-tp",
    )
    rc, out, _ = run(capsys, *base, "--compile", "--export", "torchtitan")
    assert rc == 0 and "enable_async_tensor_parallel = true" in out
    rc, _, err = run(capsys, *base, "--export", "torchtitan")
    assert rc == 2 and "estimate with --compile too" in err
    rc, out, _ = run(capsys, *base, "--recompute", "full", "--export", "megatron")
    assert rc == 0 and "--tp-comm-overlap" in out


def test_solve_plans_with_async_tp_from_the_flag_and_a_scenario(tmp_path, capsys):
    """solve --async-tp (or async_tp = true in a scenario file) gives every plan it searches async TP."""
    from trilemma.solve import solve

    res = solve(
        model="llama3-70b",
        tokens="10B",
        gpu="h100-sxm",
        max_gpus=64,
        deadline="30d",
        minimize="cost",
        async_tp=True,
    )
    assert res.optimum.plan.async_tp
    sc = tmp_path / "s.toml"
    sc.write_text(
        'model = "llama3-70b"\ntokens = "10B"\ngpu = "h100-sxm"\nmax_gpus = 64\ndeadline = "30d"\n'
        'async_tp = "yes"\n'
    )
    rc, _, err = run(capsys, "solve", str(sc))
    assert rc == 2 and "scenario async_tp" in err and "true or false" in err
