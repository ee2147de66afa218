"""``--plot``: loss against training compute, the fitted law, its compute-optimal frontier, the held-out run.

Compute on the x axis is C = 6·N·D with N the law's parameters (non-embedding), the convention in
which the law's compute-optimal allocation is stated (Hoffmann 2022 Eq. 4 with C ≈ 6ND). Each fit
size is a colour: its runs as points and the law's curve L(N, C/6N) through them; the frontier is the
lower envelope min over N of L(N, C/6N), found numerically on a fine grid of N from a quarter of the
smallest size to four times the largest (the law is not extrapolated further than the held-out check). The held-out run is a
star (measured) beside the prediction with its band (an error bar). matplotlib is imported here only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from trilemma.quality.forms import chinchilla_loss as law_predict
from trilemma.report.figure import pyplot, save_figure
from trilemma.units import KILO

__all__ = ["plot_ladder"]


def frontier(
    c: dict[str, float], compute: np.ndarray, n_lo: float, n_hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """(loss, N) on the compute-optimal frontier: min over N of L(N, C/(6N)) for each C."""
    n = np.logspace(np.log10(n_lo), np.log10(n_hi), 800)
    loss = law_predict(c, n[None, :], compute[:, None] / (6.0 * n[None, :]))
    i = np.argmin(loss, axis=1)
    return loss[np.arange(len(compute)), i], n[i]


def plot_ladder(result: Any, report: Any, path: str | Path) -> Path:
    """Draw a ladder's runs, the fitted law per size, the compute-optimal frontier and the held-out
    check against compute to ``path``."""
    plt = pyplot(path)
    c = report.point.constants
    fit_rows = [r for r in result.runs if r.role == "fit" and r.loss is not None]
    held_rows = [r for r in result.runs if r.role == "held_out"]
    sizes = sorted({r.n for r in result.runs})
    cmap = plt.get_cmap("viridis")
    fig, ax = plt.subplots(figsize=(8.5, 5.6), constrained_layout=True)
    all_c = [6.0 * r.n * r.tokens for r in result.runs]
    c_grid = np.logspace(np.log10(min(all_c)) - 0.3, np.log10(max(all_c)) + 0.3, 300)
    _draw_sizes(ax, cmap, result, c, c_grid, fit_rows, sizes)
    f_loss, _ = frontier(c, c_grid, sizes[0] / 4, sizes[-1] * 4)
    ax.plot(
        c_grid,
        f_loss,
        color="black",
        lw=2.0,
        alpha=0.6,
        label="compute-optimal frontier (fitted law, N within 4x of the ladder's sizes)",
    )
    ho = result.held_out
    _draw_held_out(ax, ho, held_rows)
    ax.set_xscale("log")
    ax.set_xlabel("training compute C = 6·N·D (FLOP; N non-embedding parameters)")
    ax.set_ylabel("eval loss (nats/byte, fixed held-out split)")
    ax.set_title(
        f"trilemma ladder: L = {c['E']:.3f} + {c['A']:.3g}/N^{c['alpha']:.3f} + {c['B']:.3g}/D^{c['beta']:.3f}",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper right")
    ys = [r.loss for r in result.runs if r.loss is not None] + (
        [ho.predicted, ho.low, ho.high] if ho else []
    )
    if ys:
        ax.set_ylim(min(ys) * 0.93, max(ys) * 1.07)
    return save_figure(fig, path)


def _draw_sizes(
    ax: Any,
    cmap: Any,
    result: Any,
    c: Any,
    c_grid: np.ndarray,
    fit_rows: list[Any],
    sizes: list[float],
) -> None:
    """The law's curve at each model size (dashed when held out) and the fit's runs."""
    for k, n in enumerate(sizes):
        colour = cmap(k / max(1, len(sizes) - 1) * 0.9)
        held = any(r.n == n and r.role == "held_out" for r in result.runs)
        ax.plot(
            c_grid,
            law_predict(c, n, c_grid / (6.0 * n)),
            color=colour,
            lw=1.2,
            ls="--" if held else "-",
            label=f"law at N = {n / KILO:.0f}k" + (" (held out)" if held else ""),
        )
        pts = [r for r in fit_rows if r.n == n]
        if pts:
            ax.scatter(
                [6.0 * r.n * r.tokens for r in pts],
                [r.loss for r in pts],
                color=colour,
                s=28,
                zorder=3,
                edgecolors="black",
                linewidths=0.4,
            )


def _draw_held_out(ax: Any, ho: Any, held_rows: list[Any]) -> None:
    """The held-out prediction with its band and the measured loss (or the measured loss alone)."""
    if ho is not None:
        x = 6.0 * ho.n * ho.tokens
        ax.errorbar(
            [x],
            [ho.predicted],
            yerr=[[ho.predicted - ho.low], [ho.high - ho.predicted]],
            fmt="o",
            color="red",
            mfc="white",
            capsize=4,
            zorder=4,
            label=f"held-out prediction ({ho.interval.split(':')[0]} band)",
        )
        if ho.measured is not None:
            ax.scatter(
                [x],
                [ho.measured],
                marker="*",
                s=180,
                color="red",
                edgecolors="black",
                linewidths=0.5,
                zorder=5,
                label=f"held-out measured (error {ho.error:+.1%})",
            )
    elif held_rows and held_rows[0].loss is not None:
        r = held_rows[0]
        ax.scatter(
            [6.0 * r.n * r.tokens],
            [r.loss],
            marker="*",
            s=180,
            color="red",
            zorder=5,
            label="held-out measured",
        )
