"""Catalogue offers refreshed from the cloud's spot prices and zone offerings: the pure part
as a table, then against the simulated account, and the fallback when its calls fail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from faultproxy import Rule
from sim import Sim

from bourse.clouds.aws import AwsProvider
from bourse.clouds.refresh import SpotPrice, apply, latest, refresh
from bourse.core.offer import Offer

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
REGION = "us-east-1"


def offer(instance_type: str = "p4d.24xlarge", zone: str | None = "use1-az1",
          spot: float | None = 12.0, provider: str = "aws", region: str = REGION) -> Offer:
    return Offer(id=f"{provider}/{instance_type}/{region}/{zone}", provider=provider,
                 instance_type=instance_type, region=region, gpu="a100-40gb", gpu_count=8,
                 gpu_memory_mib=40960, cpus=96, memory_gib=1152, price=32.77,
                 spot_price=spot, zone=zone)


def price(zone: str, value: float, hours_ago: float = 1,
          instance_type: str = "p4d.24xlarge") -> SpotPrice:
    return SpotPrice(instance_type, zone, value, NOW - timedelta(hours=hours_ago))


def test_latest_keeps_the_newest_price_of_each_type_and_zone() -> None:
    newest = latest([price("use1-az1", 9.0, 3), price("use1-az1", 11.0, 1),
                     price("use1-az2", 8.0, 2)])
    assert {k: p.price for k, p in newest.items()} == {
        ("p4d.24xlarge", "use1-az1"): 11.0, ("p4d.24xlarge", "use1-az2"): 8.0}


def test_apply_updates_spot_prices_and_drops_what_a_zone_no_longer_offers() -> None:
    offers = [offer(zone="use1-az1"), offer(zone="use1-az2"), offer(zone="use1-az3")]
    offered = {("p4d.24xlarge", "use1-az1"), ("p4d.24xlarge", "use1-az2")}
    out = apply(offers, [price("use1-az1", 10.5)], offered)
    assert [(o.zone, o.spot_price) for o in out] == [("use1-az1", 10.5), ("use1-az2", 12.0)]
    assert out[0].price == 32.77  # on-demand prices stay the catalogue's


def test_apply_prices_a_zoneless_offer_at_its_cheapest_zone() -> None:
    offered = {("p4d.24xlarge", "use1-az1"), ("p4d.24xlarge", "use1-az2")}
    out = apply([offer(zone=None), offer("g5.xlarge", zone=None)],
                [price("use1-az1", 10.5), price("use1-az2", 9.5)], offered)
    assert [(o.instance_type, o.spot_price) for o in out] == [("p4d.24xlarge", 9.5)]


def test_refresh_against_the_simulated_account(sim: Sim) -> None:
    aws = AwsProvider([REGION], endpoint_url=sim.url, session=sim.session())
    ec2: Any = sim.client("ec2")
    served = ec2.describe_spot_price_history(InstanceTypes=["p4d.24xlarge"])[
        "SpotPriceHistory"]
    zones = {z["ZoneName"]: z["ZoneId"]
             for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    expected = {zones[p["AvailabilityZone"]]: float(p["SpotPrice"]) for p in served}
    offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone-id",
        Filters=[{"Name": "instance-type", "Values": ["p4d.24xlarge"]}])[
            "InstanceTypeOfferings"]}
    lacking = next(z for z in zones.values() if z not in offered)
    catalogue = [offer(zone=z) for z in sorted(offered)] + [offer(zone=lacking),
                                                            offer(provider="gcp")]
    result = refresh(aws, catalogue, NOW)
    mine = [o for o in result.offers if o.provider == "aws"]
    assert {o.zone: o.spot_price for o in mine} == {z: expected[z] for z in offered}
    assert [o.provider for o in result.offers].count("gcp") == 1
    assert (result.fetched_at, dict(result.stale)) == (NOW, {})
    assert result.age_s(NOW + timedelta(minutes=5)) == 300


def test_refresh_falls_back_to_the_catalogue_when_the_api_fails(sim: Sim) -> None:
    sim.proxy.reset([Rule(action="DescribeSpotPriceHistory", error={
        "code": "UnauthorizedOperation", "status": 403,
        "message": "You are not authorized to perform this operation."})])
    aws = AwsProvider([REGION], endpoint_url=sim.url, session=sim.session())
    catalogue = [offer(zone="use1-az1"), offer(zone="use1-az2")]
    result = refresh(aws, catalogue, NOW)
    assert list(result.offers) == catalogue
    assert result.fetched_at is None and result.age_s(NOW) is None
    assert dict(result.stale) == {
        REGION: "UnauthorizedOperation: You are not authorized to perform this operation."}


def test_one_failing_region_keeps_its_catalogue_offers_only(sim: Sim) -> None:
    sim.proxy.reset([Rule(action="DescribeInstanceTypeOfferings", region="us-west-2", error={
        "code": "RequestLimitExceeded", "status": 503, "message": "Request limit exceeded."})])
    aws = AwsProvider([REGION, "us-west-2"], endpoint_url=sim.url, session=sim.session())
    west = offer(region="us-west-2", zone="usw2-az1")
    result = refresh(aws, [offer(zone="use1-az1"), west], NOW)
    assert set(result.stale) == {"us-west-2"} and result.fetched_at == NOW
    assert west in result.offers  # as the catalogue has it
    east = next(o for o in result.offers if o.region == REGION)
    assert east.spot_price != 12.0  # the simulator's price
