"""``core.launch_figures``: each cloud's launch success rate and time to enrol, from launch
records, and what ``bourse clouds`` says of them."""

from __future__ import annotations

import pytest

from bourse.core.launch_figures import (
    WINDOW_S,
    LaunchFigures,
    LaunchRecord,
    describe,
    figures,
    outcome,
    quantile,
    span,
)
from bourse.core.states import LaunchState as S

NOW = 100 * 86400.0


def launch(state: S, *, ago: float = 3600.0, ready_s: float | None = None,
           ended: bool = False, provider: str = "aws", withdrawn: bool = False) -> LaunchRecord:
    requested = NOW - ago
    return LaunchRecord(provider, state, requested,
                        None if ready_s is None else requested + ready_s,
                        requested + 1000.0 if ended else None, withdrawn)


@pytest.mark.parametrize(("record", "expected"), [
    (launch(S.READY, ready_s=60.0), "enrolled"),
    (launch(S.TERMINATED, ready_s=60.0, ended=True), "enrolled"),  # delivered, then idle
    (launch(S.TERMINATING, ready_s=60.0), "enrolled"),  # enrolled, not what the offer said
    (launch(S.READY), "enrolled"),  # a row from before enrolled_at was kept
    (launch(S.FAILED, ended=True), "failed"),  # the cloud made no instance
    (launch(S.TERMINATED, ended=True), "failed"),  # boot timeout
    (launch(S.TERMINATING), "failed"),  # boot timeout, the cloud call still to come
    (launch(S.TERMINATED, ended=True, withdrawn=True), "withdrawn"),  # its job ended first
    (launch(S.REQUESTED), "in_flight"),
    (launch(S.BOOTING), "in_flight"),
    (launch(S.BOOTING, ended=True), "failed"),  # ended, its state not yet written
])
def test_each_launch_has_one_outcome(record: LaunchRecord, expected: str) -> None:
    assert outcome(record) == expected


def test_counts_rate_and_times_per_provider() -> None:
    found = figures([
        launch(S.READY, ready_s=120.0), launch(S.TERMINATED, ready_s=300.0, ended=True),
        launch(S.READY, ready_s=180.0), launch(S.FAILED, ended=True),
        launch(S.BOOTING), launch(S.TERMINATED, ended=True, withdrawn=True),
        launch(S.READY, ready_s=90.0, provider="lambda"),
    ], NOW)
    assert list(found) == ["aws", "lambda"]
    assert found["aws"] == LaunchFigures(launches=6, enrolled=3, failed=1, in_flight=1,
                                         withdrawn=1, success_rate=0.75, ready_median_s=180.0,
                                         ready_p90_s=pytest.approx(276.0))
    assert found["lambda"].success_rate == 1.0
    assert found["lambda"].ready_median_s == found["lambda"].ready_p90_s == 90.0


def test_only_launches_requested_in_the_window_count() -> None:
    records = [launch(S.FAILED, ago=WINDOW_S + 1), launch(S.READY, ago=WINDOW_S, ready_s=60.0),
               launch(S.FAILED, ago=2 * 86400.0)]
    assert figures(records, NOW)["aws"].launches == 2
    assert figures(records, NOW, window_s=86400.0) == {}
    assert figures([launch(S.READY, ago=-10.0, ready_s=1.0)], NOW) == {}  # not yet requested


def test_launches_still_on_the_way_give_no_rate_and_no_time() -> None:
    [aws] = figures([launch(S.REQUESTED), launch(S.BOOTING)], NOW).values()
    assert (aws.launches, aws.in_flight, aws.success_rate, aws.ready_median_s,
            aws.ready_p90_s) == (2, 2, None, None, None)


def test_only_failures_give_a_zero_rate_and_no_time() -> None:
    [aws] = figures([launch(S.FAILED, ended=True)], NOW).values()
    assert (aws.success_rate, aws.ready_median_s) == (0.0, None)


def test_a_clock_that_enrolled_before_the_request_counts_zero_seconds() -> None:
    [aws] = figures([launch(S.READY, ready_s=-5.0)], NOW).values()
    assert aws.ready_median_s == 0.0


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 0.5, None), ([7.0], 0.9, 7.0), ([1.0, 3.0], 0.5, 2.0), ([1.0, 2.0, 3.0], 0.5, 2.0),
    ([float(v) for v in range(1, 11)], 0.9, pytest.approx(9.1)), ([1.0, 5.0], 1.0, 5.0),
])
def test_quantiles_are_linear_between_ranks(values: list[float], q: float,
                                            expected: float | None) -> None:
    assert quantile(values, q) == expected


@pytest.mark.parametrize(("seconds", "text"), [
    (45.4, "45 s"), (190.0, "3 min 10 s"), (360.0, "6 min"), (7500.0, "2 h 5 min"),
    (3600.0, "1 h"), (WINDOW_S, "30 days"), (86400.0, "1 day"), (90000.0, "25 h"),
])
def test_spans_read_as_a_person_would_say_them(seconds: float, text: str) -> None:
    assert span(seconds) == text


def test_describe_says_the_rate_and_the_times() -> None:
    f = LaunchFigures(launches=12, enrolled=10, failed=2, in_flight=0, withdrawn=0,
                      success_rate=10 / 12, ready_median_s=190.0, ready_p90_s=360.0)
    assert describe(f) == ("12 launches in 30 days: 10 ready (83%), 2 failed, "
                           "median 3 min 10 s to enrol (p90 6 min)")


def test_describe_says_what_is_on_the_way_and_when_there_was_nothing() -> None:
    empty = LaunchFigures(0, 0, 0, 0, 0, None, None, None)
    assert describe(empty) == "no launch in 30 days"
    assert describe(empty, window_s=86400.0) == "no launch in 1 day"
    waiting = LaunchFigures(1, 0, 0, 1, 0, None, None, None)
    assert describe(waiting) == "1 launch in 30 days: 1 on the way"
    mixed = LaunchFigures(3, 0, 1, 1, 1, 0.0, None, None)
    assert describe(mixed) == ("3 launches in 30 days: 0 ready (0%), 1 failed, 1 on the way, "
                               "1 withdrawn")
