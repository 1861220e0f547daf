"""Log rate limits: how many bytes a job may print, as pure functions of bytes and time.

A job may print ``burst`` bytes at once and ``rate`` bytes a second on average after that (a
token bucket). What goes past it is dropped — never buffered — by whoever enforces it, and a
marker line in the log says how much. The agent's tailer enforces the bucket on what the job
writes (docs/security.md); the coordinator, against an agent that does not, caps what one
attempt may send in all at ``burst + rate x seconds since it was placed`` (``allowance``), which
an agent keeping to the bucket never reaches, however long it was disconnected.
"""

from __future__ import annotations

from dataclasses import dataclass

from bourse.core.errors import InvalidInput
from bourse.core.units import format_bytes, parse_size_gib

MIB = 1024 * 1024
DEFAULT_RATE = 8 * MIB  # bytes a second, sustained
DEFAULT_BURST = 256 * MIB  # at once: issue 3's 200 MB benchmark passes in one burst


@dataclass(frozen=True)
class LogLimit:
    rate: int = DEFAULT_RATE  # bytes a second; 0: no limit
    burst: int = DEFAULT_BURST

    def __post_init__(self) -> None:
        if self.rate < 0 or self.burst < 0:
            raise InvalidInput("a log rate limit is a number of bytes, 0 or more",
                               hint="write e.g. 8MB for the rate and 256MB for the burst")
        if self.rate and self.burst < self.rate:
            raise InvalidInput(f"the log burst ({format_bytes(self.burst)}) must be at least "
                               f"one second of the rate ({format_bytes(self.rate)})",
                               hint="raise the burst or lower the rate")

    @classmethod
    def parse(cls, rate: str, burst: str) -> LogLimit:
        """From sizes as people write them (``8MB``, ``256MB``; MB == MiB, as everywhere)."""
        return cls(rate=_bytes(rate, "--log-rate"), burst=_bytes(burst, "--log-burst"))

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def describe(self) -> str:
        return f"{format_bytes(self.rate)}/s"

    def marker(self, dropped: int) -> bytes:
        """The line that stands in the log where bytes were dropped."""
        return (f"bourse: {dropped} bytes dropped, log rate limit {self.describe()} "
                "exceeded\n").encode()

    def allowance(self, elapsed_s: float) -> float:
        """The most an attempt keeping to the bucket can have printed after ``elapsed_s``."""
        return self.burst + self.rate * max(0.0, elapsed_s) if self.enabled else float("inf")


def _bytes(text: str, field: str) -> int:
    return int(parse_size_gib(text, field=field) * (1 << 30))


class Bucket:
    """A token bucket: full at first, refilled at ``rate`` up to ``burst``."""

    def __init__(self, limit: LogLimit, now: float) -> None:
        self.limit = limit
        self._tokens = float(limit.burst)
        self._at = now

    def take(self, size: int, now: float) -> bool:
        """Whether ``size`` bytes printed by ``now`` fit; they are counted only when they do."""
        if not self.limit.enabled:
            return True
        elapsed = max(0.0, now - self._at)
        self._tokens = min(float(self.limit.burst), self._tokens + elapsed * self.limit.rate)
        self._at = now
        if size > self._tokens:
            return False
        self._tokens -= size
        return True
