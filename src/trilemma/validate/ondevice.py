"""Published on-device decode and prefill measurements (``data/ondevice.csv``) against
trilemma.estimate.deploy, and the fit of each runtime's physical constants on them.

Each row: a device preset (presets/devices.toml), a model's shape (parameters, the untied input embedding
that is not read, layers, KV width), the weights' format (bits per weight with scales, or the reported file
size), the context, the runtime (presets/runtimes.toml), and the published decode tokens/s at batch 1 — or
"does not fit" (``fits`` = no: the source reports a crash or swapping) — and, where published, the prefill
tokens/s of a prompt of ``prompt_tokens``.

:func:`fit` gives each runtime its bandwidth share and fixed cost per token (decode: time per token =
bytes / (share × bandwidth) + fixed cost, least squared log error) and its prefill share of the prefill
unit's peak (the median over its prefill rows). :func:`summary` predicts every row held out three ways: the
row alone (leave-one-out), its source (rows of one thread share a machine, a build and a measurer), and its
whole runtime (the pooled fit of the other runtimes on the same compute unit: how far an unmeasured runtime
is off). No constant is per row or per device.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from trilemma.estimate.deploy import (
    decode_bytes_per_token,
    kv_cache_bytes,
    prefill_tokens_per_s,
    reached_bandwidth,
    weight_bytes,
)
from trilemma.presets import deploy_efficiency, get_device, get_runtime

DATA = "ondevice.csv"
#: a fixed cost per token is fitted only on rows spanning this range of bytes per token (else it is 0:
#: one size cannot tell a fixed cost from a lower share)
SPAN = 3.0
Row = dict[str, str]
Fit = dict[str, dict[str, float]]


def rows(skipped: bool = False) -> list[Row]:
    """The shipped rows, as read (strings): those without a ``skip_reason`` (``skipped``: every row)."""
    text = resources.files("trilemma").joinpath("data").joinpath(DATA).read_text("utf-8")
    out = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    return out if skipped else [r for r in out if not r["skip_reason"]]


def _bits(r: Row) -> float:
    if r["bits_per_weight"]:
        return float(r["bits_per_weight"])
    return float(r["weights_bytes_reported"]) * 8 / float(r["params_total"])


def _read(r: Row) -> float:
    return float(r["params_total"]) - float(r["params_unread"])


def seconds_at_full_bandwidth(r: Row) -> float:
    """Bytes per decoded token / peak bandwidth, s: the decode time at a share of 1 and no fixed cost."""
    p = float(r["params_total"])
    wb = float(r["weights_bytes_reported"]) if r["weights_bytes_reported"] else None
    b = decode_bytes_per_token(
        _read(r), _bits(r), int(r["n_layers"]), int(r["kv_dim"]), float(r["context"]), wb, p
    )
    return b / get_device(r["device"]).bandwidth_bytes_per_s


def ideal_tokens_per_s(r: Row) -> float:
    """Bandwidth / bytes per token for one row (trilemma.estimate.deploy.decode_bytes_per_token)."""
    return 1.0 / seconds_at_full_bandwidth(r)


def total_bytes(r: Row) -> float:
    """Weights and the KV cache at the row's context, bytes."""
    p = float(r["params_total"])
    w = (
        float(r["weights_bytes_reported"])
        if r["weights_bytes_reported"]
        else weight_bytes(p, _bits(r))
    )
    return w + kv_cache_bytes(int(r["n_layers"]), int(r["kv_dim"]), float(r["context"]))


def _decode_fit(data: list[Row]) -> dict[str, float]:
    """Share and fixed cost per token with the least squared log error over ``data``'s decode rows."""
    x = np.array([seconds_at_full_bandwidth(r) for r in data])
    y = 1.0 / np.array([float(r["decode_tokens_per_s"]) for r in data])

    def err(t0: float) -> tuple[float, float]:
        room = y - t0
        if (room <= 0).any():
            return math.inf, 1.0
        share = float(np.exp(np.mean(np.log(x / room))))  # the log-LS share at this fixed cost
        share = min(share, 1.0)
        return float(np.sum(np.log((x / share + t0) / y) ** 2)), share

    if len(data) >= 3 and x.max() / x.min() >= SPAN:
        res = minimize_scalar(lambda t: err(t)[0], bounds=(0.0, float(y.min())), method="bounded")
        t0 = float(res.x) if err(float(res.x))[0] < err(0.0)[0] else 0.0
    else:
        t0 = 0.0
    return {"bandwidth_share": err(t0)[1], "per_token_s": t0}


def _ceiling_fit(data: list[Row]) -> dict[str, float]:
    """A ceiling-bound runtime's ceiling: the geometric mean of the bandwidth its rows reached, bytes/s."""
    reached = [
        float(r["decode_tokens_per_s"])
        * seconds_at_full_bandwidth(r)
        * get_device(r["device"]).bandwidth_bytes_per_s
        for r in data
    ]
    ceiling = float(np.exp(np.mean(np.log(reached))))
    return {"bandwidth_share": 1.0, "per_token_s": 0.0, "bandwidth_ceiling_bytes_per_s": ceiling}


def _bound(r: Row) -> bool:
    return get_runtime(r["runtime"]).ceiling_bound


def prefill_ratio(r: Row, ceiling: float | None = None) -> float:
    """Measured prefill tokens/s × 2 FLOP per weight / the prefill unit's peak: the share it reached. A
    ceiling-bound runtime's unit first streams the weights at its ``ceiling`` (bytes/s; prefill_tokens_per_s
    with ``serial``): that time is taken off the prompt's before the share is read."""
    dev = get_device(r["device"])
    peak = dev.unit_peak_flop_per_s(get_runtime(r["runtime"]).prefill_unit)
    rate, n = float(r["prefill_tokens_per_s"]), float(r["prompt_tokens"] or 0)
    if ceiling is None or not n:
        return rate * 2.0 * _read(r) / peak
    bw = reached_bandwidth(dev.bandwidth_bytes_per_s, 1.0, ceiling)
    compute_s = n / rate - weight_bytes(_read(r), _bits(r)) / bw
    return 1.0 if compute_s <= 0 else 2.0 * _read(r) * n / (peak * compute_s)


def _has_prefill(r: Row) -> bool:
    if not r.get("prefill_tokens_per_s"):
        return False
    unit = get_runtime(r["runtime"]).prefill_unit
    return get_device(r["device"]).unit_peak_flop_per_s(unit) > 0


def fit(data: list[Row] | None = None) -> Fit:
    """Per runtime (canonical name): bandwidth_share, per_token_s, prefill_share (where it has prefill
    rows) and rows (its decode rows)."""
    data = rows() if data is None else data
    out: Fit = {}
    by: dict[str, list[Row]] = {}
    for r in data:
        by.setdefault(get_runtime(r["runtime"]).name, []).append(r)
    for name, rs in sorted(by.items()):
        dec = [r for r in rs if r["decode_tokens_per_s"]]
        dfit = _ceiling_fit if get_runtime(name).ceiling_bound else _decode_fit
        out[name] = {**(dfit(dec) if dec else {}), "rows": float(len(dec))}
        ceiling = out[name].get("bandwidth_ceiling_bytes_per_s")
        pre = [prefill_ratio(r, ceiling) for r in rs if _has_prefill(r)]
        if pre:
            out[name]["prefill_share"] = min(float(np.median(pre)), 1.0)
    return out


def pooled(data: list[Row]) -> dict[str, dict[str, float]]:
    """One fit per compute unit over every row of the runtimes on it (decode unit for the decode
    constants, prefill unit for the prefill share): what a runtime without rows takes. Ceiling-bound
    runtimes' rows pool apart: their ceiling, and their prefill share under ``UNIT_ceiling``."""
    out: dict[str, dict[str, float]] = {}
    for unit in ("cpu", "gpu", "npu"):
        dec = [
            r
            for r in data
            if r["decode_tokens_per_s"]
            and get_runtime(r["runtime"]).decode_unit == unit
            and not _bound(r)
        ]
        bound = [
            r
            for r in data
            if r["decode_tokens_per_s"]
            and get_runtime(r["runtime"]).decode_unit == unit
            and _bound(r)
        ]
        if bound:
            out.setdefault("ceiling", {})[unit] = _ceiling_fit(bound)[
                "bandwidth_ceiling_bytes_per_s"
            ]
        out[unit] = _decode_fit(dec) if dec else {}
        ceiling = out.get("ceiling", {}).get(unit)
        for key, bound_rows in ((unit, False), (f"{unit}_ceiling", True)):
            pre = [
                prefill_ratio(r, ceiling if bound_rows else None)
                for r in data
                if _has_prefill(r)
                and get_runtime(r["runtime"]).prefill_unit == unit
                and _bound(r) == bound_rows
            ]
            if pre:
                out.setdefault(key, {})["prefill_share"] = min(float(np.median(pre)), 1.0)
    return out


def _constants(name: str, fitted: Fit, pool: dict[str, dict[str, float]]) -> dict[str, float]:
    """A runtime's constants from ``fitted``, each missing one from the pool of its unit."""
    rt = get_runtime(name)
    own = fitted.get(name, {})
    dec = own if "bandwidth_share" in own else pool.get(rt.decode_unit, {})
    if "bandwidth_share" not in dec:  # no row on that unit at all: every row's fit
        dec = pool["all"]
    pre = own.get("prefill_share", pool.get(rt.prefill_pool, {}).get("prefill_share"))
    ceiling = own.get("bandwidth_ceiling_bytes_per_s")
    if rt.ceiling_bound and ceiling is None:
        ceiling = pool.get("ceiling", {}).get(rt.decode_unit)
    share = 1.0 if rt.ceiling_bound and ceiling else dec["bandwidth_share"]
    return {
        "bandwidth_share": share,
        "per_token_s": 0.0 if rt.ceiling_bound and ceiling else dec["per_token_s"],
        "prefill_share": pre or 0.0,
        "ceiling": ceiling if rt.ceiling_bound else None,
    }


def predict_row(r: Row, c: dict[str, float]) -> tuple[float | None, float | None]:
    """(decode, prefill) tokens/s of one row with constants ``c`` (prefill None without a unit peak)."""
    rt, dev = get_runtime(r["runtime"]), get_device(r["device"])
    bw = reached_bandwidth(dev.bandwidth_bytes_per_s, c["bandwidth_share"], c.get("ceiling"))
    dec = 1.0 / (seconds_at_full_bandwidth(r) * dev.bandwidth_bytes_per_s / bw + c["per_token_s"])
    peak = dev.unit_peak_flop_per_s(rt.prefill_unit)
    if not peak or not c["prefill_share"] or not r.get("prompt_tokens"):
        return dec, None
    once = weight_bytes(_read(r), _bits(r)) / bw
    return dec, prefill_tokens_per_s(
        peak, c["prefill_share"], _read(r), float(r["prompt_tokens"]), once, rt.ceiling_bound
    )


def source_of(r: Row) -> str:
    """A row's source: the thread or page its ``source`` names first (its URL)."""
    return r["source"].split(" ")[0]


def held_out(
    data: list[Row], keep: Callable[[Row, Row], bool]
) -> list[tuple[Row, float | None, float | None]]:
    """Each row predicted with the constants fitted on the rows ``keep(row, other)`` lets in."""
    out = []
    cache: dict[tuple[int, ...], tuple[Fit, dict[str, dict[str, float]]]] = {}
    for r in data:
        rest = [x for x in data if keep(r, x)]
        key = tuple(i for i, x in enumerate(data) if keep(r, x))
        if key not in cache:
            p = pooled(rest)
            p["all"] = _decode_fit([x for x in rest if x["decode_tokens_per_s"] and not _bound(x)])
            cache[key] = (fit(rest), p)
        fitted, pool = cache[key]
        out.append((r, *predict_row(r, _constants(get_runtime(r["runtime"]).name, fitted, pool))))
    return out


HOLDOUTS: dict[str, Callable[[Row, Row], bool]] = {
    "in_sample": lambda r, x: True,
    "leave_one_out": lambda r, x: x is not r,
    "leave_one_source_out": lambda r, x: source_of(x) != source_of(r),
    "leave_one_runtime_out": lambda r, x: (
        get_runtime(x["runtime"]).name != get_runtime(r["runtime"]).name
    ),
}


def _errors(preds: list[tuple[Row, float | None, float | None]], col: str, i: int) -> np.ndarray:
    """log(predicted / reported) over the rows with a reported ``col`` and a prediction."""
    return np.array(
        [math.log(p[i] / float(p[0][col])) for p in preds if p[0].get(col) and p[i] is not None]
    )


def _stats(logr: np.ndarray) -> dict[str, Any]:
    if not len(logr):
        return {"rows": 0}
    return {
        "rows": len(logr),
        "median_abs_error": float(np.median(np.abs(np.exp(logr) - 1))),
        "within_25pct": int(np.sum(np.abs(np.exp(logr) - 1) <= 0.25)),
        "band": [
            math.exp(-float(np.quantile(logr, 0.9))),
            math.exp(-float(np.quantile(logr, 0.1))),
        ],
    }


def summary() -> dict[str, Any]:
    """Decode and prefill errors held out each way (median |predicted / reported − 1|, the 80% band of
    the log residuals), the runtimes and sources, and the memory verdict's hits."""
    data, every = rows(), rows(skipped=True)
    eff = deploy_efficiency()
    out: dict[str, Any] = {
        "skipped_rows": len(every) - len(data),
        "rows": len(data),
        "measured_rows": sum(1 for r in data if r["decode_tokens_per_s"]),
        "prefill_rows": sum(1 for r in data if _has_prefill(r) and r.get("prompt_tokens")),
        "runtimes": sorted(
            {get_runtime(r["runtime"]).name for r in data if r["decode_tokens_per_s"]}
        ),
        "sources": len({source_of(r) for r in data}),
    }
    for name, keep in HOLDOUTS.items():
        preds = held_out(data, keep)
        out[name] = {
            "decode": _stats(_errors(preds, "decode_tokens_per_s", 1)),
            "prefill": _stats(_errors(preds, "prefill_tokens_per_s", 2)),
        }
    # the skipped rows too, each held out with the rest (the figure without the judgement of skipping)
    out["leave_one_out_with_skipped"] = _stats(
        _errors(held_out(every, HOLDOUTS["leave_one_out"]), "decode_tokens_per_s", 1)
    )
    fits = 0
    for r in data:
        budget = get_device(r["device"]).usable_bytes * (1 - float(eff["runtime_share"]))
        fits += (total_bytes(r) <= budget) == (r["fits"] == "yes")
    out["fits_right"] = fits
    return out


def validate_doc() -> dict[str, Any]:
    """`trilemma validate --kind ondevice`: the published on-device rows alone, in validate's schema."""
    return {
        "schema": "trilemma.validate/1",
        "data": None,
        "summary": {},
        "rows": [],
        "ondevice": summary(),
        "finetune_memory": None,
        "fitted_at_bounds": [],
        "skipped": [],
        "calibration": {},
        "warnings": [],
    }
