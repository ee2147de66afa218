"""Which constants a table of runs pins: the checks (E at its floor, exponents out of range or with
bands too wide) and the staged fit that ties β to α, then fixes both at the literature's value,
when the runs cannot pin all five."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trilemma.quality.fit_procedure import TIE, bootstrap, fit_point, intervals
from trilemma.quality.law import EXPONENT_MIN
from trilemma.quality.objective import PointFit
from trilemma.quality.runs import Runs

#: E below this share of the lowest loss: the runs show no irreducible loss (E ran to its boundary, 0).
E_FLOOR = 0.01
#: Exponents outside (0, EXP_MAX] are not physical for a ladder: Hoffmann 2022 App. D.2 searched α, β in
#: [0, 2] ("the optimal initialisation is not on the boundary"); published fits give 0.28-0.37.
EXP_MAX = 2.0
#: An exponent whose bootstrap band is wider than this is not pinned by the runs: ~3x the published
#: exponents themselves (Hoffmann 0.34/0.28, Besiroglu 2024 0.348/0.366 with 95% bands 0.06-0.08 wide).
EXP_BAND_MAX = 1.0
#: α = β when the runs cannot pin them apart: Muennighoff et al. 2023 (arXiv 2305.16264) fit α = β = 0.353;
#: Besiroglu et al. 2024's refit has α ≈ β (0.348, 0.366); Gadre et al. 2024 tie them. When even the tied
#: exponent is not pinned it is fixed to 0.35, the value of those two fits.
LITERATURE_EXPONENT = 0.35


def unpinned(point: PointFit, samples: np.ndarray, loss_min: float, level: float) -> list[str]:
    """Why the runs do not pin the fit's constants (empty: they do): E at 0, an exponent outside
    [EXPONENT_MIN, EXP_MAX] (below it a law file is refused), or a bootstrap band of an exponent wider than EXP_BAND_MAX or of E reaching 0."""
    c = point.constants
    why = []
    if c["E"] < E_FLOOR * loss_min:
        why.append(f"E = {c['E']:.3g} is ~0 (below {E_FLOOR:.0%} of the lowest loss)")
    exps = ("alpha", "beta") if point.d_term else ("alpha",)
    why += [
        f"{k} = {c[k]:.3g} is outside [{EXPONENT_MIN:g}, {EXP_MAX:g}]"
        for k in exps
        if not EXPONENT_MIN <= c[k] <= EXP_MAX
    ]
    if len(samples):
        ci = intervals(samples, level)
        why += [
            f"{k}'s {level:.0%} band [{ci[k][0]:.3g}, {ci[k][1]:.3g}] is wider than {EXP_BAND_MAX:g}"
            for k in exps
            if ci[k][1] - ci[k][0] > EXP_BAND_MAX
        ]
        if ci["E"][0] < E_FLOOR * loss_min <= c["E"]:
            why.append(f"E's {level:.0%} band reaches ~0 ({ci['E'][0]:.3g})")
    return why


STAGES: tuple[tuple[str | float | None, str], ...] = (
    (None, "all five constants free"),
    (TIE, "beta tied to alpha (Muennighoff 2023's fitted form; Besiroglu 2024: alpha ~ beta)"),
    (
        LITERATURE_EXPONENT,
        f"alpha = beta fixed at {LITERATURE_EXPONENT} (Besiroglu 2024: 0.348/0.366; "
        "Muennighoff 2023: 0.353)",
    ),
)


@dataclass(frozen=True)
class Staged:
    """The fit kept by ``_staged_fit``: its point, bootstrap rows (and how many refits were
    degenerate), what was fixed (``fix``: None, TIE or an exponent; ``fixed`` in words) and why
    each looser fit was not kept."""

    point: PointFit
    samples: np.ndarray
    degenerate: int
    fix: str | float | None
    fixed: str
    why_all: list[str]


def staged_fit(
    runs: Runs,
    point: PointFit,
    *,
    n_boot: int,
    seed: int,
    delta: float,
    starts: int,
    level: float,
) -> Staged:
    """All five constants free, else β tied to α, else α = β fixed at the literature's value: the
    first stage whose constants the runs pin (``unpinned``), with its bootstrap."""
    n, d, loss = runs.n, runs.d, runs.loss

    def _boot(p: PointFit, fix: str | float | None) -> tuple[np.ndarray, int]:
        return (
            bootstrap(n, d, loss, p, n_boot=n_boot, seed=seed, delta=delta, fix=fix)
            if n_boot > 0
            else (np.empty((0, 5)), 0)
        )

    fix: str | float | None = None
    fixed_text, why_all = "", []
    stages = STAGES if point.d_term else STAGES[:1]
    for stage, (stage_fix, words) in enumerate(stages):
        if stage:
            point = fit_point(n, d, loss, delta=delta, starts=starts, fix=stage_fix)
        fix, fixed_text = stage_fix, words
        why = unpinned(point, np.empty((0, 5)), float(loss.min()), level)
        samples, degenerate = (
            (np.empty((0, 5)), 0) if why and stage < len(stages) - 1 else _boot(point, stage_fix)
        )
        why = why or unpinned(point, samples, float(loss.min()), level)
        if not why:
            break
        why_all.append(f"{words}: {'; '.join(why)}")
    return Staged(point, samples, degenerate, fix, fixed_text, why_all)
