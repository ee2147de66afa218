"""The time floors, each beside the figure that meets or misses it.

    python benchmarks/time_floors.py            # about a minute; --speed adds benchmarks/solve_speed.py

- Leave-one-source-out medians (throughput, whole runs) as the last calibration stored them
  (`python scripts/calibrate.py` reproduces them), and the small configurations' (one node, ≤ 2B
  parameters: trilemma.validate.floors.small_config_errors).
- Step MFU: no plan above 100% of its precision's peak, none more than 5 points above the best MFU
  measured for its chip family in the data (trilemma.validate.floors.measured_mfu), over Llama 2
  7B/13B/70B and GPT-3 175B on 64, 512 and 2,048 GPUs in each precision the chip has, on every preset of
  a family with measured steps (A100 40/80 GB; H100 SXM and PCIe, H800, H200); the reference is read within
  the plan's precision class (fp32 from the CS336 steps of tests/data, no calibration row).
- Llama 3.1 405B with Meta's layout on 16,384 H100s is accepted; 25,000 GPUs find a layout.

Then a piece on its own ("check the pieces"): the GEMM term against each chip's measured best
matmul (MAMF, stas00/ml-engineering): no GEMM of any shape may beat it; how far below it the term sits at
the measured shape is printed, not bounded (the calibrated rate includes what a training step loses).
And one layer's time in Korthikanti et al.'s Table 4 (arXiv 2205.05198), with the overhead of each
configuration over no recomputation beside the published one.
"""

from __future__ import annotations

import math
import runpy
import sys
from pathlib import Path

import numpy as np

#: fp32 forward + backward times measured on an A100 (github.com/yyin-dev/cs336-a2): a check, not calibration rows
CS336_FP32 = Path(__file__).resolve().parents[1] / "tests" / "data" / "cs336_fp32_a100.csv"
#: the same models' whole fp32 steps measured on an H100 (the same repository's writeup)
CS336_FP32_H100 = CS336_FP32.with_name("cs336_fp32_h100.csv")


def _row(what: str, value: str, floor: str, ok: bool) -> None:
    print(f"{'ok  ' if ok else 'MISS'} {what:<58} {value:>16}   floor {floor}")


def main() -> None:
    from trilemma.api import estimate
    from trilemma.presets import calibration, get_hardware
    from trilemma.validate.floors import (
        floor_gpus,
        fp32_step_checks,
        gemm_against_mamf,
        highest_plan_mfu,
        korthikanti_layer_ms,
        math_class,
        measured_mfu,
        small_config_errors,
    )

    s = calibration()["summary"]
    for kind, floor in (("throughput", 0.10), ("runs", 0.12)):
        loso = s[kind]["leave_one_source_out"]
        med = loso["median_error"]
        _row(
            f"{kind}: leave-one-source-out median ({loso['n']} rows)",
            f"{med:.1%}",
            f"≤ {floor:.0%}",
            med <= floor,
        )
    small = small_config_errors()
    med = math.exp(float(np.median(small))) - 1
    _row(
        f"small configurations: LOSO median ({len(small)} rows)", f"{med:.1%}", "≤ 15%", med <= 0.15
    )

    # the floor: no plan more than 5 points above the best step MFU measured on its chip family, read within the
    # plan's precision class (bf16/fp16 together): the calibration rows of that class, else the measured steps
    # of that class kept as checks (fp32: CS336, tests/data), else the family's best at any precision. An fp32
    # step is not bounded by a 16-bit one: A100's fp32 forward and backward measured 84.8% of the fp32 peak
    # where its best 16-bit step is 64.1% of the 16-bit one (SIMT math at 1/16 the rate is easier to feed).
    best, by_class = measured_mfu(), measured_mfu(by_precision=True)
    checks = measured_mfu(
        by_precision=True, cases=fp32_step_checks(str(CS336_FP32), str(CS336_FP32_H100))
    )
    hopper_fp32_miss = False
    for gpu in floor_gpus():
        hw = get_hardware(gpu)
        classes: dict[str, list[str]] = {}
        for p in hw.peak_flop_per_s:
            classes.setdefault(math_class(p), []).append(str(p))
        for cls, precs in classes.items():
            mfu, m, n, prec = highest_plan_mfu(gpu, tuple(precs))
            if not m:
                continue
            what = f"{gpu}: highest step MFU ({m}, {n} GPUs, {prec})"
            if (ref := by_class.get((hw.family, cls))) is not None:
                why = f"best measured {cls} {ref:.1%} + 5"
            elif (ref := checks.get((hw.family, cls))) is not None:
                why = f"best measured {cls} step, CS336 (tests/data) {ref:.1%} + 5"
            else:
                ref, why = (
                    best[hw.family],
                    f"no {cls} step measured: family's best {best[hw.family]:.1%} + 5",
                )
            _row(
                what,
                f"{mfu:.1%}",
                f"≤ {min(1.0, ref + 0.05):.1%} ({why})",
                mfu <= min(1.0, ref + 0.05),
            )
            hopper_fp32_miss |= (hw.family, cls) == ("nvidia-hopper", "fp32") and mfu > ref + 0.05
    if hopper_fp32_miss:
        print(
            "     … fp32 on Hopper: the largest fp32 step measured there is the CS336 2.7B model's (2,048 tokens of "
            "d 2,560, predicted within 10%); these plans' GEMMs are beyond it: the device check is "
            "benchmarks/fp32_step.py"
        )

    e = estimate(
        "llama3.1-405b",
        "h100-sxm",
        16384,
        15.6e12,
        seq_len=8192,
        global_batch_tokens=16_777_216,
        layout={"tp": 8, "pp": 16},
    )
    _row(
        "Llama 3.1 405B, 16,384 H100, tp 8 pp 16, 16M-token batch",
        f"MFU {e.time.mfu:.1%}",
        "accepted",
        True,
    )
    e = estimate("llama3.1-405b", "h100-sxm", 25000, 15.6e12, seq_len=8192)
    lay = e.layout
    _row("Llama 3.1 405B on 25,000 H100", f"tp{lay.tp} pp{lay.pp} dp{lay.dp}", "a layout", True)

    print(
        "GEMM term against the measured best matmul (MAMF), fraction of peak: at MAMF's shape / fastest over a "
        "128-32,768 grid / measured"
    )
    for gpu in ("a100-80gb", "h100-sxm", "h800", "h200", "b200", "mi300x"):
        for prec, at, mamf, top in gemm_against_mamf(gpu):
            _row(
                f"{gpu} {prec}: GEMM at MAMF shape {at:.1%}, fastest {top:.1%}",
                f"MAMF {mamf:.1%}",
                "fastest ≤ MAMF",
                top <= mamf * (1 + 1e-9),
            )

    print(
        "One layer of Korthikanti et al.'s 22B model (8 A100s, TP 8; arXiv 2205.05198 Table 4), forward + backward:"
    )
    layers = korthikanti_layer_ms()
    base_m, base_p = layers[("none", False)]
    for (rc, sp), (m, p) in layers.items():
        what = f"recompute {rc}{', sequence parallel' if sp else ''}: {m:.1f} ms vs {p:.1f} ms ({m / p:.2f}×)"
        _row(
            what,
            f"{m / base_m - 1:+.0%} vs {p / base_p - 1:+.0%}",
            "within 10%; overhead within 5 points",
            abs(m / p - 1) <= 0.10 and abs((m / base_m) - (p / base_p)) <= 0.05,
        )

    if "--speed" in sys.argv:
        runpy.run_path(str(Path(__file__).with_name("solve_speed.py")), run_name="__main__")
    else:
        print(
            "speed (≥ 5M candidates/s, solve < 3 s): python benchmarks/solve_speed.py, or this script with --speed"
        )


if __name__ == "__main__":
    main()
