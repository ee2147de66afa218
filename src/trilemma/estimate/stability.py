"""Training-stability notes per precision: documented cases, not a probability (none is published).

fp16 trains only with loss scaling (Micikevicius et al. 2018, arXiv 1710.03740 §3.2); its overflow and
divergence risk grows with model size, learning rate and run length. The documented failures at scale
(OPT-175B's restarts, BLOOM's 104B fp16 trials) and the thresholds are in presets/precision.toml [fp16].
"""

from __future__ import annotations

from trilemma.presets import precision_presets
from trilemma.units import fmt_count


def fp16_risk_params() -> float:
    """Parameters from which fp16 training carries the documented divergence risk (precision.toml fp16.risk_params)."""
    return float(precision_presets()["fp16"]["risk_params"])


def stability_flag(precision: str, params_total: float) -> str:
    """A short risk flag for a table column: "" when none is documented for this precision and size."""
    if str(precision) == "fp16" and params_total >= fp16_risk_params():
        return f"fp16 ≥ {fmt_count(fp16_risk_params())}: divergence risk"
    return ""


def stability_warning(precision: str, params_total: float) -> str | None:
    """The warning an estimate carries for a precision and model size with documented instabilities; None otherwise."""
    if not stability_flag(precision, params_total):
        return None
    return (
        f"fp16 at {fmt_count(params_total)} parameters (documented failures from {fmt_count(fp16_risk_params())}): fp16 needs loss "
        "scaling and its overflow/divergence risk grows with size, learning rate and run length — OPT-175B (fp16) "
        "needed dozens of restarts after loss divergences (Zhang et al. 2022, arXiv 2205.01068 §2.5), BLOOM's 104B "
        "fp16 trials diverged and the 176B run used bf16 (Le Scao et al. 2022, arXiv 2211.05100 §3.5); the time "
        "and cost here include no restarts for it. Use bf16 where the chip has it"
    )
