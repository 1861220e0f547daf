"""Where a job should not go again: the node, provider and region of attempts that were
preempted or lost, each for a while.

Placement tries, in order: offers clear of every live entry; offers clear of the nodes (so
back to the provider or region that failed); then any offer — a job is never left waiting
because of its blocklist when something fits. Entries expire: a region short of spot capacity
now may have plenty in an hour. Pure: times are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeVar

from bourse.core.offer import Offer

Kind = Literal["node", "provider", "region"]
NODE_TTL_S = 3600.0
SCOPE_TTL_S = 600.0  # provider and region: shortages pass
TIERS: tuple[tuple[Kind, ...], ...] = (("node", "provider", "region"), ("node",), ())

T = TypeVar("T")


def add_failure(entries: Sequence[dict[str, Any]], now: float, *, node: str,
                provider: str | None, region: str | None) -> list[dict[str, Any]]:
    """The blocklist after an attempt on ``node`` was interrupted: expired entries dropped,
    the node, its provider and region (re)added with fresh expiries."""
    fresh = {(kind, value): until for kind, value, until in _live(entries, now)}
    fresh[("node", node)] = now + NODE_TTL_S
    for kind, value in (("provider", provider), ("region", region)):
        if value:
            fresh[(kind, value)] = now + SCOPE_TTL_S
    return [{"kind": kind, "value": value, "until": until}
            for (kind, value), until in sorted(fresh.items())]


def _live(entries: Iterable[dict[str, Any]], now: float) -> list[tuple[str, str, float]]:
    return [(str(e["kind"]), str(e["value"]), float(e["until"])) for e in entries
            if float(e.get("until", 0)) > now]


def blocked(entries: Sequence[dict[str, Any]], now: float,
            kinds: Sequence[Kind]) -> dict[str, set[str]]:
    """Live entries of ``kinds``, by kind."""
    found: dict[str, set[str]] = {kind: set() for kind in kinds}
    for kind, value, _until in _live(entries, now):
        if kind in found:
            found[kind].add(value)
    return found


def clear_of(offer: Offer, block: dict[str, set[str]]) -> bool:
    return not (offer.node_id in block.get("node", ()) or offer.id in block.get("node", ())
                or offer.provider in block.get("provider", ())
                or offer.region in block.get("region", ()))


def tiers(offers: Sequence[Offer], entries: Sequence[dict[str, Any]],
          now: float) -> list[list[Offer]]:
    """The offers to try, most preferred first (see the module's docstring); tiers equal to
    the one before are left out."""
    found: list[list[Offer]] = []
    for kinds in TIERS:
        block = blocked(entries, now, kinds)
        tier = [o for o in offers if clear_of(o, block)]
        if tier and (not found or len(tier) != len(found[-1])):
            found.append(tier)
    return found
