"""When a silent node is given up, and when its attempts stop themselves.

The *loss window* is how long the coordinator waits for a silent node before its attempts are
LOST and placed again: a setting of its own, independent of the keep-alive, but never shorter
than three keep-alives (a heartbeat may be late by one interval without the node being gone).

The node's side is the *fence*: an attempt that has heard nothing from the coordinator for
nearly the loss window stops itself (SIGTERM, then SIGKILL after a grace) before the
coordinator may place it elsewhere, so two attempts of a job never run at once. The agent
renews a lease each time the coordinator acknowledges a heartbeat, counted from when that
heartbeat was *sent* (the coordinator heard it later, so the node's clock runs out first),
and each attempt's supervisor checks the lease every ``check_s``. Pure: times are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

LOST_AFTER_KEEP_ALIVES = 3
DEFAULT_LOSS_WINDOW_S = 120.0  # dstack: 2 min unreachable; Kubernetes evicts after 5 min 40 s


def loss_window(window_s: float, keep_alive_s: float) -> float:
    """The loss window of a node with this keep-alive under the exchange's setting."""
    return max(window_s, LOST_AFTER_KEEP_ALIVES * keep_alive_s)


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


@dataclass(frozen=True)
class Fence:
    """How an attempt fences itself within a loss window: it checks its lease every
    ``check_s``, is sent SIGTERM at most ``check_s`` after the lease ran out, SIGKILL
    ``grace_s`` later, and the lease runs out ``margin_s`` before the window ends — room for
    the check, the grace and some slack — so it is gone before the coordinator gives it up."""

    window_s: float
    check_s: float
    grace_s: float
    margin_s: float

    @classmethod
    def within(cls, window_s: float) -> Fence:
        check = _clamp(window_s / 24, 0.2, 5.0)
        grace = _clamp(window_s / 12, 0.25, 10.0)
        slack = _clamp(window_s / 24, 0.1, 5.0)
        return cls(window_s, check, grace, check + grace + slack)

    def lease_until(self, heard_at: float) -> float:
        """When the lease ends, for a heartbeat sent at ``heard_at`` and acknowledged."""
        return heard_at + self.window_s - self.margin_s
