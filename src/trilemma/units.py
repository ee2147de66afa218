"""Quantities at the edges: parsing user input into SI base units, formatting them back.

This is the only module that knows scale factors. Inside trilemma everything is SI:
seconds, bytes, FLOP, FLOP/s, bytes/s, joules, watts, dollars, tokens. Counts are base 1000
(``7B`` = 7e9); bytes follow IEC for binary prefixes (``GiB`` = 2**30) and SI for decimal ones
(``GB`` = 1e9); bits are written with a lowercase ``b`` (``800Gb/s`` = 1e11 bytes/s).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from trilemma.errors import InputError

#: decimal (SI) prefixes for counts, bytes and rates
SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
#: binary (IEC) prefixes for bytes
IEC = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

SECOND = 1.0
MILLISECOND = 1e-3 * SECOND
MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY
YEAR = 365.25 * DAY
KWH = 3.6e6  # joules per kilowatt-hour
GIB = 2.0**30
GB = 1e9
TERA = 1e12
KILO = 1e3  # kWh → MWh, kg → t
MEGA = 1e6  # $ → $M

_NUM = r"((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
#: thousands separators: only whole groups of three ("4,000,000"), so "1,5" is not read as 15
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?![0-9,])")


def _bad(field: str, text: object, allowed: str) -> InputError:
    return InputError(field, text, allowed)


def _ungroup(s: str) -> str | None:
    """Drop thousands separators; None when commas are not whole groups of three digits."""
    if "," not in s:
        return s
    m = _GROUPED.match(s)
    if not m or "," in s[m.end() :]:
        return None
    return s.replace(",", "")


def _iec_or_si(prefix: str) -> float:
    return IEC[prefix[0].upper() + "i"] if prefix.endswith("i") else SI[prefix]


def parse_count(text: str | float | int, field: str = "count") -> float:
    """Parse a count such as ``7B``, ``2T``, ``1.5e12``, ``350M``, ``4,000,000`` → float.

    ``B`` means billion (1e9) here, as in model and token counts. Rejects zero and negatives.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = _ungroup(str(text).strip().replace("_", ""))
        m = s is not None and re.fullmatch(_NUM + r"\s*([kKMGBTPE]?)", s)
        if not m:
            raise _bad(
                field,
                text,
                "a positive number with an optional suffix k, M, B/G, T, P (e.g. 7B, 2T)",
            )
        value = float(m.group(1)) * SI[m.group(2)]
    if not math.isfinite(value) or value <= 0:
        raise _bad(field, text, "a positive, finite number")
    return value


def parse_bytes(text: str | float | int, field: str = "bytes") -> float:
    """Parse a size such as ``80GiB``, ``80GB``, ``1.5e9``, ``512MiB`` → bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = _ungroup(str(text).strip().replace(" ", ""))
        m = s is not None and re.fullmatch(_NUM + r"([kKMGTP]i?)?(B)?", s)
        if not m:
            raise _bad(field, text, "a size such as 80GiB, 80GB or 85899345920")
        value = float(m.group(1)) * _iec_or_si(m.group(2) or "")
    if not math.isfinite(value) or value <= 0:
        raise _bad(field, text, "a positive, finite size")
    return value


def parse_power(text: str | float | int, field: str = "power") -> float:
    """Parse a power such as ``4.6kW``, ``4600W``, ``4600`` (watts) or ``0`` → watts (0 allowed)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = _ungroup(str(text).strip().replace(" ", ""))
        m = s is not None and re.fullmatch(_NUM + r"([kMG])?W?", s)
        if not m:
            raise _bad(field, text, "a power such as 4.6kW, 4600W, 20MW or 0")
        value = float(m.group(1)) * SI[m.group(2) or ""]
    if not math.isfinite(value) or value < 0:
        raise _bad(field, text, "a power of 0 W or more, e.g. 4.6kW")
    return value


#: a bandwidth given as text without a unit below this (bytes/s) is taken for a unit left out
MIN_BANDWIDTH = 1e6


def parse_bandwidth(text: str | float | int, field: str = "bandwidth") -> float:
    """Parse a bandwidth such as ``150GB/s``, ``800Gb/s``, ``400Gbps``, ``2.5e10`` → bytes/s.

    An uppercase ``B`` is bytes, a lowercase ``b`` (or ``bps``) is bits. A bare number is bytes/s.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = _ungroup(str(text).strip().replace(" ", ""))
        m = s is not None and re.fullmatch(
            _NUM + r"(?:([kKMGTP]i?)(B/s|b/s|bps|Bps)|(B/s|b/s|bps|Bps))?", s
        )
        if not m:
            raise _bad(field, text, "a bandwidth such as 150GB/s, 800Gb/s or 1.5e11 (bytes/s)")
        unit = m.group(3) or m.group(4) or "B/s"
        scale = _iec_or_si(m.group(2) or "")
        value = float(m.group(1)) * scale * (0.125 if unit in ("b/s", "bps") else 1.0)
        # text without a unit below any interconnect's speed: the unit was left out (400 → 400 B/s)
        if not (m.group(3) or m.group(4)) and 0 < value < MIN_BANDWIDTH:
            raise _bad(
                field,
                text,
                "a bandwidth with its unit, e.g. 400Gb/s or 50GB/s (a bare number is "
                "bytes/s, at least 1e6)",
            )
    if not math.isfinite(value) or value <= 0:
        raise _bad(field, text, "a positive, finite bandwidth")
    return value


_DURATION = {
    "s": SECOND,
    "sec": SECOND,
    "secs": SECOND,
    "seconds": SECOND,
    "min": MINUTE,
    "mins": MINUTE,
    "minutes": MINUTE,
    "m": MINUTE,
    "h": HOUR,
    "hr": HOUR,
    "hrs": HOUR,
    "hours": HOUR,
    "d": DAY,
    "day": DAY,
    "days": DAY,
    "w": WEEK,
    "wk": WEEK,
    "weeks": WEEK,
    "y": YEAR,
    "yr": YEAR,
    "years": YEAR,
}


def parse_duration(text: str | float | int, field: str = "duration") -> float:
    """Parse a duration such as ``30d``, ``12h``, ``90min``, ``2w`` → seconds (bare number = s)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip().replace(" ", "")
        m = re.fullmatch(_NUM + r"([A-Za-z]*)", s)
        if m and m.group(2) == "M":  # minutes or months? neither guessed
            raise _bad(
                field,
                text,
                "a duration with an unambiguous unit: min for minutes, or days (30d) for a month",
            )
        unit = m.group(2).lower() if m else ""
        if not m or unit not in {"", *_DURATION}:
            raise _bad(field, text, "a duration such as 30d, 12h, 90min or 3600 (seconds)")
        value = float(m.group(1)) * _DURATION.get(unit, SECOND)
    if not math.isfinite(value) or value <= 0:
        raise _bad(field, text, "a positive duration")
    return value


def parse_usd(text: str | float | int, field: str = "usd") -> float:
    """Parse money such as ``$1.5M``, ``2.10``, ``250k`` → dollars."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = _ungroup(str(text).strip().lstrip("$").replace("USD", "").strip())
        m = s is not None and re.fullmatch(_NUM + r"([kKMB]?)", s)
        if not m:
            raise _bad(field, text, "an amount of dollars such as 2.10, $250k or $1.5M")
        value = float(m.group(1)) * SI[m.group(2)]
    if not math.isfinite(value) or value < 0:
        raise _bad(field, text, "a non-negative amount of dollars")
    return value


def parse_budget(text: str | float | int, field: str = "budget") -> tuple[str, float]:
    """A budget in dollars (``$2M``, ``2e6``), GPU-hours (``100k GPUh``, ``50000 GPU-hours``) or
    energy (``500MWh``, ``2GWh``, ``800kWh``) → (unit, value) with unit usd, gpu_hours or kwh."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return "usd", parse_usd(text, field)
    s = str(text).strip().replace(",", "").replace(" ", "")
    m = re.fullmatch(_NUM + r"([kKMGTB]?)(gpu-?h(?:ours?)?|gpuh|[kMG]?wh)", s, flags=re.IGNORECASE)
    if m:
        unit = m.group(3).lower()
        value = float(m.group(1)) * SI[m.group(2).upper() if m.group(2) in "km" else m.group(2)]
        if unit.startswith("gpu"):
            kind = "gpu_hours"
        else:
            kind = "kwh"
            value *= {"kwh": 1.0, "mwh": 1e3, "gwh": 1e6, "wh": 1e-3}[unit]
        if not math.isfinite(value) or value <= 0:
            raise _bad(field, text, "a positive budget")
        return kind, value
    try:
        return "usd", parse_usd(text, field)
    except InputError:
        raise _bad(
            field, text, "dollars ($2M, 250k), GPU-hours (100k GPUh) or energy (500MWh)"
        ) from None


BATCH_ALLOWED = "tokens (4M, 4Mi = 4,194,304, 4194304) or whole sequences (1024seq, 1k seqs)"


@dataclass(frozen=True)
class GlobalBatch:
    """A global batch as written: ``amount`` tokens, or ``amount`` whole sequences (``unit`` seqs).
    ``approximate``: tokens written with a decimal prefix (``4M``), as published batches are printed
    (Llama 2's 4,194,304 as "4M"): a target rounded to whole sequences, not an exact count."""

    amount: float
    unit: str = "tokens"  # tokens | seqs
    approximate: bool = False

    def at(self, seq: int) -> tuple[float, bool, str | None]:
        """(tokens per step, exact, note) at ``seq`` tokens per sequence. Exact: a whole number of
        sequences (a layout must divide it); a decimal-prefixed count that is not one is rounded to
        the nearest whole number of sequences, a target the layout rounds further, with a note."""
        if self.unit == "seqs":
            return self.amount * seq, True, None
        n = self.amount / seq
        if not self.approximate or n == int(n):
            return self.amount, True, None
        whole = max(1, round(n))
        note = (
            f"global batch {fmt_count(self.amount)} = {self.amount:,.0f} tokens is {n:,.1f} "
            f"sequences of {seq:,}: taken as a target of {whole:,} sequences ({whole * seq:,} "
            f"tokens) and rounded to a multiple of dp × micro-batch; write {fmt_count(self.amount)}i "
            "(binary) or a number of sequences (1024seq) for an exact batch"
        )
        return float(whole * seq), False, note


def parse_batch(text: str | float | int | GlobalBatch, field: str = "global-batch") -> GlobalBatch:
    """A global batch: tokens (``4M``, ``4,194,304``, ``4Mi`` = 2^22, ``4M tokens``) or sequences
    (``1024seq``, ``1024 seqs``, ``1k sequences``) → GlobalBatch; a number is tokens."""
    if isinstance(text, GlobalBatch):
        return text
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return GlobalBatch(parse_count(text, field))
    s = _ungroup(str(text).strip().replace("_", "").replace(" ", ""))
    m = s is not None and re.fullmatch(
        _NUM + r"([kKMGBTP]i?)?(tok|tokens?|seqs?|sequences?)?", s, flags=re.IGNORECASE
    )
    if not m or (m.group(2) or "").lower() in ("bi",):
        raise _bad(field, text, BATCH_ALLOWED)
    prefix = m.group(2) or ""
    binary = prefix.lower().endswith("i")
    value = float(m.group(1)) * (IEC[prefix[0].upper() + "i"] if binary else SI[prefix.upper()])
    if not math.isfinite(value) or value <= 0 or value != int(value):
        raise _bad(field, text, "a positive whole number of " + BATCH_ALLOWED)
    if (m.group(3) or "").lower().startswith("s"):
        return GlobalBatch(value, "seqs")
    return GlobalBatch(value, approximate=bool(prefix) and not binary)


# ---------------------------------------------------------------- formatting (human output)


def _scaled(value: float, steps: list[tuple[float, str]], digits: int = 3) -> str:
    for scale, suffix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{suffix}"
    scale, suffix = steps[-1]
    return f"{value / scale:.{digits}g}{suffix}"


def fmt_count(n: float, digits: int = 4) -> str:
    """7.0e9 → '7B' style (base 1000)."""
    return _scaled(
        n, [(1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"), (1.0, "")], digits
    )


def fmt_bytes(b: float) -> str:
    """Bytes in IEC units (GiB), as GPU memory is quoted by allocators and nvidia-smi; whole bytes below a
    KiB (a fitted size of 5e-06 B is 0 B: there is no fraction of a byte to hold)."""
    if abs(b) < 2.0**10:
        return f"{round(b)} B"
    return _scaled(
        b, [(2.0**40, " TiB"), (2.0**30, " GiB"), (2.0**20, " MiB"), (2.0**10, " KiB"), (1.0, " B")]
    )


def fmt_flop(f: float) -> str:
    return _scaled(f, [(1e24, "e24"), (1e21, "e21"), (1e18, "e18"), (1.0, "")]) + " FLOP"


def fmt_flop_rate(f: float) -> str:
    return _scaled(f, [(1e15, " PFLOP/s"), (1e12, " TFLOP/s"), (1e9, " GFLOP/s"), (1.0, " FLOP/s")])


def fmt_power(w: float) -> str:
    """Watts as MW, kW or W, four significant figures (a frontier run in MW, a fine-tune in kW)."""
    return _scaled(w, [(1e6, " MW"), (1e3, " kW"), (1.0, " W")], digits=4)


def fmt_rate(bps: float) -> str:
    return _scaled(bps, [(1e12, " TB/s"), (1e9, " GB/s"), (1e6, " MB/s"), (1.0, " B/s")])


def fmt_duration(s: float) -> str:
    """Seconds as years, days, h, min, s or ms (two of the unit at least; years past 1,000 in powers of 10)."""
    if s >= 1e3 * YEAR:
        return f"{s / YEAR:.3g} years"
    if s >= 2 * YEAR:
        return f"{s / YEAR:.1f} years"
    if s >= 2 * DAY:
        return f"{s / DAY:.1f} days"
    if s >= 2 * HOUR:
        return f"{s / HOUR:.1f} h"
    if s >= 2 * MINUTE:
        return f"{s / MINUTE:.1f} min"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.1f} ms"


def fmt_usd(x: float) -> str:
    """Dollars: $1.50M, $2.34B, $5.00T, and past $1,000T in powers of 10 ($2.79e+17)."""
    if x >= 1e15:
        return f"${x:.3g}"
    if x >= 1e12:
        return f"${x / 1e12:.2f}T"
    if x >= 1e9:
        return f"${x / 1e9:.2f}B"
    if x >= 1e6:
        return f"${x / 1e6:.2f}M"
    if x >= 1e4:
        return f"${x / 1e3:.0f}k"
    return f"${x:,.2f}"


def fmt_gpu_hours(h: float) -> str:
    """GPU-hours: whole hours, or three significant figures below 100 (a LoRA run's 4.63, not 5)."""
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


def fmt_co2_kg(kg: float, scale_kg: float | None = None) -> str:
    """CO2 given in kg: tonnes to one decimal ("90.1 t") from 100 kg up, else kg to three significant figures
    ("0.531 kg"); ``scale_kg`` picks the unit instead (a band's ends in the unit of its point)."""
    return f"{kg / 1e3:,.1f} t" if (kg if scale_kg is None else scale_kg) >= 100 else f"{kg:.3g} kg"


def fmt_energy_kwh(kwh: float) -> str:
    """Energy given in kWh as kWh, MWh, GWh or TWh, four significant figures."""
    return _scaled(kwh, [(1e9, " TWh"), (1e6, " GWh"), (1e3, " MWh"), (1.0, " kWh")], digits=4)


GIGA = 1e9  # SI giga: GFLOP/s in messages
MIB = 2.0**20  # bytes per mebibyte
WH = HOUR  # joules per watt-hour (1 W × 3600 s)
KIB = 2.0**10  # bytes per kibibyte (/proc counts "kB" in KiB)
