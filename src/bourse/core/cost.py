"""What an attempt costs: the price of the offer it was placed on, for the time it ran.

Pure: times are UNIX seconds, prices dollars per hour. An attempt is billed from the moment
its process started (``started_at``) to the moment it ended — or to ``now`` while it runs.
An attempt that never started (lost before its node acknowledged it) costs nothing.
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0


def billed_seconds(started_at: float | None, ended_at: float | None, now: float) -> float:
    """The seconds an attempt is billed for; never negative."""
    if started_at is None:
        return 0.0
    end = now if ended_at is None else ended_at
    return max(0.0, end - started_at)


def attempt_cost(price_per_hour: float | None, started_at: float | None,
                 ended_at: float | None, now: float) -> float | None:
    """Dollars for one attempt, or None when its price is unknown (placed before prices
    were recorded)."""
    if price_per_hour is None:
        return None
    return price_per_hour * billed_seconds(started_at, ended_at, now) / SECONDS_PER_HOUR


def total_cost(costs: list[float | None]) -> float | None:
    """The sum of the known costs; None when none is known."""
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def lost_work(started_at: float | None, stopped_at: float | None,
              checkpoint_at: float | None, notice_at: float | None = None) -> float | None:
    """Seconds of an interrupted attempt's work that no checkpoint kept: from its last complete
    checkpoint written during the attempt (or, without one, from its start) to when its work
    stopped (its process's exit as its node saw it, else the attempt's end). A checkpoint
    completed after a notice to stop kept everything: what follows it is the shutdown the
    notice asked for. None for an attempt that never started or has not ended."""
    if started_at is None or stopped_at is None:
        return None
    if notice_at is not None and checkpoint_at is not None and checkpoint_at >= notice_at:
        return 0.0
    kept_until = started_at if checkpoint_at is None else max(started_at, checkpoint_at)
    return max(0.0, stopped_at - kept_until)


def on_demand_cost(list_price: float | None, billed: float, lost: float | None) -> float | None:
    """What an attempt's useful work (billed time less lost work) costs at the on-demand list
    price of the same hardware: what the run would have cost without interruptions."""
    if list_price is None:
        return None
    return list_price * max(0.0, billed - (lost or 0.0)) / SECONDS_PER_HOUR


def on_demand_rate(price: float | None, list_price: float | None,
                   spot: bool | None) -> float | None:
    """An attempt's capacity at its on-demand price per hour: what an on-demand attempt paid
    is that price; a spot attempt's is the list price of the same share of its node. (An
    on-demand attempt's recorded list price is not used: placement once recorded the whole
    node's there, which made a part of an on-demand node look like a saving.)"""
    return list_price if spot else price


def saving(spot_cost: float, spot_on_demand: float | None) -> float | None:
    """The share of the on-demand price that spot capacity saved (negative: it cost more);
    None without spot work to compare."""
    if not spot_on_demand:
        return None
    return 1.0 - spot_cost / spot_on_demand
