"""The figure of `trilemma fit --plot`: loss vs N, loss vs D, observed vs predicted, with the fitted law
(L = E + A/N^α + B/D^β, Hoffmann 2022 Eq. 2, through ``trilemma.quality.forms.chinchilla_loss``).

matplotlib is imported on first use only (``trilemma.report.figure``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from trilemma.quality.fit import FitReport
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.runs import size_groups
from trilemma.report.figure import pyplot, save_figure

__all__ = ["plot_fit"]


def plot_fit(report: FitReport, path: str | Path) -> Path:
    """Loss vs N and loss vs D with the fitted law (matplotlib, imported here only)."""
    plt = pyplot(path)
    runs, c = report.runs, report.point.constants
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    ratio = runs.d / runs.n

    def shade(v: np.ndarray | float, lo: float, hi: float) -> Any:
        return cmap((np.log10(v) - lo) / max(hi - lo, 1e-9))

    # loss vs N, coloured by tokens/parameter; the fit at constant tokens/parameter D = r·N
    ax = axes[0]
    rlo, rhi = np.log10(ratio.min()), np.log10(ratio.max())
    ax.scatter(runs.n, runs.loss, c=shade(ratio, rlo, rhi), s=18, edgecolors="none")
    grid = np.logspace(np.log10(runs.n.min()) - 0.1, np.log10(runs.n.max()) + 0.3, 200)
    for r in np.unique(np.quantile(ratio, [0.0, 0.5, 1.0])):
        ax.plot(
            grid,
            chinchilla_loss(c, grid, r * grid),
            color=shade(r, rlo, rhi),
            lw=1.4,
            label=f"fit at D/N = {r:.3g}",
        )
    ax.set_xlabel("parameters N")
    # loss vs D, coloured by N; the fit at (up to five of) the model sizes
    ax = axes[1]
    nlo, nhi = np.log10(runs.n.min()), np.log10(runs.n.max())
    ax.scatter(runs.d, runs.loss, c=shade(runs.n, nlo, nhi), s=18, edgecolors="none")
    grid = np.logspace(np.log10(runs.d.min()) - 0.1, np.log10(runs.d.max()) + 0.3, 200)
    g = size_groups(runs.n)
    picks = np.unique(np.linspace(0, g.max(), min(5, g.max() + 1)).round().astype(int))
    for k in picks:
        nk = float(np.median(runs.n[g == k]))
        ax.plot(
            grid,
            chinchilla_loss(c, nk, grid),
            color=shade(nk, nlo, nhi),
            lw=1.4,
            label=f"fit at N = {nk:.3g}",
        )
    ax.set_xlabel("tokens D")
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_ylabel(f"final loss ({report.law.loss_unit})")
        ax.legend(fontsize=8)
    # observed vs predicted
    ax = axes[2]
    pred = chinchilla_loss(c, runs.n, runs.d)
    ax.scatter(pred, runs.loss, c=shade(runs.n, nlo, nhi), s=18, edgecolors="none")
    lims = [min(pred.min(), runs.loss.min()), max(pred.max(), runs.loss.max())]
    ax.plot(lims, lims, color="grey", lw=1, ls="--")
    ax.set_xlabel("predicted loss")
    ax.set_ylabel("observed loss")
    ax.set_title("colour: N (centre, right), D/N (left)", fontsize=8)
    c_txt = f"E={c['E']:.3f}  A={c['A']:.4g}  B={c['B']:.4g}  alpha={c['alpha']:.3f}  beta={c['beta']:.3f}"
    fig.suptitle(f"{report.law.name}: L = E + A/N^alpha + B/D^beta   ({c_txt})", fontsize=9)
    return save_figure(fig, path)
