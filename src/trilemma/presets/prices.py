"""Prices per GPU-hour by chip, provider and market (presets/prices.toml), each with its date and
where it was read; the spot market's preemption rate; and a chip priced at one provider's offer.

``estimate``/``solve`` with ``--provider NAME|all`` and ``--market on-demand|reserved|spot`` take the
chip's price from the table (``all``: the cheapest offer in that market) instead of the preset's
reference. A spot plan's failure rate is the cluster's plus the published preemption rate (each
reclaim stops the synchronous job as a failure does: trilemma.estimate.goodput). A price older than
``STALE_DAYS`` is flagged."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trilemma.errors import InputError
from trilemma.specs.hardware import HardwareSpec

#: the markets a price can be for, the default first
MARKETS = ("on-demand", "reserved", "spot")
#: the provider that means "the cheapest offer of any provider"
ALL = "all"
#: a price older than this many days is flagged: 6 months (365.25 / 2, rounded up)
STALE_DAYS = 183


@dataclass(frozen=True)
class Offer:
    """One price: USD per GPU-hour of ``gpu`` (a hardware preset) at ``provider`` in ``market``,
    read on ``date`` (YYYY-MM-DD or YYYY-MM) from ``url`` (``via``: where it was transcribed)."""

    gpu: str
    provider: str
    market: str
    usd_per_gpu_hour: float
    date: str
    product: str
    url: str
    via: str

    @property
    def day(self) -> _dt.date:
        """The date read, a month given alone read as its first day (the older reading)."""
        parts = [int(x) for x in self.date.split("-")]
        return _dt.date(parts[0], parts[1], parts[2] if len(parts) > 2 else 1)

    def age_days(self, today: _dt.date | None = None) -> int:
        """Days from the date read to ``today`` (default: the system's date)."""
        return ((today or _dt.date.today()) - self.day).days

    def source(self) -> str:
        """The price's provenance in one line, for HardwareSpec.price_source."""
        where = self.url or self.via
        return f"{self.provider} {self.market}: {self.product} ({where}; via {self.via})"


def _offer(row: dict[str, Any], i: int) -> Offer:
    try:
        o = Offer(**{k: row[k] for k in Offer.__dataclass_fields__})
        o.day  # noqa: B018 — the date parses
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"presets/prices.toml offer {i}: {exc}") from None
    if o.market not in MARKETS or not 0 < float(o.usd_per_gpu_hour) < 1000:
        raise ValueError(f"presets/prices.toml offer {i}: market {o.market}, price {o}")
    return o


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    from trilemma.presets import _read_toml

    return _read_toml("prices.toml")


@lru_cache(maxsize=1)
def offers() -> tuple[Offer, ...]:
    """Every offer of presets/prices.toml, checked (a bad row raises naming it)."""
    return tuple(_offer(r, i) for i, r in enumerate(_table().get("offer", [])))


def providers() -> tuple[str, ...]:
    """The providers with at least one offer, sorted."""
    return tuple(sorted({o.provider for o in offers()}))


def spot_preemptions_per_instance_hour() -> float:
    """Spot reclaims per instance-hour (prices.toml [spot], with its source): an instance is a node,
    reclaimed whole."""
    return float(_table()["spot"]["preemptions_per_instance_hour"])


def check_market(value: Any) -> str:
    """``value`` as one of MARKETS; one-line InputError naming the field and the known markets."""
    v = value.strip().lower() if isinstance(value, str) else value
    if v not in MARKETS:
        raise InputError("market", value, ", ".join(MARKETS))
    return v


def check_provider(value: Any) -> str:
    """``value`` as a known provider or ``all``; one-line InputError listing them."""
    v = value.strip().lower() if isinstance(value, str) else value
    if v != ALL and v not in providers():
        raise InputError("provider", value, f"{ALL} or one of {', '.join(providers())}")
    return v


def offer_for(gpu: str, provider: str, market: str) -> Offer | None:
    """The cheapest offer of ``gpu`` in ``market`` at ``provider`` (``all``: at any), or None."""
    found = [
        o for o in offers() if o.gpu == gpu and o.market == market and provider in (ALL, o.provider)
    ]
    return min(found, key=lambda o: o.usd_per_gpu_hour) if found else None


def priced(hw: HardwareSpec, offer: Offer) -> HardwareSpec:
    """``hw`` at ``offer``'s price, its date and provenance (the preset's reference replaced)."""
    return hw.model_copy(
        update={
            "price_usd_per_hour": float(offer.usd_per_gpu_hour),
            "price_date": offer.date,
            "price_source": offer.source(),
            "price_provider": offer.provider,
            "price_market": offer.market,
        }
    )


def resolve_market(provider: Any, market: Any) -> tuple[str, str] | None:
    """(provider, market) checked, a missing one defaulted (provider ``all``, market on-demand);
    None when neither is given (the preset's reference price stands)."""
    if provider is None and market is None:
        return None
    return (
        ALL if provider is None else check_provider(provider),
        MARKETS[0] if market is None else check_market(market),
    )


def priced_for(hw: HardwareSpec, provider: str, market: str) -> HardwareSpec:
    """``hw`` at its offer; InputError naming the provider field and who prices it otherwise."""
    o = offer_for(hw.name, provider, market)
    if o is None:
        others = sorted({x.provider for x in offers() if x.gpu == hw.name and x.market == market})
        raise InputError(
            "provider",
            provider,
            f"a provider with {'an' if market[0] in 'aeiou' else 'a'} {market} price for {hw.name}: "
            + (", ".join(others) if others else f"none has one ({ALL} included)"),
        )
    return priced(hw, o)


def with_offer_notes(est: Any) -> Any:
    """An estimate priced at an offer with that offer's notes among its warnings (``price_notes``)."""
    from dataclasses import replace

    notes = price_notes(est.cluster.hardware)
    return replace(est, warnings=(*est.warnings, *notes)) if notes else est


def price_notes(hw: HardwareSpec, today: _dt.date | None = None) -> tuple[str, ...]:
    """What an estimate priced at an offer says: the offer, the spot preemption rate, its age."""
    if not hw.price_provider:
        return ()
    notes = [
        f"price ${hw.price_usd_per_hour:.2f}/GPU-hour: {hw.price_source}, read {hw.price_date}"
    ]
    if hw.price_market == "spot":
        notes.append(
            f"spot: {spot_preemptions_per_instance_hour():.3g} preemptions per instance-hour "
            f"({spot_preemptions_per_instance_hour() / max(1, hw.devices_per_node):.3g} per GPU-hour "
            f"on nodes of {hw.devices_per_node}) added to the failure rate (Wu et al. NSDI 2024 "
            "traces, presets/prices.toml [spot])"
        )
    o = Offer(hw.name, hw.price_provider, hw.price_market, 0.0, hw.price_date, "", "", "")
    age = o.age_days(today)
    if age > STALE_DAYS:
        notes.append(
            f"the {hw.price_provider} {hw.price_market} price of {hw.name} was read {hw.price_date}, "
            f"{age / 30.44:.0f} months ago: check the provider's current price (--price to set it)"
        )
    return tuple(notes)


__all__ = [
    "ALL",
    "MARKETS",
    "with_offer_notes",
    "STALE_DAYS",
    "Offer",
    "check_market",
    "check_provider",
    "offer_for",
    "offers",
    "price_notes",
    "priced",
    "priced_for",
    "providers",
    "resolve_market",
    "spot_preemptions_per_instance_hour",
]
