"""Axis labels a person reads: time in seconds, minutes, hours, days or years, dollars with k/M/B
suffixes, and log-axis windows around a few anchors."""

from __future__ import annotations

import numpy as np

from trilemma.units import DAY, HOUR, MINUTE, SI, WEEK, YEAR

__all__ = ["DECADES", "TIME_TICKS", "fmt_time_axis", "fmt_usd_axis", "time_ticks", "window"]

DECADES = (
    1.0  # the window reaches this many factors of ten beyond the pins and the optimum, each side
)

#: tick marks a person reads on a time axis, seconds
TIME_TICKS = (
    1.0,
    10.0,
    MINUTE,
    10 * MINUTE,
    HOUR,
    6 * HOUR,
    DAY,
    3 * DAY,
    WEEK,
    30 * DAY,
    90 * DAY,
    YEAR,
    *(YEAR * 10**k for k in range(1, 5)),
)


def _sig(v: float) -> str:
    """Two significant figures, no exponent, no trailing zeros: 3.2, 30, 365."""
    return f"{v:,.0f}" if v >= 100 else f"{float(f'{v:.2g}'):g}"


def fmt_time_axis(s: float) -> str:
    """Seconds as a tick label: '45 s', '10 min', '6 h', '3.2 days', '1 day', '10 years'."""
    if s < MINUTE:
        return f"{_sig(s)} s"
    if s < HOUR:
        return f"{_sig(s / MINUTE)} min"
    if s < DAY:
        return f"{_sig(s / HOUR)} h"
    if s < YEAR:
        v = _sig(s / DAY)
        return f"{v} day" if v == "1" else f"{v} days"
    v = _sig(s / YEAR)
    return f"{v} year" if v == "1" else f"{v} years"


def fmt_usd_axis(x: float) -> str:
    """Dollars as a tick label: '$1.5M', '$100k', '$2B', '$50', '$0.02'."""
    for scale, suffix in ((SI["G"], "B"), (SI["M"], "M"), (SI["k"], "k")):
        if x >= scale:
            return f"${_sig(x / scale)}{suffix}"
    return f"${_sig(x)}" if x >= 1 else f"${x:.2g}"


def window(anchors: list[float], decades: float = DECADES) -> tuple[float, float]:
    """A log-axis range ``decades`` factors of ten beyond the smallest and the largest anchor."""
    a = [v for v in anchors if v is not None and np.isfinite(v) and v > 0]
    return min(a) / 10**decades, max(a) * 10**decades


def time_ticks(lo: float, hi: float) -> list[float]:
    """The TIME_TICKS in [lo, hi], thinned so that neighbours stand a ninth of the axis (in log) apart."""
    gap = max(0.3, np.log10(hi / lo) / 9)
    ticks: list[float] = []
    for t in TIME_TICKS:
        if lo <= t <= hi and (not ticks or np.log10(t / ticks[-1]) >= gap):
            ticks.append(t)
    return ticks
