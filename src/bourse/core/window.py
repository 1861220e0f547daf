"""A version's figures over a sliding window: requests, errors, latency quantiles.

Pure and cheap on the request path: each second of traffic is one bucket holding a count, an
error count and a latency histogram on fixed log-spaced bounds (5 % apart, 0.1 ms to ~2 min),
so recording is an index computation and a window's p50/p99 is a merge of at most
``seconds`` histograms, exact to within one bound (5 %).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field

RATIO = 1.05
LOW_MS = 0.1
BOUNDS = tuple(LOW_MS * RATIO ** i for i in range(int(math.log(1.2e5 / LOW_MS, RATIO)) + 2))


def bucket_of(latency_ms: float) -> int:
    """The histogram bucket of a latency: the first bound at or above it."""
    return min(bisect.bisect_left(BOUNDS, latency_ms), len(BOUNDS) - 1)


@dataclass
class Second:
    """One second of a version's traffic."""

    at: int
    requests: int = 0
    errors: int = 0
    histogram: dict[int, int] = field(default_factory=dict)

    def add(self, latency_ms: float, error: bool) -> None:
        self.requests += 1
        self.errors += error
        b = bucket_of(latency_ms)
        self.histogram[b] = self.histogram.get(b, 0) + 1


@dataclass(frozen=True)
class Figures:
    """What a window saw: the figures a rollout is judged on."""

    requests: int
    errors: int
    seconds: float
    p50_ms: float | None
    p99_ms: float | None
    histogram: tuple[tuple[int, int], ...] = ()  # (bucket, count), for ``slower_than``

    def slower_than(self, latency_ms: float) -> int:
        """How many requests took longer than ``latency_ms`` (to within one bucket, 5 %)."""
        limit = bucket_of(latency_ms)
        return sum(n for b, n in self.histogram if b > limit)

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float | int | None]:
        return {"requests": self.requests, "errors": self.errors,
                "error_rate": round(self.error_rate, 4), "rps": round(self.rps, 2),
                "p50_ms": _round(self.p50_ms), "p99_ms": _round(self.p99_ms)}


EMPTY = Figures(0, 0, 0.0, None, None)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def quantile(histogram: dict[int, int], total: int, q: float) -> float | None:
    """The ``q`` quantile of a merged histogram (its bucket's upper bound), None if empty."""
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for b in sorted(histogram):
        seen += histogram[b]
        if seen >= rank:
            return BOUNDS[b]
    return BOUNDS[-1]


class Window:
    """The last ``seconds`` seconds of one version's traffic, one bucket a second."""

    def __init__(self, seconds: int = 60) -> None:
        if seconds < 1:
            raise ValueError(f"a window of {seconds} s")
        self.seconds = seconds
        self._buckets: deque[Second] = deque()

    def record(self, now: float, latency_ms: float, error: bool) -> None:
        at = int(now)
        if not self._buckets or self._buckets[-1].at < at:
            self._buckets.append(Second(at))
            self._trim(at)
        self._buckets[-1].add(latency_ms, error)

    def _trim(self, at: int) -> None:
        while self._buckets and self._buckets[0].at <= at - self.seconds:
            self._buckets.popleft()

    def figures(self, now: float, since: float | None = None) -> Figures:
        """The figures of the window ending at ``now``, counting only from ``since``."""
        start = max(now - self.seconds, since if since is not None else -math.inf)
        merged: dict[int, int] = {}
        requests = errors = 0
        for second in self._buckets:
            if start <= second.at <= now:
                requests += second.requests
                errors += second.errors
                for b, n in second.histogram.items():
                    merged[b] = merged.get(b, 0) + n
        return Figures(requests, errors, max(now - start, 0.0),
                       quantile(merged, requests, 0.50), quantile(merged, requests, 0.99),
                       tuple(sorted(merged.items())))
