"""Transfer progress as a pure meter: bytes in, `Progress` out, the clock passed in by the caller.

The agent turns a `Progress` into a job event; its ``str`` is the line users see
("inputs: 1.2 GB / 2.0 GB, 310 MB/s"). Sizes are decimal (1 GB = 10^9 bytes), as transfer tools
print them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def format_bytes(count: float) -> str:
    value, unit = float(count), 0
    while abs(value) >= 1000 and unit < len(_UNITS) - 1:
        value, unit = value / 1000, unit + 1
    return f"{value:.0f} {_UNITS[unit]}" if unit == 0 or value >= 100 else (
        f"{value:.1f} {_UNITS[unit]}")


@dataclass(frozen=True, slots=True)
class Progress:
    label: str
    done: int
    total: int
    rate: float  # bytes per second over the recent window
    elapsed: float
    objects_done: int
    objects_total: int

    @property
    def finished(self) -> bool:
        return self.done >= self.total and self.objects_done >= self.objects_total

    def __str__(self) -> str:
        return (f"{self.label}: {format_bytes(self.done)} / {format_bytes(self.total)}, "
                f"{format_bytes(self.rate)}/s")


class ProgressMeter:
    """Counts transferred bytes; `add` returns a `Progress` at most once per ``interval``
    seconds, and always for the last byte. The rate is measured over the last ``window``
    seconds."""

    def __init__(self, label: str, total: int, objects_total: int, *, start: float,
                 done: int = 0, objects_done: int = 0, interval: float = 0.5,
                 window: float = 3.0) -> None:
        self.label, self.total, self.objects_total = label, total, objects_total
        self.done, self.objects_done = done, objects_done
        self.start, self.interval, self.window = start, interval, window
        self._samples: deque[tuple[float, int]] = deque([(start, done)])
        self._last_report = start

    def add(self, nbytes: int, now: float, *, objects: int = 0) -> Progress | None:
        self.done += nbytes
        self.objects_done += objects
        self._samples.append((now, self.done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()
        finished = self.done >= self.total and self.objects_done >= self.objects_total
        if not finished and now - self._last_report < self.interval:
            return None
        self._last_report = now
        return self.snapshot(now)

    def snapshot(self, now: float) -> Progress:
        first_t, first_done = self._samples[0]
        span = now - first_t
        rate = (self.done - first_done) / span if span > 0 else 0.0
        return Progress(self.label, self.done, self.total, rate, now - self.start,
                        self.objects_done, self.objects_total)
