"""Fitted constants that sit on a bound of their fit (``trilemma.validate.fit.FITTED_PARAMS``).

A constant the fit drives to its lower or upper bound is not measured by the data: the fit wanted to go
further, and the bound stops it. It says the model lacks a term, and the constant stands in for that
term. ``validate --json`` lists each one (``fitted_at_bounds``) with the note below naming the term; a
test requires a note for every constant found on a bound.
"""

from __future__ import annotations

from typing import Any

from trilemma.presets import constants
from trilemma.specs.constants import Constants
from trilemma.validate.fit import FITTED_PARAMS

#: a constant within this share of its bounds' width from one of them sits on it
ON_BOUND = 1e-3

#: the missing term each constant known to sit on a bound stands for
MISSING_TERM: dict[str, str] = {
    "efficiency.kernel_s": (
        "at its upper bound (10 µs of device time per kernel, where a launch gap is 1-2 µs: constants.toml): "
        "the step-time fit wants fixed time per kernel added to the device's, not hidden behind a host "
        "that runs ahead. It stands for per-kernel time the step has no term for (tail effects and wave "
        "quantisation of short kernels, the synchronous per-linear collectives of stacks without TP "
        "overlap), which weighs most in small models' short steps."
    ),
    "host.host_eager_op_s": (
        "at its lower bound (2 µs per eager operator, where PyTorch's dispatcher alone is 2-3 µs and the "
        "probe measures ~10 µs per counted operator on a CPU): with the device's per-kernel time on its "
        "upper bound the fit has no use for a host that runs ahead; the two trade against each other "
        "until a term for what kernel_s stands for is added."
    ),
    "memory.framework_residual_bytes": (
        "at its lower bound (0 bytes): the device totals it is fitted on (the Hugging Face BERT rows, the "
        "only ones that count it) leave nothing beyond the tensors × (1 + fragmentation), the measured "
        "CUDA context and NCCL's buffers; unbounded, the fit goes to -0.31 GiB. It stands for a term the memory "
        "model lacks: those rows are NVML's memory in use after training, not the peak the model predicts."
    ),
}


def at_bounds(consts: Constants | None = None) -> list[dict[str, Any]]:
    """Each fitted constant of ``consts`` (default: the shipped ones) within ``ON_BOUND`` of its
    bounds' width from a bound: its name, value, which bound, the bounds (the constant's unit) and the
    note from ``MISSING_TERM`` (None where there is none)."""
    consts = constants() if consts is None else consts
    out = []
    for section, key, lo, hi in FITTED_PARAMS:
        value = float(consts[section][key])
        tol = ON_BOUND * (hi - lo)
        side = "lower" if value - lo <= tol else "upper" if hi - value <= tol else None
        if side is None:
            continue
        name = f"{section}.{key}"
        out.append(
            {
                "constant": name,
                "value": value,
                "bound": side,
                "lower": lo,
                "upper": hi,
                "note": MISSING_TERM.get(name),
            }
        )
    return out


__all__ = ["MISSING_TERM", "ON_BOUND", "at_bounds"]
