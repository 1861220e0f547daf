"""``core.reliability``: the measure of a node's record, and what `bourse nodes show` says."""

from __future__ import annotations

import pytest

from bourse.core.reliability import (
    MIN_OBSERVED_S,
    NodeRecord,
    against_declared,
    combine,
    common_declared,
    describe,
    measure,
)

DAY = 86400.0


def record(**fields: float | int | None) -> NodeRecord:
    base: dict[str, float | int | None] = {"enrolled_at": 0.0, "up_s": 0.0, "up_since": None,
                                           "ended": 0, "interrupted": 0, "work_s": 0.0}
    return NodeRecord(**(base | fields))  # type: ignore[arg-type]


def test_a_node_always_connected_that_never_lost_work_scores_one() -> None:
    r = measure(record(up_since=0.0, ended=40, work_s=30 * 3600.0), DAY)
    assert (r.availability, r.score, r.interruptions_per_hour) == (1.0, 1.0, 0.0)


def test_the_score_is_availability_times_the_share_not_interrupted() -> None:
    r = measure(record(up_s=DAY * 0.9, ended=10, interrupted=2, work_s=4 * 3600.0), DAY)
    assert r.availability == pytest.approx(0.9)
    assert r.score == pytest.approx(0.9 * 0.8)
    assert r.interruptions_per_hour == pytest.approx(0.5)


def test_closed_and_live_connections_add_up_and_never_pass_one() -> None:
    assert measure(record(up_s=1800.0, up_since=5400.0), 7200.0).availability == \
        pytest.approx(0.5)
    assert measure(record(up_s=9000.0, up_since=0.0), 7200.0).availability == 1.0


def test_no_score_before_an_hour_and_no_rate_before_an_hour_of_work() -> None:
    young = measure(record(up_since=0.0), MIN_OBSERVED_S - 1)
    assert young.score is None and young.availability == 1.0
    assert measure(record(up_since=0.0, ended=1, interrupted=1, work_s=600.0),
                   DAY).interruptions_per_hour is None
    assert measure(record(), 0.0).availability == 0.0  # enrolled this instant


def test_what_nodes_show_says() -> None:
    assert describe(measure(record(up_since=0.0), 600.0)) == \
        "not measured yet: watched 10 min of the 1.0 h it takes"
    said = describe(measure(record(up_s=DAY * 2.976, ended=40, interrupted=1,
                                   work_s=50 * 3600.0), 3 * DAY))
    assert said == ("99.2% available over 3.0 d; 1 of 40 attempts interrupted "
                    "(0.02/h of work); score 0.967")


def test_a_declared_sla_is_said_beside_the_score() -> None:
    watched = measure(NodeRecord(enrolled_at=0, up_s=2 * 86400, up_since=None, ended=10,
                                 interrupted=0, work_s=36000), now=2 * 86400)
    assert against_declared(None, watched) is None
    assert against_declared(0.995, watched) == "declared 99.5%, measured 100.0%: meets it"
    half = measure(NodeRecord(enrolled_at=0, up_s=86400, up_since=None, ended=0,
                              interrupted=0, work_s=0), now=2 * 86400)
    assert against_declared(0.99, half) == "declared 99.0%, measured 50.0%: below it"
    young = measure(NodeRecord(enrolled_at=0, up_s=60, up_since=None, ended=0, interrupted=0,
                               work_s=0), now=60)
    assert against_declared(0.99, young) == "declared 99.0%; not measured yet"


def test_a_providers_nodes_add_up_weighted_by_how_long_each_was_watched() -> None:
    old = measure(record(up_s=9 * DAY, ended=10, interrupted=1, work_s=3 * 3600.0), 10 * DAY)
    new = measure(record(enrolled_at=9 * DAY, up_since=9 * DAY, ended=10, work_s=3600.0),
                  10 * DAY)  # watched 1 day, all of it up
    both = combine([old, new])
    assert both.observed_s == 11 * DAY and both.availability == pytest.approx(10 / 11)
    assert (both.ended, both.interrupted, both.work_h) == (20, 1, pytest.approx(4.0))
    assert both.score == pytest.approx(10 / 11 * 0.95)
    assert both.interruptions_per_hour == pytest.approx(0.25)
    assert combine([]).score is None and combine([]).availability == 0.0
    young = combine([measure(record(up_since=0.0), 1000.0)] * 3)  # 50 min watched together
    assert young.score is None


def test_a_provider_declares_the_sla_its_nodes_agree_on() -> None:
    assert common_declared([0.99, None, 0.99]) == 0.99
    assert common_declared([None, None]) is None
    assert common_declared([0.99, 0.995]) is None  # they disagree: no one promise to hold
