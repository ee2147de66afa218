"""The roofline of one kernel: a GEMM's time from its shape, the chip's peak and its bandwidth.

Each major matmul costs max(FLOPs / (peak × eff(M, N, K)), bytes / HBM bandwidth), with an
efficiency that falls for small or skinny shapes (Calculon, Isaev et al. SC'23 §4, models GEMM
efficiency as a function of operation size); the derivations are in docs/derivations.md, sections
"Chip balance", "GEMM ceiling" and "GEMM half-dimension by precision".
"""

from __future__ import annotations

import numpy as np

from trilemma.specs import HardwareSpec, Precision
from trilemma.specs.enums import DTYPE_BYTES


def gemm_efficiency(
    M: np.ndarray, N: np.ndarray, K: np.ndarray, eff_max: float, half: float
) -> np.ndarray:
    """Achievable fraction of peak for an (M×K)·(K×N) matmul: eff_max · Π x/(x + half)."""
    return eff_max * (M / (M + half)) * (N / (N + half)) * (K / (K + half))


def balance_factor(
    peak: float, hbm_bw: float, c: dict, width: float = 1.0, exponent: str = "balance_exponent"
) -> float:
    """How much of the efficiency ceiling a chip keeps, from its balance of compute to memory
    bandwidth: min(1, (ref / (peak · width / bw))^γ), the "memory wall" (Gholami et al. 2024, arXiv
    2403.14123); γ fitted, ref A100 bf16. ``exponent`` names γ's key (GEMMs ``balance_exponent``, the
    attention core ``attention_balance_exponent``); ``width`` the operands' bytes over bf16's 2
    (docs/derivations.md, "Chip balance")."""
    return float(min(1.0, (c["ref_flop_per_byte"] / (peak * width / hbm_bw)) ** c[exponent]))


def gemm_s(M, N, K, peak: float, hbm_bw: float, e: float, c: dict) -> np.ndarray:
    """Roofline time of one forward GEMM (seconds)."""
    flop = 2.0 * M * N * K
    # at most the device's measured best matmul (mamf) and at most 1 (docs/derivations.md, "GEMM ceiling")
    eff = np.minimum(
        c.get("mamf", 1.0),
        gemm_efficiency(
            M,
            N,
            K,
            c["gemm_max"]
            * balance_factor(peak, c.get("balance_bw", hbm_bw), c, c.get("operand_width", 1.0)),
            c["gemm_half_dim"],
        ),
    )
    mem = e * (M * K + K * N + M * N) / (hbm_bw * c["hbm"])
    return np.maximum(flop / (peak * eff), mem)


def sixteen_bit(hw: HardwareSpec) -> Precision | None:
    """The chip's 16-bit matmul path, bf16 else fp16; None where it publishes neither."""
    return next((p for p in (Precision.BF16, Precision.FP16) if p in hw.peak_flop_per_s), None)


def math_rate_ratio(hw: HardwareSpec, precision: Precision) -> float:
    """How fast ``precision``'s matmul math runs against the chip's 16-bit path (bf16, else fp16):
    peak(precision) / peak(16-bit); 1 where the chip has no 16-bit peak. A100: fp32 1/16 (SIMT cores),
    tf32 1/2; H100: fp32 1/14.8, tf32 1/2, fp8 2."""
    ref = sixteen_bit(hw)
    return hw.peak(precision) / hw.peak_flop_per_s[ref] if ref is not None else 1.0


def operand_width(precision: Precision) -> float:
    """A matmul operand's bytes at ``precision`` over bf16's 2: fp32 and tf32 (stored as fp32) 2, fp8 1/2."""
    return DTYPE_BYTES[precision.value] / DTYPE_BYTES[Precision.BF16.value]


def device_constants(consts: dict, hw: HardwareSpec, precision: Precision) -> dict:
    """The efficiency and latency constants one device's step is timed with at ``precision``:
    the calibrated ones, a probe profile's own in their place, ``mamf`` (the measured best matmul over
    peak; 1 where none is measured), ``operand_width`` (for ``balance_factor``) and ``balance_bw``
    (HardwareSpec.balance_bw_bytes_per_s, else the device's own bandwidth). The fitted GEMM
    half-dimension scales with ``math_rate_ratio`` × ``operand_width`` off the 16-bit path, unless
    measured at this precision (docs/derivations.md, "GEMM half-dimension by precision")."""
    mamf = hw.mamf_flop_per_s.get(precision)
    width = operand_width(precision)
    c = {
        **consts["efficiency"],
        **consts["latency"],
        **consts.get("host", {}),
        **hw.efficiency,
        "mamf": mamf / hw.peak(precision) if mamf else 1.0,
        "operand_width": max(1.0, width),
        "balance_bw": hw.balance_bw_bytes_per_s or hw.hbm_bw_bytes_per_s,
    }
    if (
        precision in hw.measured_half_dim
    ):  # fitted to the device's own matmuls at this precision: not scaled
        c["gemm_half_dim"] = hw.measured_half_dim[precision]
    elif "gemm_half_dim" not in hw.efficiency and sixteen_bit(hw) is not None:
        c["gemm_half_dim"] = c["gemm_half_dim"] * math_rate_ratio(hw, precision) * width
    return c


def gemm_rate(hw: HardwareSpec, precision: Precision, M, N, K, consts: dict) -> np.ndarray:
    """FLOP/s the step model gives one forward (M×K)·(K×N) matmul on ``hw`` at ``precision`` (elementwise over
    array M, N, K), inputs and output in that precision's bytes: the GEMM term alone, to set against a
    measured matmul rate."""
    e = DTYPE_BYTES[precision.value]
    c = device_constants(consts, hw, precision)
    return 2.0 * M * N * K / gemm_s(M, N, K, hw.peak(precision), hw.hbm_bw_bytes_per_s, e, c)


__all__ = [
    "balance_factor",
    "device_constants",
    "gemm_efficiency",
    "gemm_rate",
    "gemm_s",
    "math_rate_ratio",
    "operand_width",
    "sixteen_bit",
]
