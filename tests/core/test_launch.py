"""``core.launch``: what each failure class blocks, for how long, what a block covers, the
tries table and the spending caps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bourse.core.launch import (
    CAPACITY_TTL_S,
    QUOTA_TTL_S,
    Failure,
    LaunchBlock,
    Try,
    blocked_by,
    blocks_for,
    family,
    over_cap,
    table,
)
from bourse.core.offer import Offer

P4D = Offer(id="aws/p4d", provider="aws", instance_type="p4d.24xlarge", region="us-east-1",
            zone="use1-az1", gpu="a100-40gb", gpu_count=8, gpu_memory_mib=40960, cpus=96,
            memory_gib=1152, price=32.77, spot_price=12.4)


@pytest.mark.parametrize(("failure", "key", "ttl"), [
    (Failure.CAPACITY, "zone:aws/us-east-1/use1-az1/p4d.24xlarge/spot", CAPACITY_TTL_S),
    (Failure.QUOTA, "family:aws/us-east-1/p4d", QUOTA_TTL_S),
    (Failure.UNSUPPORTED, "type:aws/us-east-1/use1-az1/p4d.24xlarge", 86400.0),
    (Failure.UNKNOWN, "zone:aws/us-east-1/use1-az1/p4d.24xlarge/spot", 300.0),
    (Failure.CONFIG, None, None), (Failure.AUTH, None, None), (Failure.THROTTLE, None, None)])
def test_each_class_blocks_its_scope(failure: Failure, key: str | None,
                                     ttl: float | None) -> None:
    found = blocks_for(failure, P4D, True, 100.0, "why")
    if key is None:
        assert found == [] and not failure.fails_over
        return
    assert found == [LaunchBlock(key, 100.0 + (ttl or 0), "why")] and failure.fails_over


def test_a_block_covers_what_it_names_and_expires() -> None:
    capacity = blocks_for(Failure.CAPACITY, P4D, True, 0.0, "short")
    assert blocked_by(P4D, True, capacity, 1.0) is not None
    assert blocked_by(P4D, False, capacity, 1.0) is None  # on demand is another market
    assert blocked_by(replace(P4D, zone="use1-az2"), True, capacity, 1.0) is None
    assert blocked_by(P4D, True, capacity, CAPACITY_TTL_S + 1) is None
    quota = blocks_for(Failure.QUOTA, P4D, False, 0.0, "vcpus")
    sibling = replace(P4D, instance_type="p4de.24xlarge")
    assert blocked_by(replace(P4D, instance_type="p4d.12xlarge", zone="use1-az6"), True,
                      quota, 1.0) is not None  # the whole family, any zone, any market
    assert blocked_by(sibling, False, quota, 1.0) is None
    assert family("p4d.24xlarge") == "p4d" and family("trn1") == "trn1"


def test_a_region_wide_block_covers_each_zone() -> None:
    anywhere = blocks_for(Failure.CAPACITY, replace(P4D, zone=None), False, 0.0, "r")
    assert blocked_by(P4D, False, anywhere, 1.0) is not None


def test_the_table_aligns_every_try() -> None:
    rows = table([Try("aws", "us-east-1", "use1-az1", "p4d.24xlarge", True, "capacity",
                      "InsufficientInstanceCapacity: none"),
                  Try("aws", "us-west-2", None, "p4d.24xlarge", False, "launched", "i-1")])
    first, second = rows.splitlines()
    assert first.index("spot") == second.index("on-demand")
    assert first.index("capacity") == second.index("launched")
    assert table([]) == "no launchable offer was tried"


@pytest.mark.parametrize("case", [
    (10.0, 0.0, 0.0, None, None, None),
    (10.0, 5.0, 0.0, 15.0, None, None),  # exactly at the cap is allowed
    (10.0, 5.1, 0.0, 15.0, None, "cap of $15.00/h: launched nodes run at $5.10/h"),
    (10.0, 0.0, 95.0, None, 100.0, "cap of $100.00/day: $95.00 spent today"),
    (1.0, 0.0, 0.0, 0.0, None, "cap of $0.00/h")])
def test_caps_refuse_with_the_figures(
        case: tuple[float, float, float, float | None, float | None, str | None]) -> None:
    price, hourly, spent, cap_hour, cap_day, says = case
    found = over_cap(price, hourly, spent, cap_hour, cap_day)
    assert (found is None) if says is None else (found is not None and says in found)


def test_a_gangs_members_count_together_against_the_cap() -> None:
    assert over_cap(10.0, 0.0, 0.0, 15.0, None) is None
    found = over_cap(10.0, 0.0, 0.0, 15.0, None, nodes=2)
    assert found is not None and "these 2 cost $20.00/h" in found
    daily = over_cap(10.0, 0.0, 85.0, None, 100.0, nodes=2)
    assert daily is not None and "these 2 nodes cost $20.00/h" in daily
