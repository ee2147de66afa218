"""Step MFU against what was measured (the time floors).

- No plan runs above 100% of any peak (a bandwidth-rich precision once did: A100 fp32 at 104.7%).
- No plan's step MFU is more than 5 points above the best MFU measured for its chip family in the
  shipped data (throughput rows, model FLOPs in the PaLM convention: MFU rows as reported, TFLOP/s,
  tokens/s and step times converted with the row's own model FLOPs per token).
- Published large-run step MFU beside the prediction for the runs' own layouts: Nemotron-4 15B on
  2,304 H100 (Parmar et al. 2024, arXiv 2402.16819, Table 2: 30.5%), a calibration row, so a check of
  consistency rather than an independent one; PaLM 540B (Chowdhery et al. 2022, Table 3: 46.2% on
  6,144 TPU v4) is a whole-run row of the same data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trilemma.validate.cases import load_file
from trilemma.validate.floors import highest_plan_mfu, measured_mfu, small_config_errors

#: fp32 forward + backward times of the CS336 models on one A100-40GB (github.com/yyin-dev/cs336-a2), in the
#: backtest schema: a check of fp32 steps, not a calibration row
CS336_FP32 = Path(__file__).parent / "data" / "cs336_fp32_a100.csv"
#: the same models' whole fp32 steps on an H100 (and on the A100, where they fitted): d_model, context, times
CS336_FP32_H100 = CS336_FP32.with_name("cs336_fp32_h100.csv")


def _h100_rows() -> dict[tuple[int, int], dict[str, str]]:
    """CS336_FP32_H100's rows by (d_model, context)."""
    import csv

    with open(CS336_FP32_H100) as f:
        return {
            (int(r["d_model"]), int(r["context"])): r
            for r in csv.DictReader(x for x in f if not x.startswith("#"))
        }


def test_measured_ceilings_are_what_the_sources_say():
    """Sanity of the reference: the best 16-bit A100 step is llm-foundry's MPT-7B on 8 GPUs (~64% MFU in
    its README's table), the best H100 one ~46%: well below 100%, above Korthikanti's 56.3% on A100. The
    best fp32 one measured is the CS336 2.7B model's forward and backward on one A100-40GB (2,048 tokens in
    2.5753 s), by hand below: SGEMMs on the SIMT cores run near their peak."""
    by_class = measured_mfu(by_precision=True)
    assert 0.563 <= by_class[("nvidia-ampere", "16-bit")] < 0.70
    assert 0.40 <= by_class[("nvidia-hopper", "16-bit")] < 0.55
    assert measured_mfu() == {
        f: max(v for (ff, _), v in by_class.items() if ff == f) for f, _ in by_class
    }
    # 32 layers of d 2560, SwiGLU 10240, untied 10,000-token head: 6 FLOPs per parameter per token over the
    # layers' and the head's weights + attention's 12·L·d·s (PaLM's convention: full, not causal)
    L, d, f, s, vocab = 32, 2560, 10240, 512, 10000
    per_token = 6 * (L * (4 * d * d + 3 * d * f) + vocab * d) + 12 * L * d * s
    by_hand = per_token * 4 * s / 2.5753 / 19.5e12
    assert 0.84 < by_hand < 0.86
    fp32 = measured_mfu(by_precision=True, cases=load_file(str(CS336_FP32), "throughput")[1])
    assert fp32 == {("nvidia-ampere", "fp32"): pytest.approx(by_hand, rel=0.01)}


#: every preset of a chip family with measured steps: the floor is read on each (validate.floors.floor_gpus)
FLOOR_GPUS = ("v100-32gb", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h800", "h200")
HOPPER = FLOOR_GPUS[3:]
AMPERE = FLOOR_GPUS[1:3]
#: the presets the plan floor is read on: V100's only measured steps are BERT-large fine-tunes at batch 4
#: in eager PyTorch (Hugging Face's single-GPU guide, 16% MFU), no reference for the best a plan reaches
PLAN_FLOOR_GPUS = FLOOR_GPUS[1:]


def test_the_floor_is_read_on_every_preset_of_a_measured_family():
    from trilemma.validate.floors import floor_gpus

    assert floor_gpus() == list(FLOOR_GPUS)


# A100 16-bit holds with 1.4 points to spare (Llama 2 7B on 64 A100s at 67.8% against 64.1% + 5, fp16): the
# 71% plan of Llama 2 13B on 512 A100s (ZeRO-2, micro-batch 4) no longer fits once the memory inventory
# counts what PyTorch saves (benchmarks/memory_vs_torch.py: rotary Q/K, four SwiGLU tensors, 12-byte
# logits). The reference is the best row of the plan's own precision class; tf32, which no row measures,
# is held to the family's best at any precision. H200 holds (49.3% at 16 bits) since its matmuls keep H100's
# balance (hardware.toml balance_bw_bytes_per_s); at its own 4.8 TB/s the law gave it 59.3%.
@pytest.mark.parametrize(
    "gpu, precisions, cls",
    [(g, ("bf16", "fp16"), "16-bit") for g in PLAN_FLOOR_GPUS]
    + [(g, ("fp8",), "fp8") for g in HOPPER]
    + [(g, ("tf32",), None) for g in PLAN_FLOOR_GPUS],
)
def test_no_plan_above_the_best_measured_step_plus_five_points(gpu, precisions, cls):
    from trilemma.presets import get_hardware

    family = get_hardware(gpu).family
    ref = measured_mfu(by_precision=True)[(family, cls)] if cls else measured_mfu()[family]
    worst = highest_plan_mfu(gpu, precisions)
    assert 0 < worst[0] <= ref + 0.05, worst


@pytest.mark.parametrize("gpu", AMPERE)
def test_fp32_plans_stay_below_the_measured_fp32_step_plus_five_points(gpu):
    """A100 fp32 (no calibration row: the CS336 times are a check): no plan of the sweep above the 84.8% of
    peak the 2.7B model's fp32 forward and backward measured, + 5 points; and not far below it either (the
    step model once held fp32 GEMMs at 51-58% of peak where the profiled SGEMMs ran at 87-89%)."""
    measured = measured_mfu(by_precision=True, cases=load_file(str(CS336_FP32), "throughput")[1])
    ref = measured[("nvidia-ampere", "fp32")]
    worst = highest_plan_mfu(gpu, ("fp32",))
    assert ref - 0.10 < worst[0] <= ref + 0.05, worst


@pytest.mark.xfail(
    strict=True,
    reason="the time floors' open line: the sweep's fp32 plans on Hopper (68-72% of "
    "the fp32 peak, GEMMs of 4,096 × 5,120-7,680) stand above the largest fp32 step measured there "
    "(the CS336 2.7B model's whole step, 51%) + 5 points, until a step of their size is measured "
    "(benchmarks/fp32_step.py, a device check); strict: a pass means the floor now holds",
)
@pytest.mark.parametrize("gpu", HOPPER)
def test_fp32_plans_on_hopper_against_its_measured_fp32_steps(gpu):
    from trilemma.validate.floors import fp32_step_checks

    checks = measured_mfu(
        by_precision=True, cases=fp32_step_checks(str(CS336_FP32), str(CS336_FP32_H100))
    )
    worst = highest_plan_mfu(gpu, ("fp32",))
    assert worst[0] <= checks[("nvidia-hopper", "fp32")] + 0.05, worst


def test_fp32_steps_against_the_measured_forward_backward_times():
    """The 15 CS336 fp32 rows, predicted with the shipped constants (none of them fitted on): the XL (1.6B)
    and 2.7B models within 15% at every context, every model within 10% at 2,048 tokens per step. The
    smaller models' shorter steps are predicted fast (GPT-2 small at 512 tokens: 0.4x): their time is eager
    PyTorch dispatching a hand-written model's many small operations, beyond one cost per kernel launch."""
    from trilemma.presets import constants
    from trilemma.validate.predict import predict

    _, cases, skipped = load_file(str(CS336_FP32), "throughput")
    assert len(cases) == 15 and not skipped
    for p in predict(cases, constants()):
        c = p.case
        ratio = p.predicted / c.reported
        tokens = c.plan.stages[0].global_batch_tokens
        if c.model.d_model >= 1600:
            assert 0.85 < ratio < 1.15, (c.label, ratio)
        if tokens == 2048:
            assert 0.90 < ratio < 1.10, (c.label, ratio)


def test_small_configurations_leave_one_source_out_floor():
    """The time floor for small configurations: single-node steps of models of at most 2B parameters,
    predicted with their source left out of the calibration (the LOSO predictions the calibration
    stored, reproduced by tests/test_validate.py), median error ≤ 15%. (79 llm-foundry rows today; the
    GPT-2-style Megatron measurements of vTrain are kept independent and are not here.)"""
    import math

    import numpy as np

    errors = small_config_errors()
    assert len(errors) >= 50
    assert math.exp(float(np.median(errors))) - 1 <= 0.15


@pytest.mark.in_sample
def test_fp32_training_step_memory_against_the_profiled_peaks_in_sample():
    """The same model's whole fp32 step (forward, backward, AdamW) on the A100-40GB peaked at about 32 and 37
    GiB of allocated tensors at contexts 128 and 256 (the writeup's memory-snapshot plots, read to the GiB:
    tests/data/cs336_fp32_a100_memory.csv). In-sample: the same two rows are calibration rows of
    data/memory.csv (the memory band's fourth source), though an allocated peak counts neither fitted memory
    constant (trilemma.validate.fit.fit_memory). The tensor inventory is within 10% of each, and above the
    smaller by a margin: by hand, weights, gradients and two Adam moments alone are 16 bytes × 1.998B
    parameters = 29.8 GiB."""
    from trilemma.presets import constants
    from trilemma.units import GIB
    from trilemma.validate.predict import predict

    _, cases, skipped = load_file(str(CS336_FP32.with_name("cs336_fp32_a100_memory.csv")), "memory")
    assert len(cases) == 2 and not skipped
    params = 48 * (4 * 1600**2 + 3 * 1600 * 6400 + 2 * 1600) + 2 * 10000 * 1600 + 1600
    states = 16 * params / GIB
    assert 29.5 < states < 30.0
    for p in predict(cases, constants()):
        assert p.predicted / p.case.reported == pytest.approx(1.0, abs=0.10), p.case.label
        assert p.predicted > states * GIB


def test_fp32_steps_on_h100_against_the_same_models_measured_there():
    """The CS336 models' whole fp32 steps on an H100 (tests/data/cs336_fp32_h100.csv: forward, backward and
    the model's own AdamW, the same code as the A100 rows; none fitted on). The optimizer is a per-parameter
    loop of eager ops the step model does not describe, so its time is taken from the A100 measurements of
    the same step (whole step less forward and backward) and scaled by the two chips' memory bandwidth (it
    is elementwise traffic); the rest is the forward and backward, predicted on h100-sxm from the A100 rows'
    cases. GPT-2 medium and large at 2,048 tokens and the XL at 1,024 (the largest steps the A100 also timed with
    its optimizer) come out 0.90-1.10×. Before the
    H100's fp32 half-dimension and best SGEMM were measured (hardware.toml: cuBLAS SGEMMs on an H100 SXM;
    the half-dimension scaled from the 16-bit one by rate × bytes, as on A100) they came out 0.69-0.76×."""
    import dataclasses

    from trilemma.presets import constants, get_hardware
    from trilemma.validate.predict import predict

    rows = _h100_rows()
    h100, a100 = get_hardware("h100-sxm"), get_hardware("a100-40gb")
    _, cases, _ = load_file(str(CS336_FP32), "throughput")
    checked = 0
    for c in cases:
        ctx = int(c.plan.stages[0].global_batch_tokens) // 4
        r = rows[(c.model.d_model, ctx)]
        if not r["a100_step_s"] or not (
            c.model.d_model >= 1024 and ctx == 512 or c.model.d_model >= 1600 and ctx == 256
        ):
            continue
        optimizer_s = (
            (float(r["a100_step_s"]) - c.reported)
            * a100.hbm_bw_bytes_per_s
            / h100.hbm_bw_bytes_per_s
        )
        measured = float(r["h100_step_s"]) - optimizer_s
        (p,) = predict([dataclasses.replace(c, hardware=h100)], constants())
        assert 0.90 < p.predicted / measured < 1.10, (c.label, ctx, p.predicted / measured)
        checked += 1
    assert (
        checked == 3
    )  # medium and large at 2,048 tokens, XL at 1,024 (larger ones ran out of memory on the A100)


def test_the_largest_fp32_step_measured_on_hopper():
    """The CS336 2.7B model (32 layers of d 2,560, 3.41B parameters) at 2,048 tokens, the largest fp32 step
    measured on Hopper (tests/data/cs336_fp32_h100.csv: 1.2463 s for forward, backward and AdamW), whose
    optimizer the A100 never timed (out of memory): its per-parameter eager AdamW is taken at the XL's A100
    cost per parameter (whole step less forward and backward, the mean of its two contexts) and scaled by the
    bandwidths, as above. Its forward and backward are predicted within 10%. The whole step's MFU, by hand
    below, is the Hopper family's best measured fp32 step: the reference of benchmarks/time_floors.py's
    fp32 line, where the sweep's highest fp32 plan (Llama 2 13B, GEMMs twice as wide) stands above it + 5
    points until a larger fp32 step is measured there (benchmarks/fp32_step.py)."""
    import dataclasses

    from trilemma.estimate.params import param_counts
    from trilemma.presets import constants, get_hardware
    from trilemma.validate.floors import fp32_step_checks
    from trilemma.validate.predict import predict

    rows = _h100_rows()
    h100, a100 = get_hardware("h100-sxm"), get_hardware("a100-40gb")
    cases = {
        (c.model.d_model, int(c.plan.stages[0].seq_len)): c
        for c in load_file(str(CS336_FP32), "throughput")[1]
    }
    xl = [
        (float(rows[(1600, ctx)]["a100_step_s"]) - cases[(1600, ctx)].reported)
        / param_counts(cases[(1600, ctx)].model).total
        for ctx in (128, 256)
    ]
    big = cases[(2560, 512)]
    n = param_counts(big.model).total
    assert 3.40e9 < n < 3.42e9  # 32·(4·2560² + 3·2560·10240 + 2·2560) + 2·10000·2560 + 2560
    optimizer_s = sum(xl) / len(xl) * n * a100.hbm_bw_bytes_per_s / h100.hbm_bw_bytes_per_s
    assert 0.1 < optimizer_s < 0.25
    measured = float(rows[(2560, 512)]["h100_step_s"]) - optimizer_s
    (p,) = predict([dataclasses.replace(big, hardware=h100)], constants())
    assert 0.90 < p.predicted / measured < 1.10, p.predicted / measured
    # by hand: PaLM's model FLOPs of 2,048 tokens over the whole step at H100's 66.9 TFLOP/s of fp32
    L, d, f, s, vocab = 32, 2560, 10240, 512, 10000
    per_token = 6 * (L * (4 * d * d + 3 * d * f) + vocab * d) + 12 * L * d * s
    by_hand = per_token * 4 * s / 1.2463 / 66.9e12
    assert 0.50 < by_hand < 0.52
    checks = measured_mfu(
        by_precision=True, cases=fp32_step_checks(str(CS336_FP32), str(CS336_FP32_H100))
    )
    assert checks[("nvidia-hopper", "fp32")] == pytest.approx(by_hand, rel=1e-3)
    assert checks[("nvidia-ampere", "fp32")] == pytest.approx(0.848, abs=0.005)
