"""How many replicas a version should run: pure, from its request rate and its latency.

``target_rps`` is what one replica should serve; the rate asks for the rate over the target,
rounded up. ``target_p99_ms`` is the p99 latency the version should keep: a p99 above it asks
for the current count times p99 / target, rounded up (Kubernetes' HPA rule), one below it for
fewer the same way, within ``TOLERANCE`` of it for as many as now. With both targets the
larger ask wins; the count stays within [min, max]. Scaling down waits ``down_after_s`` of a
lower count (a burst that ends should not drop replicas that the next burst needs); scaling
up is immediate. Without a target the count is ``min`` (or 1 when min is 0 and there is
traffic); without a p99 (no request in the window) the latency asks for nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Scaling:
    min: int = 1
    max: int = 1
    target_rps: float | None = None
    down_after_s: float = 60.0
    target_p99_ms: float | None = None

    def __post_init__(self) -> None:
        if self.min < 0 or self.max < max(self.min, 1) or any(
                t is not None and t <= 0 for t in (self.target_rps, self.target_p99_ms)):
            raise ValueError(f"invalid scaling: {self}")


TOLERANCE = 0.1  # a p99 within 10 % of its target asks for no change


def wanted(scaling: Scaling, rps: float, current: int = 0,
           p99_ms: float | None = None) -> int:
    """The replica count the rate and the latency ask for, within [min, max]."""
    if scaling.target_rps is None:
        need = 1 if rps > 0 else 0
    else:
        need = math.ceil(rps / scaling.target_rps - 1e-9)
    if scaling.target_p99_ms is not None and p99_ms is not None and current > 0:
        ratio = p99_ms / scaling.target_p99_ms
        need = max(need, current if abs(ratio - 1) <= TOLERANCE
                   else math.ceil(current * ratio - 1e-9))
    return max(scaling.min, min(scaling.max, need))


def desired(scaling: Scaling, current: int, rps: float, lower_since: float | None,
            now: float, *, p99_ms: float | None = None) -> tuple[int, float | None]:
    """(replicas to run, since when a lower count has been asked for)."""
    want = wanted(scaling, rps, current, p99_ms)
    if want >= current:
        return want, None
    since = now if lower_since is None else lower_since
    if now - since >= scaling.down_after_s:
        return want, None
    return current, since
