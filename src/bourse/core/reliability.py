"""How reliable a node has been, measured by the exchange (never declared by its provider).

Two things are measured, from what the coordinator saw itself:

- **availability**: the share of the time since the node enrolled that it was connected.
  A connection's time runs from its hello to its goodbye; a connection that died without one
  (the node went silent and was lost, or the coordinator stopped) ends when the node was last
  heard. The coordinator's own downtime counts against no node: a node connected when it
  stopped is counted up to when it was last heard, and from its next hello on.
- **interruptions**: the attempts that ended because of the node — lost with it (silent past
  its loss window, a start it never acknowledged) or preempted (its provider reclaimed it) —
  among all the attempts that ended there, and per hour of work it ran.

``score`` is availability times the share of ended attempts the node did not interrupt: 1.0
for a node always connected that never lost an attempt. It is given only once the node was
watched for ``MIN_OBSERVED_S`` (an hour): a node minutes old has no record, good or bad.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MIN_OBSERVED_S = 3600.0


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """What the exchange keeps of one node (its columns)."""

    enrolled_at: float
    up_s: float  # connected time of the connections that ended
    up_since: float | None  # the live connection's start
    ended: int  # attempts that ended on it
    interrupted: int  # of those, lost with the node or preempted
    work_s: float  # the run time of the attempts that ended there


@dataclass(frozen=True, slots=True)
class Reliability:
    observed_s: float
    availability: float
    ended: int
    interrupted: int
    work_h: float
    interruptions_per_hour: float | None  # None before an hour of work
    score: float | None  # None while observed for less than MIN_OBSERVED_S


def measure(record: NodeRecord, now: float) -> Reliability:
    observed = max(0.0, now - record.enrolled_at)
    live = max(0.0, now - record.up_since) if record.up_since is not None else 0.0
    return _figures(observed, min(observed, record.up_s + live), record.ended,
                    record.interrupted, record.work_s / 3600.0)


def combine(parts: Sequence[Reliability]) -> Reliability:
    """Several nodes' figures as one (a provider's): the times watched, the attempts and the
    hours of work summed, so the availability is weighted by how long each node was watched;
    scored once the nodes were watched ``MIN_OBSERVED_S`` together."""
    return _figures(sum(p.observed_s for p in parts),
                    sum(p.availability * p.observed_s for p in parts),
                    sum(p.ended for p in parts), sum(p.interrupted for p in parts),
                    sum(p.work_h for p in parts))


def _figures(observed: float, up: float, ended: int, interrupted: int,
             work_h: float) -> Reliability:
    availability = min(1.0, up / observed) if observed > 0 else 0.0
    kept = 1.0 - interrupted / ended if ended else 1.0
    return Reliability(
        observed_s=observed, availability=availability, ended=ended, interrupted=interrupted,
        work_h=work_h, interruptions_per_hour=interrupted / work_h if work_h >= 1.0 else None,
        score=availability * max(0.0, kept) if observed >= MIN_OBSERVED_S else None)


def common_declared(values: Iterable[float | None]) -> float | None:
    """What a provider declared for its nodes: the one SLA those that declared one agree on;
    None when none declared, or when they declared different ones."""
    found = {v for v in values if v is not None}
    return found.pop() if len(found) == 1 else None


def describe(r: Reliability) -> str:
    """``99.2% available over 3.1 d; 1 of 40 attempts interrupted (0.02/h of work)``"""
    span = period(r.observed_s)
    if r.score is None:
        return f"not measured yet: watched {span} of the {period(MIN_OBSERVED_S)} it takes"
    rate = (f" ({r.interruptions_per_hour:.2f}/h of work)"
            if r.interruptions_per_hour is not None else "")
    return (f"{r.availability:.1%} available over {span}; {r.interrupted} of {r.ended} "
            f"attempts interrupted{rate}; score {r.score:.3f}")


def against_declared(declared: float | None, r: Reliability) -> str | None:
    """What the node's provider promised beside what was measured: ``declared 99.5%,
    measured 97.0%: below it``; None when nothing was declared."""
    if declared is None:
        return None
    if r.score is None:
        return f"declared {declared:.1%}; not measured yet"
    verdict = "meets it" if r.score >= declared else "below it"
    return f"declared {declared:.1%}, measured {r.score:.1%}: {verdict}"


def period(seconds: float) -> str:
    """How long a node was watched: ``3.1 d``, ``2.0 h``, ``20 min``."""
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
