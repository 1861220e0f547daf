"""Attempt billing: price x time it ran, nothing before it started."""

from __future__ import annotations

import pytest

from bourse.core.cost import attempt_cost, billed_seconds, total_cost


def test_an_attempt_is_billed_for_the_time_it_ran() -> None:
    assert attempt_cost(3.6, started_at=100.0, ended_at=1100.0, now=5000.0) == pytest.approx(1.0)


def test_a_running_attempt_is_billed_until_now() -> None:
    assert attempt_cost(1.8, started_at=100.0, ended_at=None, now=2100.0) == pytest.approx(1.0)


def test_an_attempt_that_never_started_costs_nothing() -> None:
    assert attempt_cost(2.0, started_at=None, ended_at=500.0, now=600.0) == 0.0


def test_clock_skew_never_bills_negative_time() -> None:
    assert billed_seconds(started_at=200.0, ended_at=150.0, now=300.0) == 0.0


def test_an_unknown_price_is_unknown_not_free() -> None:
    assert attempt_cost(None, started_at=1.0, ended_at=2.0, now=3.0) is None
    assert total_cost([None, None]) is None
    assert total_cost([None, 0.5, 0.25]) == pytest.approx(0.75)
