"""Unfused attention's matmuls measured beside the step model's two readings of them: a device check.

    python benchmarks/thin_matmul.py [--gpu a100-80gb] [--heads 32] [--seq 2048]

Without FlashAttention an attention layer runs QKᵀ, (s×d_head)·(d_head×S), and P·V, (s×S)·(S×d_head), as
batched matmuls over micro-batch × heads: thin in d_head (64-160). The step model's GEMM law
(``trilemma.estimate.roofline.gemm_s``: eff_max · Π x/(x + half), against the roofline of the operands' and
result's bytes) was fitted on model GEMMs of d ≥ 768; how it carries to d_head decides how unfused runs
are timed (2021-22 Megatron, BLOOM, OPT, GPT-NeoX, GLM-130B). Two readings: the law's shape penalty as
fitted ("law") puts one 22B layer's attention forward at 1.6 ms where Korthikanti et al. 2022 Table 4's
selective-less-none difference gives 1.3 ms; the roofline at the law's ceiling with no shape penalty
("ceiling") is what ``unfused_attention_s`` uses (Table 4: 1.02-1.06× a layer; the CS336 fp32 steps and
H100 attention benchmark within 10% once their hand-written softmax's passes are counted). This script times
the batched matmuls (torch, CUDA events) at d_head 64-4096 and prints the measured rate beside both readings
for the GPU preset named (default: the one the device's name matches): at 16-bit, on a GPU, it checks the
choice directly. On a CPU it times fp32 and prints the measurement alone.
"""

from __future__ import annotations

import argparse
import time

PRESETS = (
    ("A100", "80GB", "a100-80gb"),
    ("A100", "", "a100-40gb"),
    ("H100", "", "h100-sxm"),
    ("H200", "", "h200"),
    ("B200", "", "b200"),
)


def preset_for(name: str) -> str | None:
    """The hardware preset a CUDA device name stands for, or None."""
    for chip, extra, preset in PRESETS:
        if chip in name and extra in name:
            return preset
    return None


def positive(text: str) -> int:
    """A whole number above 0, or argparse's one-line error (exit status 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; expected a positive whole number"
        )
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--gpu",
        default=None,
        help="hardware preset to compare with (default: from the device name)",
    )
    ap.add_argument(
        "--heads",
        type=positive,
        default=32,
        help="micro-batch × heads per GPU (the batch of the matmul)",
    )
    ap.add_argument("--seq", type=positive, default=2048, help="queries and keys per sequence")
    ap.add_argument("--reps", type=positive, default=20)
    a = ap.parse_args()

    import torch

    from trilemma.errors import TrilemmaError
    from trilemma.estimate.roofline import device_constants, gemm_s
    from trilemma.presets import constants, get_hardware
    from trilemma.specs import Precision

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype, prec = (torch.bfloat16, Precision.BF16) if cuda else (torch.float32, Precision.FP32)
    name = torch.cuda.get_device_name() if cuda else "cpu"
    preset = a.gpu or (preset_for(name) if cuda else None)
    try:
        hw = get_hardware(preset) if preset else None
    except TrilemmaError as err:
        ap.error(f"--gpu: {err}")
    c = device_constants(constants(), hw, prec) if hw else None
    b, s = a.heads, a.seq
    print(f"{name} ({dev}, {dtype}), batch {b}, s = S = {s}; model: {preset or 'none'}")
    print(f"{'matmul':<24} {'measured TFLOP/s':>16} {'law':>10} {'ceiling':>10}")

    def timed(x: torch.Tensor, y: torch.Tensor) -> float:
        for _ in range(3):
            torch.bmm(x, y)
        if cuda:
            torch.cuda.synchronize()
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            for _ in range(a.reps):
                torch.bmm(x, y)
            t1.record()
            torch.cuda.synchronize()
            return t0.elapsed_time(t1) / 1e3 / a.reps
        t = time.perf_counter()
        for _ in range(a.reps):
            torch.bmm(x, y)
        return (time.perf_counter() - t) / a.reps

    for dh in (64, 96, 128, 160, 256, 1024, 4096):
        for label, (M, N, K) in (
            (f"QKᵀ  d_head {dh}", (s, s, dh)),
            (f"P·V  d_head {dh}", (s, dh, s)),
        ):
            x = torch.randn(b, M, K, device=dev, dtype=dtype)
            y = torch.randn(b, K, N, device=dev, dtype=dtype)
            sec = timed(x, y)
            flop = 2.0 * b * M * N * K
            row = f"{label:<24} {flop / sec / 1e12:>16.2f}"
            if hw is not None:
                peak, bw, e = hw.peak(prec), hw.hbm_bw_bytes_per_s, float(x.element_size())
                law = b * float(gemm_s(M, N, K, peak, bw, e, c))
                ceil = b * float(gemm_s(M, N, K, peak, bw, e, {**c, "gemm_half_dim": 0.0}))
                row += f" {flop / law / 1e12:>10.1f} {flop / ceil / 1e12:>10.1f}"
            print(row)
            del x, y


if __name__ == "__main__":
    main()
