"""Which replica a request goes to: a version by traffic weight, then its least busy replica.

Pure: the caller passes the ready replicas with their outstanding requests and a number in
[0, 1) for the draw. A version with no ready replica gives its share to the others, so a
canary that is not ready yet (or whose replicas died) never fails a request: its traffic goes
to the stable version. Among a version's replicas the one with the fewest requests in flight
wins; ties go to the one picked least recently (``last``), which spreads an idle service's
requests round-robin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    replica: str
    version: int
    outstanding: int
    last: float  # when it was last picked


def pick_version(weights: Mapping[int, int], ready: set[int], draw: float) -> int | None:
    """A version among the ``ready`` ones, in proportion to ``weights`` (percent)."""
    live = {v: w for v, w in weights.items() if v in ready and w > 0}
    if not live:
        fallback = sorted(v for v in weights if v in ready)
        return fallback[-1] if fallback else None
    total = sum(live.values())
    point = draw * total
    for version in sorted(live):
        point -= live[version]
        if point < 0:
            return version
    return max(live)


def pick(weights: Mapping[int, int], candidates: Sequence[Candidate], draw: float,
         exclude: frozenset[str] = frozenset()) -> Candidate | None:
    """The replica for a request (None: no ready replica), skipping ``exclude`` (a retry)."""
    usable = [c for c in candidates if c.replica not in exclude]
    version = pick_version(weights, {c.version for c in usable}, draw)
    if version is None:
        return None
    mine = [c for c in usable if c.version == version]
    return min(mine, key=lambda c: (c.outstanding, c.last, c.replica))
