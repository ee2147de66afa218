"""Published on-device decode measurements (``data/ondevice.csv``) against trilemma.estimate.deploy.

Each row: a device preset (presets/devices.toml), a model's shape (parameters, the untied input embedding
that is not read, layers, KV width), the weights' format (bits per weight with scales, or the reported file
size), the context, the runtime class, and the published decode tokens/s at batch 1 — or "does not fit"
(``fits`` = no: the source reports a crash or swapping). :func:`fit` sets each runtime class's bandwidth
efficiency η to the median of measured / (bandwidth / bytes per token) over its rows; :func:`summary`
reports the leave-one-source-out error (each row predicted with η fitted without every row of its source,
:func:`source_of`, as rows of one thread share a machine, a build and a measurer; a class left with no
row uses the median over all others) and whether the memory verdict is right on every row.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from trilemma.estimate.deploy import decode_bytes_per_token, kv_cache_bytes, weight_bytes
from trilemma.presets import deploy_efficiency, get_device

DATA = "ondevice.csv"


@dataclass(frozen=True)
class OnDeviceCase:
    device: str
    model: str
    quant: str
    runtime: str
    context: int
    ideal_tokens_per_s: float  # bandwidth / bytes per token (η = 1)
    reported_tokens_per_s: float | None  # None: the source reports it does not fit
    predicted_tokens_per_s: float
    loso_tokens_per_s: float  # predicted with η fitted without the row's source
    reported_fits: bool
    predicted_fits: bool
    total_bytes: float
    budget_bytes: float  # usable × (1 − runtime share)
    source: str


def rows() -> list[dict[str, str]]:
    """The shipped rows, as read (strings)."""
    text = resources.files("trilemma").joinpath("data").joinpath(DATA).read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


def _bits(r: dict[str, str]) -> float:
    if r["bits_per_weight"]:
        return float(r["bits_per_weight"])
    return float(r["weights_bytes_reported"]) * 8 / float(r["params_total"])


def ideal_tokens_per_s(r: dict[str, str]) -> float:
    """Bandwidth / bytes per token for one row (trilemma.estimate.deploy.decode_bytes_per_token)."""
    p, unread = float(r["params_total"]), float(r["params_unread"])
    wb = float(r["weights_bytes_reported"]) if r["weights_bytes_reported"] else None
    b = decode_bytes_per_token(
        p - unread, _bits(r), int(r["n_layers"]), int(r["kv_dim"]), float(r["context"]), wb, p
    )
    return get_device(r["device"]).bandwidth_bytes_per_s / b


def total_bytes(r: dict[str, str]) -> float:
    """Weights and the KV cache at the row's context, bytes."""
    p = float(r["params_total"])
    w = (
        float(r["weights_bytes_reported"])
        if r["weights_bytes_reported"]
        else weight_bytes(p, _bits(r))
    )
    return w + kv_cache_bytes(int(r["n_layers"]), int(r["kv_dim"]), float(r["context"]))


def fit(data: list[dict[str, str]] | None = None) -> dict[str, float]:
    """η per runtime class: the median of reported / ideal tokens/s over the class's measured rows."""
    data = rows() if data is None else data
    ratios: dict[str, list[float]] = {}
    for r in data:
        if r["decode_tokens_per_s"]:
            ratios.setdefault(r["runtime"], []).append(
                float(r["decode_tokens_per_s"]) / ideal_tokens_per_s(r)
            )
    return {k: float(statistics.median(v)) for k, v in sorted(ratios.items())}


def source_of(r: dict[str, str]) -> str:
    """A row's source: the thread or page its ``source`` names first (its URL)."""
    return r["source"].split(" ")[0]


def cases(eff: dict[str, Any] | None = None) -> list[OnDeviceCase]:
    """Every row predicted with the shipped η (devices.toml [efficiency]) and leave-one-source-out."""
    eff = deploy_efficiency() if eff is None else eff
    data = rows()
    out = []
    for r in data:
        ideal = ideal_tokens_per_s(r)
        rest = [x for x in data if source_of(x) != source_of(r)]
        held = fit(rest)
        pooled = statistics.median(
            [
                float(x["decode_tokens_per_s"]) / ideal_tokens_per_s(x)
                for x in rest
                if x["decode_tokens_per_s"]
            ]
        )
        d = get_device(r["device"])
        budget = d.usable_bytes * (1 - float(eff["runtime_share"]))
        tot = total_bytes(r)
        out.append(
            OnDeviceCase(
                device=r["device"],
                model=r["model"],
                quant=r["quant"],
                runtime=r["runtime"],
                context=int(r["context"]),
                ideal_tokens_per_s=ideal,
                reported_tokens_per_s=float(r["decode_tokens_per_s"])
                if r["decode_tokens_per_s"]
                else None,
                predicted_tokens_per_s=float(eff[r["runtime"]]) * ideal,
                loso_tokens_per_s=held.get(r["runtime"], pooled) * ideal,
                reported_fits=r["fits"] == "yes",
                predicted_fits=tot <= budget,
                total_bytes=tot,
                budget_bytes=budget,
                source=r["source"],
            )
        )
    return out


def summary(eff: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error figure: median |predicted / reported − 1| (shipped η and leave-one-source-out), the 80%
    band of the leave-one-source-out log residuals, and the memory verdict's hits."""
    cs = cases(eff)
    measured = [c for c in cs if c.reported_tokens_per_s]
    err = [abs(c.predicted_tokens_per_s / c.reported_tokens_per_s - 1) for c in measured]
    loso = [c.loso_tokens_per_s / c.reported_tokens_per_s for c in measured]
    logr = np.log(loso)
    return {
        "rows": len(cs),
        "measured_rows": len(measured),
        "median_abs_error": float(np.median(err)),
        "sources": len({source_of(r) for r in rows()}),
        "median_abs_error_loso": float(np.median(np.abs(np.array(loso) - 1))),
        "within_25pct_loso": int(sum(abs(x - 1) <= 0.25 for x in loso)),
        "log_q10_loso": float(np.quantile(logr, 0.1)),
        "log_q90_loso": float(np.quantile(logr, 0.9)),
        "fits_right": int(sum(c.predicted_fits == c.reported_fits for c in cs)),
        "band": [
            math.exp(-float(np.quantile(logr, 0.9))),
            math.exp(-float(np.quantile(logr, 0.1))),
        ],
    }
