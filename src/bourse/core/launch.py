"""Launching offers, the pure part: what a failed launch means, what it blocks, for how long,
and the table a job shows of where it tried.

A cloud's error is classified (by its provider) as a :class:`Failure`; the class decides the
next step: capacity blocks the (zone, instance type, spot) tried and the next zone / region /
offer is tried; quota blocks the (region, instance family) and names the quota; an
unsupported type blocks the zone for it; a configuration error fails the job with the cloud's
message (another zone would fail alike); an auth error disables the cloud; throttling backs
off and retries the same place. Blocks expire: a shortage now may be gone in an hour.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from bourse.core.offer import Offer


class Failure(StrEnum):
    CAPACITY = "capacity"
    QUOTA = "quota"
    UNSUPPORTED = "unsupported"
    CONFIG = "config"
    AUTH = "auth"
    THROTTLE = "throttle"
    UNKNOWN = "unknown"

    @property
    def fails_over(self) -> bool:
        """Whether another place may succeed where this one failed."""
        return self in (Failure.CAPACITY, Failure.QUOTA, Failure.UNSUPPORTED, Failure.UNKNOWN)


CAPACITY_TTL_S = 600.0
QUOTA_TTL_S = 3600.0
UNSUPPORTED_TTL_S = 86400.0
UNKNOWN_TTL_S = 300.0
BOOT_TTL_S = 1800.0  # an offer whose machine never enrolled, or was not what it said
_TTL = {Failure.CAPACITY: CAPACITY_TTL_S, Failure.QUOTA: QUOTA_TTL_S,
        Failure.UNSUPPORTED: UNSUPPORTED_TTL_S, Failure.UNKNOWN: UNKNOWN_TTL_S}


def family(instance_type: str) -> str:
    """The instance family of a type: ``p4d`` of ``p4d.24xlarge``."""
    return instance_type.split(".", 1)[0]


def zone_key(offer: Offer, spot: bool) -> str:
    return (f"zone:{offer.provider}/{offer.region}/{offer.zone or '*'}/{offer.instance_type}/"
            f"{'spot' if spot else 'on-demand'}")


def family_key(offer: Offer) -> str:
    return f"family:{offer.provider}/{offer.region}/{family(offer.instance_type)}"


def type_key(offer: Offer) -> str:
    return f"type:{offer.provider}/{offer.region}/{offer.zone or '*'}/{offer.instance_type}"


@dataclass(frozen=True)
class LaunchBlock:
    """Do not launch what ``key`` covers until ``until`` (``reason`` says why)."""

    key: str
    until: float
    reason: str


def blocks_for(failure: Failure, offer: Offer, spot: bool, now: float,
               reason: str) -> list[LaunchBlock]:
    """What a failure of ``failure`` launching ``offer`` blocks (none for the classes that do
    not fail over: they fail the job, disable the cloud or retry)."""
    if failure is Failure.QUOTA:
        key = family_key(offer)
    elif failure is Failure.UNSUPPORTED:
        key = type_key(offer)
    elif failure in (Failure.CAPACITY, Failure.UNKNOWN):
        key = zone_key(offer, spot)
    else:
        return []
    return [LaunchBlock(key, now + _TTL[failure], reason)]


def boot_block(offer: Offer, spot: bool, now: float, reason: str) -> LaunchBlock:
    """The block of an offer whose machine did not enrol in time or was not what it said."""
    return LaunchBlock(zone_key(offer, spot), now + BOOT_TTL_S, reason)


def blocked_by(offer: Offer, spot: bool, blocks: Iterable[LaunchBlock],
               now: float) -> LaunchBlock | None:
    """The live block that covers launching ``offer`` (spot or not), if any."""
    keys = {zone_key(offer, spot), family_key(offer), type_key(offer)}
    if offer.zone is not None:  # a block of the whole region's type covers each zone
        anywhere = replace(offer, zone=None)
        keys |= {zone_key(anywhere, spot), type_key(anywhere)}
    for block in blocks:
        if block.until > now and block.key in keys:
            return block
    return None


@dataclass(frozen=True)
class Try:
    """One launch call and how it went, for the job's table."""

    provider: str
    region: str
    zone: str | None
    instance_type: str
    spot: bool
    outcome: str  # "launched", a Failure's value, or "blocked"
    detail: str  # the cloud's code and message, or the block's reason

    @property
    def where(self) -> str:
        return f"{self.provider} {self.zone or self.region} {self.instance_type}"


def table(tries: Sequence[Try]) -> str:
    """Where a launch tried and why each place failed, one aligned row per try."""
    if not tries:
        return "no launchable offer was tried"
    rows = [(t.where, "spot" if t.spot else "on-demand", t.outcome, t.detail) for t in tries]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}"
                     for r in rows)


def over_cap(price: float, running_per_hour: float, spent_today: float,
             cap_hour: float | None, cap_day: float | None, *, nodes: int = 1) -> str | None:
    """Why launching ``nodes`` nodes at ``price`` $/h each (a gang's members count together,
    before any is launched) would break a project's spending cap, with the figures; None when
    it would not. The day's cap counts the new nodes' first hour."""
    total = price * nodes
    these = "this one costs" if nodes == 1 else f"these {nodes} cost"
    if cap_hour is not None and running_per_hour + total > cap_hour + 1e-9:
        return (f"the project's cap of ${cap_hour:.2f}/h: launched nodes run at "
                f"${running_per_hour:.2f}/h and {these} ${total:.2f}/h")
    if cap_day is not None and spent_today + total > cap_day + 1e-9:
        return (f"the project's cap of ${cap_day:.2f}/day: ${spent_today:.2f} spent today and "
                f"{'this node costs' if nodes == 1 else f'these {nodes} nodes cost'} "
                f"${total:.2f}/h")
    return None
