"""Version split, least outstanding requests, and the shares of versions without replicas."""

from __future__ import annotations

from collections import Counter

import pytest

from bourse.core.autoscale import Scaling, desired, wanted
from bourse.core.balance import Candidate, pick, pick_version
from bourse.core.window import BOUNDS, Window, bucket_of


def c(replica: str, version: int, outstanding: int = 0, last: float = 0.0) -> Candidate:
    return Candidate(replica, version, outstanding, last)


def test_split_follows_weights() -> None:
    counts = Counter(pick_version({1: 90, 2: 10}, {1, 2}, i / 1000) for i in range(1000))
    assert counts == {1: 900, 2: 100}


@pytest.mark.parametrize(("weights", "ready", "expected"), [
    ({1: 90, 2: 10}, {1}, 1),  # the canary is not ready: all to stable
    ({1: 0, 2: 100}, {1}, 1),  # promoted but its replicas died: stable still serves
    ({1: 100}, set(), None),
    ({1: 100, 2: 0}, {1, 2}, 1),
])
def test_unready_versions_give_their_share(weights: dict[int, int], ready: set[int],
                                           expected: int | None) -> None:
    assert pick_version(weights, ready, 0.99) == expected


def test_least_outstanding_then_least_recent() -> None:
    replicas = [c("a", 1, 3), c("b", 1, 1, last=5), c("d", 1, 1, last=2), c("e", 2, 0)]
    assert pick({1: 100}, replicas, 0.5).replica == "d"  # type: ignore[union-attr]
    assert pick({1: 100}, replicas, 0.5,
                exclude=frozenset({"d"})).replica == "b"  # type: ignore[union-attr]
    assert pick({1: 100}, [c("a", 1)], 0.5, exclude=frozenset({"a"})) is None


def test_window_figures_and_quantiles() -> None:
    w = Window(seconds=10)
    for i in range(1000):
        w.record(100 + i / 100, latency_ms=1.0 + (i % 100), error=i % 50 == 0)
    f = w.figures(110)
    assert (f.requests, f.errors) == (1000, 20)
    assert f.error_rate == pytest.approx(0.02)
    assert f.p50_ms == pytest.approx(50, rel=0.06)
    assert f.p99_ms == pytest.approx(99, rel=0.06)
    assert w.figures(110, since=105).requests == 500
    w.record(125, 1.0, False)  # older seconds fall out of the window
    assert w.figures(125).requests == 1
    assert bucket_of(1e9) == len(BOUNDS) - 1


@pytest.mark.parametrize(("scaling", "rps", "count"), [
    (Scaling(1, 4, target_rps=50), 0, 1),
    (Scaling(1, 4, target_rps=50), 120, 3),
    (Scaling(1, 4, target_rps=50), 1000, 4),
    (Scaling(0, 2), 0, 0),
    (Scaling(0, 2), 5, 1),
    (Scaling(2, 2), 0, 2),
])
def test_wanted(scaling: Scaling, rps: float, count: int) -> None:
    assert wanted(scaling, rps) == count


def test_scale_down_waits() -> None:
    s = Scaling(1, 4, target_rps=50, down_after_s=30)
    assert desired(s, 2, 300, None, 0) == (4, None)  # up at once
    assert desired(s, 4, 10, None, 100) == (4, 100)  # lower asked: wait
    assert desired(s, 4, 10, 100, 120) == (4, 100)
    assert desired(s, 4, 10, 100, 131) == (1, None)


@pytest.mark.parametrize(("p99_ms", "current", "count"), [
    (500.0, 2, 4),  # twice the target: twice the replicas
    (260.0, 2, 2),  # within 10 % of it: as many
    (100.0, 4, 2),  # well under it: fewer
    (None, 3, 1),  # no request in the window: the latency asks for nothing
    (5000.0, 3, 6),  # never past max
])
def test_a_p99_target_scales_by_p99_over_target(p99_ms: float | None, current: int,
                                               count: int) -> None:
    assert wanted(Scaling(1, 6, target_p99_ms=250), 10.0, current, p99_ms) == count


def test_with_both_targets_the_larger_ask_wins() -> None:
    both = Scaling(1, 10, target_rps=50, target_p99_ms=250)
    assert wanted(both, 400, 2, 260.0) == 8  # the rate asks more
    assert wanted(both, 50, 2, 1000.0) == 8  # the latency asks more
    s = Scaling(1, 6, down_after_s=30, target_p99_ms=250)
    assert desired(s, 2, 5, None, 0, p99_ms=600.0) == (5, None)  # up at once
    assert desired(s, 5, 5, None, 10, p99_ms=50.0) == (5, 10)  # down waits
    assert desired(s, 5, 5, 10, 41, p99_ms=50.0) == (1, None)
    with pytest.raises(ValueError, match="invalid scaling"):
        Scaling(1, 2, target_p99_ms=0)
