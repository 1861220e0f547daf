"""Reconnect backoff: exponential with full jitter (AWS architecture blog, "Exponential
Backoff And Jitter"), so that many agents cut off together don't reconnect together."""

from __future__ import annotations


def backoff_delay(failures: int, unit: float, *, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds to wait after ``failures`` consecutive failures; ``unit`` is uniform in [0, 1)."""
    if failures <= 0:
        return 0.0
    ceiling = min(cap, base * 2.0 ** (failures - 1))
    return ceiling * unit
