"""How well each cloud delivered the machines the exchange launched there, measured from its
own launch rows (never from what the cloud declares).

Over a window (30 days before now by default), per provider, of the launches requested in it:

- **enrolled**: the machine's agent enrolled (said hello with its launch token) — the machine
  was delivered, whatever happened to it after;
- **failed**: the cloud made no instance (``failed``), or the launch ended (``terminating``,
  ``terminated``) without its agent ever enrolling: it did not boot in the boot timeout, or the
  cloud lost it on the way up;
- **withdrawn**: ended before it enrolled because the exchange no longer wanted it (the job it
  was launched for ended first): no fault of the cloud, counted neither way;
- **in flight**: requested or booting and not enrolled yet: not counted either way.

``success_rate`` is enrolled / (enrolled + failed), None before any launch was decided;
``ready_median_s`` and ``ready_p90_s`` are quantiles (linear between ranks) of the time from
the request to the enrolment, over the enrolled launches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bourse.core.states import LAUNCH_IN_FLIGHT, LaunchState

WINDOW_S = 30 * 86400.0
# the reason a launch ends with when its job ended before it enrolled (``launcher.decide``)
WITHDRAWN = "the job it was launched for ended before it booted"
_ENDED = frozenset({LaunchState.TERMINATING, LaunchState.TERMINATED})


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """What the exchange keeps of one launch (its columns)."""

    provider: str
    state: LaunchState
    requested_at: float
    enrolled_at: float | None = None
    terminated_at: float | None = None
    withdrawn: bool = False  # ended for ``WITHDRAWN`` (its job ended before it enrolled)


@dataclass(frozen=True, slots=True)
class LaunchFigures:
    launches: int
    enrolled: int
    failed: int
    in_flight: int
    withdrawn: int
    success_rate: float | None  # None before any launch enrolled or failed
    ready_median_s: float | None  # None before any launch enrolled
    ready_p90_s: float | None


def outcome(r: LaunchRecord) -> str:
    """``enrolled``, ``failed``, ``withdrawn`` or ``in_flight``."""
    if r.state is LaunchState.FAILED:
        return "failed"
    if r.enrolled_at is not None or r.state is LaunchState.READY:
        return "enrolled"
    if r.state in LAUNCH_IN_FLIGHT and r.terminated_at is None:
        return "in_flight"
    return "withdrawn" if r.withdrawn else "failed"


def figures(records: Iterable[LaunchRecord], now: float,
            window_s: float = WINDOW_S) -> dict[str, LaunchFigures]:
    """Per provider (sorted by name), of the launches requested in the window."""
    since = now - window_s
    by_provider: dict[str, list[LaunchRecord]] = {}
    for r in records:
        if since <= r.requested_at <= now:
            by_provider.setdefault(r.provider, []).append(r)
    return {name: measure(by_provider[name]) for name in sorted(by_provider)}


def measure(records: Sequence[LaunchRecord]) -> LaunchFigures:
    """The figures of one provider's launches."""
    outcomes = [outcome(r) for r in records]
    enrolled, failed = outcomes.count("enrolled"), outcomes.count("failed")
    ready = sorted(max(0.0, r.enrolled_at - r.requested_at) for r in records
                   if r.enrolled_at is not None and r.state is not LaunchState.FAILED)
    return LaunchFigures(
        launches=len(records), enrolled=enrolled, failed=failed,
        in_flight=outcomes.count("in_flight"), withdrawn=outcomes.count("withdrawn"),
        success_rate=enrolled / (enrolled + failed) if enrolled + failed else None,
        ready_median_s=quantile(ready, 0.5), ready_p90_s=quantile(ready, 0.9))


def quantile(ordered: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of sorted values, linear between the closest ranks; None of none."""
    if not ordered:
        return None
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def describe(f: LaunchFigures, window_s: float = WINDOW_S) -> str:
    """``12 launches in 30 days: 10 ready (83%), 2 failed, median 3 min 10 s to enrol (p90 6
    min)``, or ``no launch in 30 days``."""
    window = span(window_s)
    if not f.launches:
        return f"no launch in {window}"
    text = f"{_plural(f.launches, 'launch', 'launches')} in {window}: "
    parts = []
    if f.success_rate is not None:
        parts.append(f"{f.enrolled} ready ({f.success_rate:.0%})")
        parts.append(f"{f.failed} failed")
    if f.in_flight:
        parts.append(f"{f.in_flight} on the way")
    if f.withdrawn:
        parts.append(f"{f.withdrawn} withdrawn")
    if f.ready_median_s is not None and f.ready_p90_s is not None:
        parts.append(f"median {span(f.ready_median_s)} to enrol (p90 {span(f.ready_p90_s)})")
    return text + ", ".join(parts)


def span(seconds: float) -> str:
    """``45 s``, ``3 min 10 s``, ``6 min``, ``2 h 5 min``, ``30 days``, ``1 day``."""
    whole = round(seconds)
    if whole >= 86400 and whole % 86400 == 0:
        return _plural(whole // 86400, "day", "days")
    if whole >= 3600:
        return _two(whole // 3600, "h", whole % 3600 // 60, "min")
    if whole >= 60:
        return _two(whole // 60, "min", whole % 60, "s")
    return f"{whole} s"


def _two(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big} {big_unit}" + (f" {small} {small_unit}" if small else "")


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
