"""The RunInstances request a launch spec makes, and how responses' timestamps are read (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bourse.clouds.aws_request import parse_timestamp, run_request
from bourse.clouds.base import LaunchSpec

SPEC = LaunchSpec(launch_id="l-1", exchange_id="x-1", node_id="n-1", project_id="p-1",
                  region="us-east-1", instance_type="p4d.24xlarge", user_data="#!/bin/sh\n",
                  client_token="tok-1", zone="use1-az1", job_id="j-1")


def test_on_demand_request() -> None:
    request = run_request(SPEC, image="ami-1", zone_name="us-east-1b", root_device=None)
    assert (request["MinCount"], request["MaxCount"]) == (1, 1)
    assert request["ClientToken"] == "tok-1"
    assert (request["InstanceType"], request["ImageId"]) == ("p4d.24xlarge", "ami-1")
    assert request["Placement"] == {"AvailabilityZone": "us-east-1b"}
    assert request["MetadataOptions"]["HttpTokens"] == "required"
    assert request["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert "InstanceMarketOptions" not in request
    assert "BlockDeviceMappings" not in request


def test_tags_on_instance_and_volumes() -> None:
    specs = run_request(SPEC, image="ami-1", zone_name=None, root_device=None)[
        "TagSpecifications"]
    assert [s["ResourceType"] for s in specs] == ["instance", "volume"]
    tags = {t["Key"]: t["Value"] for t in specs[0]["Tags"]}
    assert tags == {"bourse:exchange": "x-1", "bourse:launch": "l-1", "bourse:node": "n-1",
                    "bourse:project": "p-1", "bourse:job": "j-1", "Name": "bourse-n-1"}


def test_spot_is_one_time_and_terminates_with_the_bid() -> None:
    spot = replace(SPEC, spot=True, max_price=12.5)
    options = run_request(spot, image="ami-1", zone_name=None, root_device=None)[
        "InstanceMarketOptions"]
    assert options == {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate",
        "MaxPrice": "12.5"}}


def test_spot_without_a_bid_leaves_the_on_demand_price_as_the_cap() -> None:
    options = run_request(replace(SPEC, spot=True), image="ami-1", zone_name=None,
                          root_device=None)["InstanceMarketOptions"]
    assert "MaxPrice" not in options.get("SpotOptions", {})


def test_a_small_bid_is_written_without_an_exponent() -> None:
    options = run_request(replace(SPEC, spot=True, max_price=0.00005), image="ami-1",
                          zone_name=None, root_device=None)["InstanceMarketOptions"]
    assert options.get("SpotOptions", {}).get("MaxPrice") == "0.00005"


def test_disk_resizes_the_images_root_device() -> None:
    request = run_request(replace(SPEC, disk_gib=500), image="ami-1", zone_name=None,
                          root_device="/dev/sda1")
    assert request["BlockDeviceMappings"] == [{"DeviceName": "/dev/sda1", "Ebs": {
        "VolumeSize": 500, "VolumeType": "gp3", "DeleteOnTermination": True}}]


def test_no_zone_lets_ec2_choose() -> None:
    request = run_request(replace(SPEC, zone=None), image="ami-1", zone_name=None,
                          root_device=None)
    assert "Placement" not in request


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-02T01:02:03.000Z", datetime(2026, 12, 2, 1, 2, 3, tzinfo=UTC)),
    ("2026-12-02T01:02:03Z", datetime(2026, 12, 2, 1, 2, 3, tzinfo=UTC)),
    ("2026-12-02T01:02:03+00:00", datetime(2026, 12, 2, 1, 2, 3, tzinfo=UTC)),
    ("2026-12-02T01:02:03", datetime(2026, 12, 2, 1, 2, 3, tzinfo=UTC)),
    ("1796173416", datetime.fromtimestamp(1796173416, UTC)),  # epoch: botocore's parser
    (1796173416.5, datetime.fromtimestamp(1796173416.5, UTC)),  # SSM's JSON: a number
])
def test_timestamps_are_read_fast_and_as_botocore_would(text: object,
                                                         expected: datetime) -> None:
    assert parse_timestamp(text) == expected


def test_a_gang_member_goes_into_its_placement_group_with_its_security_group() -> None:
    member = replace(SPEC, gang="g-1", placement_group="bourse-g-1",
                     security_groups=("sg-1",))
    request = run_request(member, image="ami-1", zone_name="us-east-1b", root_device=None)
    assert request["Placement"] == {"AvailabilityZone": "us-east-1b", "GroupName": "bourse-g-1"}
    assert request["SecurityGroupIds"] == ["sg-1"]
    tags = {t["Key"]: t["Value"] for t in request["TagSpecifications"][0]["Tags"]}
    assert tags["bourse:gang"] == "g-1"
    alone = run_request(SPEC, image="ami-1", zone_name="us-east-1b", root_device=None)
    assert "SecurityGroupIds" not in alone  # the default VPC's default group
