"""Where a job should not go again: the node, provider and region of attempts that were
preempted or lost, each for a while.

Placement tries, in order: offers clear of every live entry; offers clear of the nodes (so
back to the provider or region that failed); then any offer — a job is never left waiting
because of its blocklist when something fits. Entries expire: a region short of spot capacity
now may have plenty in an hour. Pure: times are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

from bourse.core.offer import Offer

Kind = Literal["node", "provider", "region"]
NODE_TTL_S = 3600.0
SCOPE_TTL_S = 600.0  # provider and region: shortages pass
TIERS: tuple[tuple[Kind, ...], ...] = (("node", "provider", "region"), ("node",), ())

T = TypeVar("T")


class Block(NamedTuple):
    """One entry: avoid ``value`` (a node id, a provider, a region) until ``until``."""

    kind: Kind
    value: str
    until: float

    def json(self) -> dict[str, Any]:
        """As a job row stores it."""
        return {"kind": self.kind, "value": self.value, "until": self.until}


def read(entries: Iterable[Mapping[str, Any]] | None) -> list[Block]:
    """A job row's entries (JSON objects) as blocks; entries of an unknown kind are skipped."""
    found = []
    for entry in entries or ():
        kind = entry.get("kind")
        if kind in ("node", "provider", "region"):
            found.append(Block(kind, str(entry.get("value")), float(entry.get("until", 0))))
    return found


def add_failure(entries: Sequence[Block], now: float, *, node: str,
                provider: str | None, region: str | None) -> list[Block]:
    """The blocklist after an attempt on ``node`` was interrupted: expired entries dropped,
    the node, its provider and region (re)added with fresh expiries."""
    fresh = {(b.kind, b.value): b.until for b in entries if b.until > now}
    fresh[("node", node)] = now + NODE_TTL_S
    scopes: tuple[tuple[Kind, str | None], ...] = (("provider", provider), ("region", region))
    for kind, value in scopes:
        if value:
            fresh[(kind, value)] = now + SCOPE_TTL_S
    return [Block(kind, value, until) for (kind, value), until in sorted(fresh.items())]


def blocked(entries: Sequence[Block], now: float,
            kinds: Sequence[Kind]) -> dict[str, set[str]]:
    """Live entries of ``kinds``, by kind."""
    found: dict[str, set[str]] = {kind: set() for kind in kinds}
    for block in entries:
        if block.until > now and block.kind in found:
            found[block.kind].add(block.value)
    return found


def clear_of(offer: Offer, block: dict[str, set[str]]) -> bool:
    return not (offer.node_id in block.get("node", ()) or offer.id in block.get("node", ())
                or offer.provider in block.get("provider", ())
                or offer.region in block.get("region", ()))


def tiers(offers: Sequence[Offer], entries: Sequence[Block],
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
