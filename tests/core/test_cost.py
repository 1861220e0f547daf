"""Attempt billing: price x time it ran, nothing before it started."""

from __future__ import annotations

import pytest

from bourse.core.cost import attempt_cost, billed_seconds, on_demand_rate, saving, total_cost


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


@pytest.mark.parametrize(("price", "listed", "spot", "rate"), [
    (0.04, 0.08, False, 0.04),  # on demand: what it paid, whatever was recorded beside it
    (0.04, None, None, 0.04),  # placed before spot attempts were recorded
    (0.01, 0.04, True, 0.04),  # spot: the list price of the same share of its node
    (0.01, None, True, None),
])
def test_the_on_demand_rate_of_an_attempt(price: float, listed: float | None,
                                          spot: bool | None, rate: float | None) -> None:
    assert on_demand_rate(price, listed, spot) == rate


@pytest.mark.parametrize(("spot_cost", "on_demand", "saved"), [
    (0.0, None, None), (0.0, 0.0, None), (0.25, 1.0, 0.75), (1.5, 1.0, -0.5)])
def test_a_saving_is_spot_work_against_its_on_demand_price(
        spot_cost: float, on_demand: float | None, saved: float | None) -> None:
    assert saving(spot_cost, on_demand) == (None if saved is None else pytest.approx(saved))
