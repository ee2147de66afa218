"""``solve --plot``: the frontier as three pictures, one per corner pair (time–cost, time–loss, cost–loss).

Each opens on the region around the pins and the optimum (a decade each side on the time and cost axes,
the losses of the frontier's plans in that window); ``--plot-range full`` shows every point. The pins are
lines, the region outside them is shaded, the optimum and the runners-up (each labelled with its lever)
are marked; time reads in minutes, hours, days or years, cost in dollars with k/M/B suffixes, and a
caption line gives the pins and the optimum. The file's suffix picks the format (.png, .svg, .pdf).
matplotlib is imported on first use only (``trilemma.report.figure``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.report.axis_labels import fmt_time_axis, fmt_usd_axis, time_ticks, window
from trilemma.report.figure import pyplot, save_figure
from trilemma.units import fmt_count, fmt_duration, fmt_usd

__all__ = ["PLOT_RANGES", "plot_frontier"]

#: what ``--plot-range`` takes: around the pins and the optimum (the default), or every point
PLOT_RANGES = ("pins", "full")
FORMATS = (".png", ".svg", ".pdf")
CMAP = "viridis_r"  # the third corner's colour: dark is more (longer, dearer, higher loss)
#: where runner-up labels sit from their marker, points: in turn, so that neighbours' labels part
OFFSETS = ((7, -11), (7, 5), (-7, 5), (-7, -11))


def _caption(r: Any) -> str:
    p, o, f = r.pins, r.optimum, r.frontier
    pins = [
        f"deadline {fmt_duration(p.deadline_s)}" if p.deadline_s is not None else "",
        f"budget {fmt_usd(p.budget_usd)}" if p.budget_usd is not None else "",
        f"budget {p.budget_gpu_hours:,.0f} GPU-hours" if p.budget_gpu_hours is not None else "",
        f"budget {p.budget_kwh:,.0f} kWh" if p.budget_kwh is not None else "",
        f"target loss {p.target_loss:g}" if p.target_loss is not None else "",
    ]
    text = (
        f"pins: {', '.join(x for x in pins if x) or 'none'}; minimise {p.minimize}. optimum: {o.model.name} on "
        f"{o.cluster.n_gpus}× {o.cluster.hardware.name} ({o.plan.precision}), {fmt_count(o.plan.total_tokens)} tokens: "
        f"{fmt_duration(o.time.total_s)}, {fmt_usd(o.cost.usd)}, loss {r.optimum_loss.mean:.3f}. frontier: {f.summary()}."
    )
    return "\n".join(textwrap.wrap(_tex(text), 190))


def _tex(text: str) -> str:
    """``text`` with its dollar signs escaped: matplotlib reads a pair of them as mathematics."""
    return text.replace("$", r"\$")


def plot_frontier(r: Any, path: str | Path, plot_range: str = "pins") -> Path:
    """Draw ``r``'s frontier (a SolveResult with one) to ``path``; ``plot_range``: 'pins' or 'full'."""
    _check_plot(r, path, plot_range)
    plt = pyplot(path)
    d = _plot_data(r, plot_range)
    fig, axes = plt.subplots(1, 3, figsize=(19, 5.8))
    for ax, (x, y) in zip(axes, [("time", "cost"), ("time", "loss"), ("cost", "loss")]):
        _draw_points(fig, ax, d, x, y)
        x0, x1, y0, y1 = _draw_pins(ax, d, x, y)
        _format_axes(ax, d, x, y, (x0, x1, y0, y1))
    _finish(fig, axes, r, plot_range)
    return save_figure(fig, path, dpi=110)


def _check_plot(r: Any, path: str | Path, plot_range: str) -> None:
    """InputError for a range, a file type or a solve the plot cannot draw."""
    if plot_range not in PLOT_RANGES:
        raise InputError("plot-range", plot_range, " or ".join(PLOT_RANGES))
    if Path(path).suffix.lower() not in FORMATS:
        raise InputError("plot", str(path), "an image file ending " + ", ".join(FORMATS))
    if r.frontier is None:
        raise InputError("plot", str(path), "a solve with a frontier")
    if r.optimum_loss is None:
        raise InputError(
            "plot",
            str(path),
            "a pre-training solve: a fine-tune has no loss corner to draw "
            "(its plans are in the table and --frontier's CSV)",
        )


def _plot_data(r: Any, plot_range: str) -> dict[str, Any]:
    """What the three panels draw: the frontier's points per corner (``pts``), the optimum, the
    pins, the runners-up, the axis labels and pin texts, the points no filter removed (``kept``)
    and the axis limits of ``plot_range`` 'pins' (``lim``; none for 'full')."""
    f, p, o = r.frontier, r.pins, r.optimum
    pts = {"time": f.time_s, "cost": f.usd, "loss": f.loss}
    opt = {"time": o.time.total_s, "cost": o.cost.usd, "loss": r.optimum_loss.mean}
    pin = {"time": p.deadline_s, "cost": p.budget_usd, "loss": p.target_loss}
    ups = [
        (why, {"time": e.time.total_s, "cost": e.cost.usd, "loss": loss.mean})
        for why, e, loss in r.runners_up
    ]
    label = {
        "time": "time to train",
        "cost": "cost (USD)",
        "loss": "loss (nats/token, the law's data)",
    }
    pin_text = {
        "time": lambda v: f"deadline {fmt_duration(v)}",
        "cost": lambda v: _tex(f"budget {fmt_usd(v)}"),
        "loss": lambda v: f"target loss {v:g}",
    }
    kept = f.removed_by == 0
    lim: dict[str, tuple[float, float]] = {}
    if plot_range == "pins":
        lim["time"] = window([opt["time"], pin["time"]])
        lim["cost"] = window([opt["cost"], pin["cost"]])
        inside = (
            (f.time_s >= lim["time"][0])
            & (f.time_s <= lim["time"][1])
            & (f.usd >= lim["cost"][0])
            & (f.usd <= lim["cost"][1])
        )
        losses = [*f.loss[inside].tolist(), opt["loss"]] + (
            [pin["loss"]] if pin["loss"] is not None else []
        )
        lo, hi = min(losses), max(losses)
        pad = 0.05 * (hi - lo) or 0.05
        lim["loss"] = (lo - pad, hi + pad)

    return dict(
        f=f, pts=pts, opt=opt, pin=pin, ups=ups, label=label, pin_text=pin_text, kept=kept, lim=lim
    )


def _draw_points(fig: Any, ax: Any, d: dict[str, Any], x: str, y: str) -> None:
    """One panel's points: the frontier coloured by the third corner (with its colour bar), the
    points a filter removed, the runners-up and the optimum."""
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.ticker import FuncFormatter, NullFormatter

    f, pts, opt, ups, label, kept, lim = (
        d[k] for k in ("f", "pts", "opt", "ups", "label", "kept", "lim")
    )
    # the third corner as the colour, over the points in view
    z = ({"time", "cost", "loss"} - {x, y}).pop()
    view = np.ones(f.time_s.size, dtype=bool)
    for name in (x, y):
        if name in lim:
            view &= (pts[name] >= lim[name][0]) & (pts[name] <= lim[name][1])
    zs = pts[z][view & kept] if (view & kept).any() else pts[z]
    norm = (Normalize if z == "loss" else LogNorm)(
        vmin=float(zs.min()), vmax=max(float(zs.max()), float(zs.min()) * 1.001)
    )
    outside = kept & ~f.feasible
    ax.scatter(
        pts[x][outside],
        pts[y][outside],
        s=7,
        c=pts[z][outside],
        cmap=CMAP,
        norm=norm,
        alpha=0.3,
        label="frontier, outside the pins (faint)",
    )
    sc = ax.scatter(
        pts[x][kept & f.feasible],
        pts[y][kept & f.feasible],
        s=16,
        c=pts[z][kept & f.feasible],
        cmap=CMAP,
        norm=norm,
        edgecolors="k",
        linewidths=0.3,
        label="frontier, within the pins",
    )
    bar = fig.colorbar(sc, ax=ax, pad=0.01, fraction=0.05)
    bar.set_label(label[z] if z != "loss" else "loss", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    if z != "loss":
        bar.ax.yaxis.set_major_formatter(
            FuncFormatter(
                lambda v, _, z=z: fmt_time_axis(v) if z == "time" else _tex(fmt_usd_axis(v))
            )
        )
        bar.ax.yaxis.set_minor_formatter(NullFormatter())
    if (~kept).any():
        ax.scatter(
            pts[x][~kept],
            pts[y][~kept],
            s=9,
            c="0.8",
            marker="x",
            label="removed by a filter (--frontier-all)",
        )
    _draw_marks(ax, ups, opt, x, y)


def _draw_marks(
    ax: Any, ups: list[tuple[str, dict[str, float]]], opt: dict[str, float], x: str, y: str
) -> None:
    """The runners-up (each labelled with its lever) and the optimum on one panel."""
    for k, (why, u) in enumerate(ups):
        ax.scatter(
            [u[x]],
            [u[y]],
            s=55,
            marker="D",
            c="tab:orange",
            edgecolors="white",
            zorder=6,
            label="runner-up (one lever changed)" if k == 0 else None,
        )
        ax.annotate(
            why,
            (u[x], u[y]),
            xytext=OFFSETS[k % len(OFFSETS)],
            textcoords="offset points",
            fontsize=8,
            color="tab:orange",
            zorder=7,
            annotation_clip=True,
            ha="right" if OFFSETS[k % len(OFFSETS)][0] < 0 else "left",
        )
    ax.scatter(
        [opt[x]],
        [opt[y]],
        s=220,
        marker="*",
        c="tab:red",
        edgecolors="white",
        zorder=8,
        label="optimum",
    )
    ax.annotate(
        "optimum",
        (opt[x], opt[y]),
        xytext=(8, 6),
        textcoords="offset points",
        fontsize=9,
        color="tab:red",
        weight="bold",
        zorder=9,
    )


def _draw_pins(ax: Any, d: dict[str, Any], x: str, y: str) -> tuple[float, float, float, float]:
    """Log scales, the limits in view, and the pins as dashed lines with the region beyond them
    shaded; the panel's limits (x0, x1, y0, y1)."""
    pin, pin_text, lim = d["pin"], d["pin_text"], d["lim"]
    ax.set_xscale("log")
    if y != "loss":
        ax.set_yscale("log")
    if x in lim:
        ax.set_xlim(*lim[x])
    if y in lim:
        ax.set_ylim(*lim[y])
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    # the pins as lines, the region beyond them shaded
    if pin[x] is not None:
        ax.axvline(pin[x], ls="--", c="k", lw=1)
        ax.axvspan(pin[x], max(x1, pin[x]), color="tab:red", alpha=0.07, lw=0)
        ax.text(
            pin[x],
            0.98,
            " " + pin_text[x](pin[x]),
            transform=ax.get_xaxis_transform(),
            fontsize=8,
            va="top",
            ha="left",
        )
    if pin[y] is not None:
        ax.axhline(pin[y], ls="--", c="k", lw=1)
        ax.axhspan(
            pin[y], max(y1, pin[y]), color="tab:red", alpha=0.07, lw=0, label="outside the pins"
        )
        ax.text(
            0.01,
            pin[y],
            pin_text[y](pin[y]),
            transform=ax.get_yaxis_transform(),
            fontsize=8,
            va="bottom",
            ha="left",
        )
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    return x0, x1, y0, y1


def _format_axes(
    ax: Any, d: dict[str, Any], x: str, y: str, limits: tuple[float, float, float, float]
) -> None:
    """Ticks in days and dollars, the axis labels, the title and the grid of one panel."""
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        LogLocator,
        NullFormatter,
        NullLocator,
    )

    x0, x1, y0, y1 = limits
    label = d["label"]
    for axis, name in ((ax.xaxis, x), (ax.yaxis, y)):
        if name == "time":
            lo, hi = (x0, x1) if axis is ax.xaxis else (y0, y1)
            axis.set_major_locator(FixedLocator(time_ticks(lo, hi)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: fmt_time_axis(v)))
            axis.set_minor_locator(NullLocator())
        elif name == "cost":
            lo, hi = (x0, x1) if axis is ax.xaxis else (y0, y1)
            wide = np.log10(hi / lo) > 4  # 1-2-5 steps within a few decades, else whole decades
            axis.set_major_locator(
                LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0), numticks=9)
            )
            axis.set_major_formatter(FuncFormatter(lambda v, _: _tex(fmt_usd_axis(v))))
            axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(label[x])
    ax.set_ylabel(label[y])
    ax.set_title(f"{x} – {y}", fontsize=10)
    ax.grid(True, which="major", lw=0.4, alpha=0.4)


def _finish(fig: Any, axes: Any, r: Any, plot_range: str) -> None:
    """The legend (each label once), the title and the caption; the layout tightened."""
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    fig.legend(
        seen.values(),
        seen.keys(),
        loc="upper left",
        bbox_to_anchor=(0.005, 0.945),
        ncol=len(seen),
        fontsize=8,
        frameon=False,
    )
    where = (
        "around the pins and the optimum (--plot-range full for every point)"
        if plot_range == "pins"
        else "every point"
    )
    fig.suptitle(
        f"trilemma solve: the Pareto frontier over time, cost and loss, {where}",
        x=0.01,
        y=0.99,
        ha="left",
        fontsize=11,
    )
    fig.text(0.01, 0.01, _caption(r), fontsize=8, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.07, 1, 0.9))
