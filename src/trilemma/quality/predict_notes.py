"""The notes and warnings of one loss prediction (trilemma.quality.predict.predict_loss): where the
plan lies against the runs the law was fitted on, its training precision, and repeated data."""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.quality.effective import loss_at
from trilemma.quality.laws import (
    Form,
    Law,
    precision_constants,
    precision_table,
    repetition_constants,
)
from trilemma.units import fmt_count


def range_notes(
    law: Law,
    n: float,
    d: float,
    n_eff: float,
    d_eff: float,
    notes: list[str],
    warnings: list[str],
) -> None:
    """Append an extrapolation note where N or D (tokens) lie beyond the law's fitted runs, and a
    warning where the effective N or D lie below them (a power law runs away there)."""
    if law.fit_range:
        r = law.fit_range
        if "N_max" in r and n > r["N_max"] * 1.5:
            notes.append(
                f"N is {n / r['N_max']:.1f}x the largest run {law.name} was fitted on ({fmt_count(r['N_max'])}): "
                "an extrapolation"
            )
        if "D_max" in r and d > r["D_max"] * 1.5:
            notes.append(
                f"D is {d / r['D_max']:.1f}x the most tokens {law.name} was fitted on ({fmt_count(r['D_max'])}): "
                "an extrapolation"
            )
        if "C_max" in r and 6.0 * n * d > r["C_max"] * 1.5:  # C = 6·N·D (Kaplan 2020 §2.1)
            notes.append(
                f"the compute 6·N·D is {6.0 * n * d / r['C_max']:.1f}x the largest run {law.name} was "
                f"fitted on ({r['C_max']:.3g} FLOP): an extrapolation"
            )
        # below the data a power law runs away (L → ∞ as N or D → 0): a warning, not a note
        if "N_min" in r and n_eff < r["N_min"] / 1.5:
            warnings.append(
                f"{'effective ' if n_eff != n else ''}N = {fmt_count(n_eff)} is below the smallest "
                f"model {law.name} was fitted on ({fmt_count(r['N_min'])}): the loss is extrapolated downward "
                "and grows without bound there"
            )
        if "D_min" in r and d_eff < r["D_min"] / 1.5:
            warnings.append(
                f"{'effective ' if d_eff != d else ''}D = {fmt_count(d_eff)} tokens is below the "
                f"fewest {law.name} was fitted on ({fmt_count(r['D_min'])}): the loss is extrapolated downward "
                "and grows without bound there"
            )


def precision_notes(law: Law, precision: Any, pen: float, kfac: float, notes: list[str]) -> None:
    """Append the loss penalty (``pen``, a fraction) and the effective-parameter factor ``kfac``
    of a low training precision."""
    if pen > 0:
        t = precision_table(str(precision))
        notes.append(
            f"training precision {precision}: loss × {1 + pen:.4f}, the published bound on its penalty against bf16 "
            f"({t['source']})"
        )
    if kfac != 1.0:
        k = precision_constants(law)
        notes.append(
            f"training precision {precision}: effective parameters x{kfac:.3f} in the form of Kumar et al. 2024 "
            f"(arXiv 2411.04330 Eq. 3-4) with gamma_w/a/kv = {k['gamma_w']}/{k['gamma_a']}/{k['gamma_kv']}: "
            f"{k['status']}"
        )


def repetition_notes(
    law: Law,
    sizes: tuple[float, float, float | None],
    kfac: float,
    mean: float,
    d_eff: float,
    notes: list[str],
    warnings: list[str],
) -> float | None:
    """Append what repeated data does (``sizes``: N, D and the unique tokens U, None for none)
    to the loss ``mean``; the epochs D/U (None without U)."""
    n, d, u = sizes
    epochs = None
    if law.form is Form.MUENNIGHOFF and u is None:
        notes.append("no --unique-tokens given: every token is taken as unique (one epoch)")
    if u is not None:
        rep = repetition_constants(law)
        epochs = d / u
        if law.form is not Form.MUENNIGHOFF:
            notes.append(
                f"repeated data: Muennighoff 2023 effective data{'' if law.form is Form.KAPLAN else ' and parameters'}"
                f" with R_D* = {rep['R_D_star']:.2f}, R_N* = {rep['R_N_star']:.2f} from {rep['from']} "
                f"(fitted on C4 with its own base law), applied to {law.name}"
            )
        if law.form is Form.KAPLAN:
            notes.append(
                "Kaplan's form has no compute-optimal size G, so Muennighoff's excess-parameter decay (N') is not applied"
            )
        useful = float(rep.get("useful_epochs", 4.0))
        if epochs > useful:
            at_useful = float(
                loss_at(law, law.constants, np.asarray(n), np.asarray(useful * u), u, kfac)
            )
            marginal = float(np.exp(-max(epochs - 1.0, 0.0) / rep["R_D_star"]))
            warnings.append(
                f"{epochs:.1f} epochs over {fmt_count(u)} unique tokens: effective data D' = {fmt_count(d_eff)} "
                f"({d_eff / d:.0%} of {fmt_count(d)} tokens); a further epoch is worth {marginal:.0%} of fresh data. "
                f"Muennighoff 2023: beyond ~{useful:g} epochs repetition adds little — predicted loss {mean:.4f}; "
                f"stopping at {useful:g} epochs ({fmt_count(useful * u)} tokens, {useful / epochs:.0%} of the training compute) "
                f"would give {at_useful:.4f} ({at_useful - mean:+.4f})"
            )
    return epochs
