"""The loss window and the fence inside it, from tables."""

from __future__ import annotations

import pytest

from bourse.core.liveness import Fence, loss_window


@pytest.mark.parametrize(("window", "keep_alive", "effective"), [
    (120.0, 20.0, 120.0),  # the default: two minutes, whatever the keep-alive below 40 s
    (120.0, 5.0, 120.0),  # `bourse up`: a 10 s blink is far inside it
    (120.0, 60.0, 180.0),  # never shorter than three heartbeats
    (1.0, 1.0, 3.0),
])
def test_the_loss_window(window: float, keep_alive: float, effective: float) -> None:
    assert loss_window(window, keep_alive) == effective


@pytest.mark.parametrize("window", [3.0, 6.0, 30.0, 120.0, 600.0, 86400.0])
def test_the_fence_is_done_before_the_window_ends(window: float) -> None:
    """Checked late by a whole interval and killed after the whole grace, an attempt is still
    gone before the coordinator may place it elsewhere."""
    fence = Fence.within(window)
    heard = 1000.0
    worst_kill = fence.lease_until(heard) + fence.check_s + fence.grace_s
    assert worst_kill < heard + window
    assert fence.grace_s > 0 and fence.check_s > 0


@pytest.mark.parametrize("keep_alive", [1.0, 2.0, 5.0, 20.0])
def test_a_lease_outlasts_the_next_heartbeat(keep_alive: float) -> None:
    """Renewed at every acknowledged heartbeat, a healthy node's lease never runs out, even
    with the next acknowledgement late by a whole keep-alive."""
    fence = Fence.within(loss_window(120.0, keep_alive))
    assert fence.lease_until(0.0) > 2 * keep_alive
    short = Fence.within(loss_window(1.0, keep_alive))  # the shortest window there is
    assert short.lease_until(0.0) > 2 * keep_alive


def test_the_default_window_fences_well_inside_two_minutes() -> None:
    fence = Fence.within(120.0)
    assert (fence.check_s, fence.grace_s, fence.margin_s) == (5.0, 10.0, 20.0)
    assert fence.lease_until(0.0) == 100.0
