"""The matcher: filter offers by a Compute, rank them, and explain what was rejected and why.

Plain loops over a list — the reference implementation, used directly for small sets (a few
thousand catalogue rows, the live nodes of an exchange) and as the oracle for the vectorised
index in ``market.index``. Ranking: the price this job would pay (the spot price when spot is
allowed and offered), complete prices before lower bounds, then more availability, better
measured SLA, and the offer id, so the order is total and deterministic.

Region awareness: given the region of a job's data, an offer in another region ranks behind
same-region offers of equal price (never ahead of a cheaper one: the price decides first), and
``explain`` says how many matches are cross-region.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bourse.core.compute import Compute
from bourse.core.constraints import CONSTRAINTS, first_lack, lacks, offer_price
from bourse.core.offer import Offer


@dataclass(frozen=True, slots=True)
class Match:
    offer: Offer
    price: float  # what this job pays per hour on this offer
    spot: bool

    def rank_key(self) -> tuple[bool, float, int, float, str]:
        return rank_key(self.offer, self.price)


def rank_key(offer: Offer, price: float) -> tuple[bool, float, int, float, str]:
    return (offer.price_is_floor, price, -(offer.available or 0), -(offer.sla or 0.0), offer.id)


def cross_region(offer: Offer, data_region: str | None) -> bool:
    """Whether the offer sits outside the region (or zone) of the job's data (never, when
    the data's region is unknown)."""
    if data_region is None:
        return False
    return data_region.lower() not in (offer.region.lower(), (offer.zone or "").lower())


def region_rank_key(match: Match, data_region: str | None) -> tuple[object, ...]:
    """The rank key with same-region offers ahead of cross-region ones of equal price."""
    floor, price, *rest = match.rank_key()
    return (floor, price, cross_region(match.offer, data_region), *rest)


def match(compute: Compute, offers: Iterable[Offer], limit: int | None = None,
          data_region: str | None = None) -> list[Match]:
    """Offers that satisfy ``compute``, best first (all of them unless ``limit``)."""
    found = []
    for offer in offers:
        if first_lack(compute, offer) is None:
            priced = offer_price(compute, offer)
            assert priced is not None  # the spot constraint guarantees a price
            found.append(Match(offer, priced[0], priced[1]))
    found.sort(key=lambda m: region_rank_key(m, data_region))
    return found if limit is None else found[:limit]


@dataclass(frozen=True, slots=True)
class Rejection:
    offer: Offer
    lacks: tuple[tuple[str, str], ...]
    similar: int = 0  # other offers of the same instance type rejected for the same reasons


@dataclass(frozen=True, slots=True)
class Explanation:
    """How each constraint narrowed the offers, and the nearest offers that were rejected."""

    compute: Compute
    total: int
    matched: int
    removed: tuple[tuple[str, int], ...]  # (constraint, offers it removed), in order
    nearest: tuple[Rejection, ...]
    data_region: str | None = None
    cross_region: int = 0  # matches outside the data's region

    def lines(self) -> list[str]:
        out = [f"{self.total} offers considered for {self.compute.describe()}"]
        if self.compute.gpu:
            out += [f"note: {n}" for n in self.compute.gpu.notes]
        left = self.total
        for name, count in self.removed:
            left -= count
            out.append(f"  {name:<12} removed {count:>7,}  ({left:,} left)")
        out.append(f"{self.matched} matched")
        if self.data_region is not None and self.cross_region:
            out.append(f"cross-region: the data is in {self.data_region}; {self.cross_region} "
                       f"of the {self.matched} matches are elsewhere and rank behind "
                       "same-region offers of equal price (egress charges, slower reads)")
        if self.nearest:
            out.append("nearest rejected offers:")
            for rejection in self.nearest:
                reasons = "; ".join(reason for _, reason in rejection.lacks)
                more = f" (+{rejection.similar} like it)" if rejection.similar else ""
                out.append(f"  {rejection.offer.id}{more}: {reasons}")
        return out


def explain(compute: Compute, offers: Sequence[Offer], nearest: int = 5,
            data_region: str | None = None) -> Explanation:
    """For each constraint, how many offers it removed; and the closest misses."""
    removed: Counter[str] = Counter()
    misses: list[tuple[tuple[int, int], float, str, Rejection]] = []
    far = 0
    for offer in offers:
        first = first_lack(compute, offer)
        if first is None:
            far += cross_region(offer, data_region)
            continue
        removed[first[0]] += 1
        if nearest:
            all_lacks = tuple(lacks(compute, offer))
            misses.append((_distance(all_lacks), _sort_price(compute, offer), offer.id,
                           Rejection(offer, all_lacks)))
    misses.sort(key=lambda m: m[:3])
    counts = tuple((c.name, removed[c.name]) for c in CONSTRAINTS if removed[c.name])
    return Explanation(compute, len(offers), len(offers) - sum(removed.values()), counts,
                       _distinct([m[3] for m in misses], nearest), data_region, far)


def _distinct(rejections: list[Rejection], limit: int) -> tuple[Rejection, ...]:
    """The first rejection of each instance type, with how many alike it stands for."""
    firsts: dict[tuple[str, str, tuple[str, ...]], Rejection] = {}
    similar: Counter[tuple[str, str, tuple[str, ...]]] = Counter()
    for rejection in rejections:
        key = (rejection.offer.provider, rejection.offer.instance_type,
               tuple(name for name, _ in rejection.lacks))
        if key in firsts:
            similar[key] += 1
        elif len(firsts) < limit:
            firsts[key] = rejection
    return tuple(Rejection(r.offer, r.lacks, similar[k]) for k, r in firsts.items())


_IDENTITY = ("gpu", "gpu_count", "gpu_memory")


def _distance(found: tuple[tuple[str, str], ...]) -> tuple[int, int]:
    """How far a rejected offer is from the request: the wrong GPU is further than any price."""
    names = {name for name, _ in found}
    return sum(name in names for name in _IDENTITY), len(found)


def _sort_price(compute: Compute, offer: Offer) -> float:
    priced = offer_price(compute, offer)
    if priced is not None:
        return priced[0]
    return offer.price or offer.spot_price or float("inf")
