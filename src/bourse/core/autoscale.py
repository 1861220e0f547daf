"""How many replicas a version should run: pure, from its request rate.

``target_rps`` is what one replica should serve; the count is the rate over the target,
rounded up, within [min, max]. Scaling down waits ``down_after_s`` of a lower count (a burst
that ends should not drop replicas that the next burst needs); scaling up is immediate.
Without a target the count is ``min`` (or 1 when min is 0 and there is traffic).
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

    def __post_init__(self) -> None:
        if self.min < 0 or self.max < max(self.min, 1) or (
                self.target_rps is not None and self.target_rps <= 0):
            raise ValueError(f"invalid scaling: {self}")


def wanted(scaling: Scaling, rps: float) -> int:
    """The replica count the rate asks for, within [min, max]."""
    if scaling.target_rps is None:
        need = 1 if rps > 0 else 0
    else:
        need = math.ceil(rps / scaling.target_rps - 1e-9)
    return max(scaling.min, min(scaling.max, need))


def desired(scaling: Scaling, current: int, rps: float, lower_since: float | None,
            now: float) -> tuple[int, float | None]:
    """(replicas to run, since when a lower count has been asked for)."""
    want = wanted(scaling, rps)
    if want >= current:
        return want, None
    since = now if lower_since is None else lower_since
    if now - since >= scaling.down_after_s:
        return want, None
    return current, since
