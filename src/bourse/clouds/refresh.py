"""Catalogue offers refreshed from a cloud's own price and availability API.

The shipped catalogue says what a cloud sold when it was copied; a cloud with an API for it
says what it sells now: spot prices per (instance type, zone) and which types each zone
offers. :func:`apply` is the pure part (catalogue offers + the API's answers -> offers with
today's spot prices, without the ones a zone no longer offers); :func:`refresh` asks a
:class:`PriceSource` region by region and keeps the catalogue's offers of any region whose
calls failed, saying why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, runtime_checkable

from bourse.clouds.base import CloudError
from bourse.core.offer import Offer


@dataclass(frozen=True)
class SpotPrice:
    """The spot price of ``instance_type`` in the zone ``zone`` (a zone id), $/h, in force
    since ``at``."""

    instance_type: str
    zone: str
    price: float
    at: datetime


@runtime_checkable
class PriceSource(Protocol):
    name: str

    def spot_prices(self, region: str, instance_types: Sequence[str]) -> list[SpotPrice]: ...

    def offerings(self, region: str, instance_types: Sequence[str]) -> set[tuple[str, str]]: ...


@dataclass(frozen=True)
class Refreshed:
    """Offers after a refresh. ``fetched_at``: when the API answered (None: every region fell
    back to the catalogue); ``stale``: region -> why its offers are the catalogue's."""

    offers: tuple[Offer, ...]
    fetched_at: datetime | None
    stale: Mapping[str, str]

    def age_s(self, now: datetime) -> float | None:
        """How old the refreshed data is, in seconds (None: it is the catalogue's)."""
        return None if self.fetched_at is None else (now - self.fetched_at).total_seconds()


def latest(prices: Iterable[SpotPrice]) -> dict[tuple[str, str], SpotPrice]:
    """The newest price of each (instance type, zone)."""
    out: dict[tuple[str, str], SpotPrice] = {}
    for price in prices:
        key = (price.instance_type, price.zone)
        if key not in out or price.at > out[key].at:
            out[key] = price
    return out


def _region_price(offer: Offer, prices: Mapping[tuple[str, str], SpotPrice]) -> float | None:
    """A zone-less offer's spot price: the cheapest of its type's zones."""
    found = [p.price for (kind, _), p in prices.items() if kind == offer.instance_type]
    return min(found) if found else offer.spot_price


def apply(offers: Iterable[Offer], prices: Iterable[SpotPrice],
          offered: set[tuple[str, str]]) -> list[Offer]:
    """One region's offers with the API's answers: a zone's offer the zone no longer offers
    is dropped (a zone-less one when no zone offers it), the others get the newest spot
    price when the API has one."""
    newest = latest(prices)
    types = {kind for kind, _ in offered}
    out = []
    for offer in offers:
        if offer.zone is None:
            if offer.instance_type in types:
                out.append(replace(offer, spot_price=_region_price(offer, newest)))
        elif (offer.instance_type, offer.zone) in offered:
            price = newest.get((offer.instance_type, offer.zone))
            out.append(replace(offer, spot_price=price.price) if price else offer)
    return out


def _by_region(offers: Iterable[Offer]) -> dict[str, list[Offer]]:
    regions: dict[str, list[Offer]] = defaultdict(list)
    for offer in offers:
        regions[offer.region].append(offer)
    return regions


def refresh(source: PriceSource, offers: Iterable[Offer], now: datetime) -> Refreshed:
    """``offers`` (the catalogue's, any provider) with ``source``'s offers refreshed from its
    API, region by region; a region whose calls fail keeps the catalogue's offers."""
    offers = list(offers)
    mine = [o for o in offers if o.provider == source.name]
    out = [o for o in offers if o.provider != source.name]
    stale: dict[str, str] = {}
    for region, group in sorted(_by_region(mine).items()):
        types = sorted({o.instance_type for o in group})
        try:
            answers = source.spot_prices(region, types), source.offerings(region, types)
        except CloudError as exc:
            stale[region] = f"{exc.code}: {exc.message}"
            out.extend(group)
            continue
        out.extend(apply(group, *answers))
    fetched = now if len(stale) < len(_by_region(mine)) else None
    return Refreshed(tuple(out), fetched, stale)
