"""Regenerate the parameter covariance shipped in presets/laws/besiroglu2024.toml.

Besiroglu et al. 2024 (arXiv 2404.10102) publish standard errors and 95% bootstrap intervals for
(A, B, E, alpha, beta) but not the covariance, and the correlations matter (A with alpha, B with beta).
This script refits the same 240 digitised Chinchilla points (Epoch AI's svg_extracted_data, shipped as
trilemma/data/losses.csv; the 5 highest-loss points dropped, as Besiroglu et al. did) with trilemma's
fitter, bootstraps them like the paper (resample runs, 4000 refits), and prints the covariance of
(ln A, ln B, ln E, alpha, beta) with the bootstrap intervals next to the published ones, and the law's
prediction error ([uncertainty.residual]: in-sample σ₀ and σ₁ per e-fold of N, D or compute beyond the
fitted runs, at least the published suites' floor) and the [range]'s C_max.

    python scripts/law_uncertainty.py            # prints a TOML [uncertainty] table and a comparison
"""

from __future__ import annotations

import csv
import sys
from importlib import resources

import numpy as np

from trilemma.quality.fit_procedure import bootstrap, fit_point

PUBLISHED_95 = {  # Besiroglu et al. 2024, notebook output (reference/scaling_laws.md §2)
    "A": (285.2, 743.6),
    "B": (1042.4, 5810.3),
    "E": (1.769, 1.871),
    "alpha": (0.317, 0.373),
    "beta": (0.331, 0.415),
}


def chinchilla_points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    text = resources.files("trilemma").joinpath("data", "losses.csv").read_text(encoding="utf-8")
    rows = [
        r for r in csv.DictReader(text.splitlines()) if r["provenance"] == "digitised_from_figure"
    ]
    n = np.array([float(r["params_total"]) for r in rows])
    d = np.array([float(r["tokens"]) for r in rows])
    loss = np.array([float(r["final_loss_reported"]) for r in rows])
    keep = np.sort(
        np.argsort(loss, kind="stable")[:-5]
    )  # Besiroglu et al. drop the 5 highest-loss points
    return n[keep], d[keep], loss[keep]


def main(n_boot: int = 4000, seed: int = 0) -> None:
    n, d, loss = chinchilla_points()
    point = fit_point(n, d, loss)
    s, _ = bootstrap(n, d, loss, point, n_boot=n_boot, seed=seed)
    theta = np.column_stack([np.log(s[:, 1]), np.log(s[:, 2]), np.log(s[:, 0]), s[:, 3], s[:, 4]])
    cov = np.cov(theta, rowvar=False)
    print(f"# point fit: {point.constants}, converged={point.converged}", file=sys.stderr)
    for j, k in enumerate(("E", "A", "B", "alpha", "beta")):
        lo, hi = np.quantile(s[:, j], [0.025, 0.975])
        print(
            f"# {k}: bootstrap 95% ({lo:.4g}, {hi:.4g}) vs published {PUBLISHED_95[k]}",
            file=sys.stderr,
        )
    print('params = ["ln_A", "ln_B", "ln_E", "alpha", "beta"]')
    print("covariance = [")
    for row in cov:
        print("  [" + ", ".join(f"{v:.6e}" for v in row) + "],")
    print("]")
    residual(n, d, loss, point)


def residual(n: np.ndarray, d: np.ndarray, loss: np.ndarray, point: object) -> None:
    """Print the law's [range] C_max and its [uncertainty.residual]: σ₀ in-sample, σ₁ the larger of the
    runs' own (extrapolation_error) and the published suites' floor, as trilemma fit makes it."""
    from trilemma.quality.extrapolation_band import EXTRAPOLATION_FLOOR, runs_range
    from trilemma.quality.fit_procedure import extrapolation_error
    from trilemma.quality.forms import chinchilla_loss

    r = np.log(loss / chinchilla_loss(point.constants, n, d))
    sd0 = float(np.sqrt(np.mean(r**2)))
    ext = extrapolation_error(n, d, loss, sd0)
    print(f"# [range] C_max = {runs_range(n, d)['C_max']:.3g}")
    print(f"# the runs' own sd per e-fold: {ext}; the floor {EXTRAPOLATION_FLOOR}")
    print("[uncertainty.residual]")
    print(f"log_sd = {sd0:.5f}")
    if ext is not None:
        print(f"log_sd_per_e_fold = {max(ext[0], EXTRAPOLATION_FLOOR):.5f}\ndf = {ext[1]}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
