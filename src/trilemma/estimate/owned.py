"""The cost of a plan on owned hardware, beside the rented price: the capital of its GPUs spread over
the years they are written off and the share of those years they are busy, plus the run's energy at
the site's price.

    capital per GPU-hour = capital per GPU / (years × 8,766 h × utilisation)
    owned dollars        = GPU-hours × capital per GPU-hour + energy (kWh) × site $/kWh

A year is 365.25 days (8,766 h: trilemma.units.YEAR). The energy is the estimate's own (devices,
host and network share, PUE: trilemma.estimate.cost), so owning and renting are priced on the same
run. Capital given per system (a node of ``gpus per node`` devices) is divided among its GPUs.
Operations staff, space, networking bought apart from the systems and the cost of capital are not
counted: add them to the capital per GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trilemma.errors import InputError
from trilemma.units import HOUR, YEAR, parse_usd

#: what --own's capital is per, after its "/": a GPU (the default) or a system of gpus-per-node GPUs
BASES = ("gpu", "node", "system")


@dataclass(frozen=True)
class Owning:
    """Owned hardware: capital USD per GPU, years written off, site USD per kWh, utilisation (the
    share of those years the GPUs run jobs, 0-1]."""

    capital_usd_per_gpu: float
    years: float
    usd_per_kwh: float
    utilisation: float

    @property
    def capital_usd_per_gpu_hour(self) -> float:
        return self.capital_usd_per_gpu / (self.years * (YEAR / HOUR) * self.utilisation)


def _positive(field: str, value: Any, allowed: str, most: float = math.inf) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(field, value, allowed) from None
    if isinstance(value, bool) or not (math.isfinite(v) and 0 < v <= most):
        raise InputError(field, value, allowed)
    return v


def capital_per_gpu(text: Any, gpus_per_node: int) -> float:
    """--own's capital as dollars per GPU: ``$30k`` (per GPU), ``$300k/node`` or ``/system`` (per
    system of ``gpus_per_node`` GPUs)."""
    allowed = "dollars per GPU ($30k) or per system ($300k/node)"
    if isinstance(text, bool):
        raise InputError("own", text, allowed)
    amount, _, per = str(text).strip().partition("/")
    per = per.strip().lower() or "gpu"
    if per not in BASES:
        raise InputError("own", text, allowed)
    try:
        usd = parse_usd(amount, "own")
    except InputError:
        raise InputError("own", text, allowed) from None
    usd = _positive("own", usd, allowed)
    return usd if per == "gpu" else usd / gpus_per_node


def make_owning(
    capital: Any, years: Any, usd_per_kwh: Any, utilisation: Any, gpus_per_node: int
) -> Owning:
    """The four inputs checked, each refusal naming its flag; all four are needed."""
    for flag, v, what in (
        ("amortise", years, "the years the hardware is written off over, e.g. 4"),
        ("site-kwh", usd_per_kwh, "the site's dollars per kWh, e.g. 0.08"),
        ("utilisation", utilisation, "the share of those years the GPUs are busy, e.g. 0.7"),
    ):
        if v is None:
            raise InputError(flag, v, f"{what}, with --own")
    return Owning(
        capital_usd_per_gpu=capital_per_gpu(capital, gpus_per_node),
        years=_positive("amortise", years, "years above 0 and at most 30", 30),
        usd_per_kwh=_positive("site-kwh", usd_per_kwh, "dollars per kWh above 0, at most 10", 10),
        utilisation=_positive("utilisation", utilisation, "a share above 0 and at most 1", 1),
    )


def owned_cost(own: Owning, gpu_hours: float, energy_kwh: float) -> dict[str, float]:
    """Owned dollars of a run of ``gpu_hours`` drawing ``energy_kwh``: capital and energy parts."""
    capital = gpu_hours * own.capital_usd_per_gpu_hour
    energy = energy_kwh * own.usd_per_kwh
    return {"usd": capital + energy, "capital_usd": capital, "energy_usd": energy}


def owned_document(own: Owning, est: Any) -> dict[str, Any]:
    """The ``owned`` block of an estimate: the point and band of owned dollars beside the rented
    ones, the parts, and the inputs."""
    t, co = est.time, est.cost
    point = owned_cost(own, t.gpu_hours, co.energy_kwh)
    return {
        **point,
        "usd_low": owned_cost(own, t.gpu_hours_low, co.energy_kwh_low)["usd"],
        "usd_high": owned_cost(own, t.gpu_hours_high, co.energy_kwh_high)["usd"],
        "capital_usd_per_gpu_hour": own.capital_usd_per_gpu_hour,
        "rented_usd": co.usd,
        "inputs": {
            "capital_usd_per_gpu": own.capital_usd_per_gpu,
            "years": own.years,
            "usd_per_kwh": own.usd_per_kwh,
            "utilisation": own.utilisation,
        },
    }


def with_owned(est: Any, own: Any) -> Any:
    """``est`` with its cost on owned hardware (``own``: a dict of capital, years, usd_per_kwh and
    utilisation, each refusal naming its flag), or ``est`` unchanged when ``own`` is None."""
    from dataclasses import replace

    if own is None:
        return est
    keys = {"capital", "years", "usd_per_kwh", "utilisation"}
    if not isinstance(own, dict) or not set(own) <= keys:
        raise InputError("own", own, "a dict of capital, years, usd_per_kwh and utilisation")
    o = make_owning(
        own.get("capital"),
        own.get("years"),
        own.get("usd_per_kwh"),
        own.get("utilisation"),
        est.cluster.node_size,
    )
    return replace(est, owned=owned_document(o, est))


__all__ = [
    "BASES",
    "Owning",
    "capital_per_gpu",
    "make_owning",
    "owned_cost",
    "owned_document",
    "with_owned",
]
