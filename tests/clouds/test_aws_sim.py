"""The AWS provider against a simulated account (moto over HTTP) behind the fault proxy: the
calls are real boto3 calls, the errors real EC2 error responses."""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from faultproxy import Rule, load
from sim import Sim

from bourse.clouds.aws import DLAMI_PARAMETER, AwsProvider
from bourse.clouds.base import CloudError, LaunchSpec
from bourse.core.launch import Failure

REGION = "us-east-1"
IMAGE = "ami-12c6146b"  # one of moto's images


@pytest.fixture
def spec() -> LaunchSpec:
    """A launch of its own exchange and token (the simulated account outlives a test)."""
    mine = uuid.uuid4().hex[:12]
    return LaunchSpec(launch_id="l-1", exchange_id=f"x-{mine}", node_id="n-1",
                      project_id="p-1", region=REGION, instance_type="p4d.24xlarge",
                      user_data="#!/bin/sh\necho up\n", client_token=f"tok-{mine}",
                      zone="use1-az1", job_id="j-1")


def another(spec: LaunchSpec, **changes: Any) -> LaunchSpec:
    """A second launch of the same exchange (its own token)."""
    return replace(spec, client_token=f"{spec.client_token}-{uuid.uuid4().hex[:6]}", **changes)


def provider(sim: Sim, **kwargs: Any) -> AwsProvider:
    kwargs.setdefault("image", IMAGE)
    return AwsProvider([REGION], endpoint_url=sim.url, session=sim.session(), **kwargs)


def moto_zone_name(sim: Sim, zone_id: str) -> str:
    ec2: Any = sim.client("ec2")
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    return next(z["ZoneName"] for z in zones if z["ZoneId"] == zone_id)


def test_launch_lists_and_terminates(sim: Sim, spec: LaunchSpec) -> None:
    aws = provider(sim)
    made = aws.launch(spec)
    assert (made.region, made.instance_type, made.zone, made.spot) == (
        REGION, "p4d.24xlarge", "use1-az1", False)
    assert made.alive and made.launch_id == "l-1"
    assert made.tags["Name"] == "bourse-n-1"
    listed = aws.tagged(spec.exchange_id, [REGION])
    assert [i.id for i in listed] == [made.id]
    assert listed[0].tags["bourse:job"] == "j-1" and listed[0].launched_at is not None
    aws.terminate(REGION, [made.id])
    assert aws.tagged(spec.exchange_id, [REGION]) == []


def test_tagged_sees_only_its_exchange(sim: Sim, spec: LaunchSpec) -> None:
    aws = provider(sim)
    mine = aws.launch(spec)
    aws.launch(another(spec, exchange_id=f"{spec.exchange_id}-other"))
    ec2: Any = sim.client("ec2")
    ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, InstanceType="t3.micro")
    assert [i.id for i in aws.tagged(spec.exchange_id, [REGION])] == [mine.id]


def test_the_same_token_twice_makes_one_instance(sim: Sim, spec: LaunchSpec) -> None:
    aws = provider(sim)
    first = aws.launch(spec)
    again = provider(sim).launch(spec)  # another provider: a coordinator after a restart
    assert again.id == first.id
    assert len(aws.tagged(spec.exchange_id, [REGION])) == 1
    assert sim.proxy.count("RunInstances") == 1


def test_zone_id_is_sent_as_this_accounts_zone_name(sim: Sim, spec: LaunchSpec) -> None:
    provider(sim).launch(replace(spec, zone="use1-az4"))
    sent = [c for c in sim.proxy.calls if c.action == "RunInstances"]
    assert [c.zone for c in sent] == [moto_zone_name(sim, "use1-az4")]


def test_a_zone_the_account_lacks_is_unsupported_and_nothing_is_sent(
        sim: Sim, spec: LaunchSpec) -> None:
    with pytest.raises(CloudError) as caught:
        provider(sim).launch(replace(spec, zone="use1-az9"))
    assert caught.value.failure is Failure.UNSUPPORTED
    assert "use1-az9" in caught.value.message
    assert sim.proxy.count("RunInstances") == 0


def test_zone_names_are_read_once_per_region(sim: Sim, spec: LaunchSpec) -> None:
    aws = provider(sim)
    aws.launch(spec)
    aws.launch(another(spec, zone="use1-az2"))
    assert sim.proxy.count("DescribeAvailabilityZones") == 1


def test_spot_launch_lists_as_spot_with_imdsv2(sim: Sim, spec: LaunchSpec) -> None:
    aws = provider(sim)
    made = aws.launch(replace(spec, spot=True, max_price=9.5))
    assert made.spot
    assert [i.spot for i in aws.tagged(spec.exchange_id, [REGION])] == [True]
    sent = next(c for c in sim.proxy.calls if c.action == "RunInstances")
    assert sent.market == "spot"
    assert sent.params["InstanceMarketOptions.SpotOptions.MaxPrice"] == "9.5"
    assert sent.params["MetadataOptions.HttpTokens"] == "required"


def test_disk_resizes_the_root_volume(sim: Sim, spec: LaunchSpec) -> None:
    provider(sim).launch(replace(spec, disk_gib=300))
    sent = next(c for c in sim.proxy.calls if c.action == "RunInstances")
    assert sent.params["BlockDeviceMapping.1.Ebs.VolumeSize"] == "300"
    ec2: Any = sim.client("ec2")
    root = ec2.describe_images(ImageIds=[IMAGE])["Images"][0]["RootDeviceName"]
    assert sent.params["BlockDeviceMapping.1.DeviceName"] == root


def test_the_default_image_is_the_regions_deep_learning_ami(sim: Sim, spec: LaunchSpec) -> None:
    with sim.public_parameter(REGION, DLAMI_PARAMETER.format(arch="x86_64"), IMAGE):
        provider(sim, image=None).launch(spec)
    sent = next(c for c in sim.proxy.calls if c.action == "RunInstances")
    assert sent.params["ImageId"] == IMAGE


def test_an_arm_type_gets_the_arm_image(sim: Sim, spec: LaunchSpec) -> None:
    ec2: Any = sim.client("ec2")
    arm = ec2.describe_images(Filters=[{"Name": "architecture", "Values": ["arm64"]}])[
        "Images"][0]["ImageId"]
    with sim.public_parameter(REGION, DLAMI_PARAMETER.format(arch="arm64"), arm), \
            sim.public_parameter(REGION, DLAMI_PARAMETER.format(arch="x86_64"), IMAGE):
        provider(sim, image=None).launch(replace(spec, instance_type="g5g.xlarge", zone=None))
    sent = next(c for c in sim.proxy.calls if c.action == "RunInstances")
    assert sent.params["ImageId"] == arm


def test_no_image_anywhere_is_a_config_error(sim: Sim, spec: LaunchSpec) -> None:
    with pytest.raises(CloudError) as caught:
        provider(sim, image=None).launch(spec)
    assert caught.value.failure is Failure.CONFIG
    assert DLAMI_PARAMETER.format(arch="x86_64") in caught.value.message
    assert sim.proxy.count("RunInstances") == 0


def test_terminate_skips_unknown_and_repeated_ids(sim: Sim, spec: LaunchSpec) -> None:
    aws = provider(sim)
    one = aws.launch(spec)
    two = aws.launch(another(spec))
    aws.terminate(REGION, [one.id, "i-0123456789abcdef0", one.id, two.id])
    assert aws.tagged(spec.exchange_id, [REGION]) == []
    aws.terminate(REGION, ["i-0123456789abcdef0"])
    aws.terminate(REGION, [])


def test_user_data_stays_out_of_botocores_debug_log(sim: Sim, spec: LaunchSpec,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    secret = "enrol-9f2c1d7e5b"
    with caplog.at_level(logging.DEBUG, logger="botocore"):
        provider(sim).launch(replace(spec, user_data=f"#!/bin/sh\nBOURSE_TOKEN={secret}\n"))
    assert "Making request for OperationModel(name=RunInstances)" in caplog.text
    encoded = base64.b64encode(f"#!/bin/sh\nBOURSE_TOKEN={secret}\n".encode()).decode()
    assert secret not in caplog.text and encoded not in caplog.text


LAUNCH_ERRORS = load("launch_errors.json")


def _matching(rule: Rule, sim: Sim, spec: LaunchSpec) -> LaunchSpec:
    spec = replace(spec, spot=rule.market == "spot",
                   instance_type=rule.instance_type or spec.instance_type)
    if rule.zone:
        spec = replace(spec, zone=provider(sim).zone_names(REGION)[rule.zone])
    return spec


@pytest.mark.parametrize("rule", LAUNCH_ERRORS, ids=[r.name for r in LAUNCH_ERRORS])
def test_injected_errors_raise_their_class_with_the_clouds_words(
        sim: Sim, spec: LaunchSpec, rule: Rule) -> None:
    sim.proxy.reset([rule])
    launch = _matching(rule, sim, spec)
    with pytest.raises(CloudError) as caught:
        provider(sim).launch(launch)
    error = caught.value
    assert error.failure is Failure(rule.extra["expect"])
    assert (error.code, error.message) == (rule.error["code"], rule.error["message"])
    assert error.where == f"{REGION}/{launch.zone}/p4d.24xlarge"
    assert error.quota == rule.extra.get("quota")


@pytest.mark.parametrize("name", ["capacity", "throttled", "internal"])
def test_one_request_per_launch_even_for_errors_botocore_retries(
        sim: Sim, spec: LaunchSpec, name: str) -> None:
    rule = next(r for r in LAUNCH_ERRORS if r.name == name)
    sim.proxy.reset([rule])
    with pytest.raises(CloudError):
        provider(sim).launch(_matching(rule, sim, spec))
    assert sim.proxy.count("RunInstances") == 1


def test_a_fault_for_one_zone_leaves_the_others(sim: Sim, spec: LaunchSpec) -> None:
    capacity = next(r for r in LAUNCH_ERRORS if r.name == "capacity")
    sim.proxy.reset([capacity])
    aws = provider(sim)
    with pytest.raises(CloudError):
        aws.launch(_matching(capacity, sim, spec))
    other = next(z for n, z in aws.zone_names(REGION).items() if n != capacity.zone)
    assert aws.launch(another(spec, zone=other)).zone == other


def test_times_limits_a_fault(sim: Sim, spec: LaunchSpec) -> None:
    sim.proxy.reset([Rule(action="RunInstances", times=1, error={
        "code": "RequestLimitExceeded", "message": "Request limit exceeded.", "status": 503})])
    aws = provider(sim)
    with pytest.raises(CloudError) as caught:
        aws.launch(spec)
    assert caught.value.failure is Failure.THROTTLE
    assert aws.launch(spec).alive  # the same place, the same token, retried


def test_an_unreachable_endpoint_is_throttle_not_failover(spec: LaunchSpec) -> None:
    aws = AwsProvider([REGION], endpoint_url="http://127.0.0.1:9", image=IMAGE,
                      session=boto3.session.Session(aws_access_key_id="a",
                                                    aws_secret_access_key="b"))
    with pytest.raises(CloudError) as caught:
        aws.launch(spec)
    assert caught.value.failure is Failure.THROTTLE
    assert caught.value.code == "EndpointConnectionError"


def test_tagged_and_terminate_errors_are_cloud_errors(sim: Sim, spec: LaunchSpec) -> None:
    sim.proxy.reset([Rule(action="DescribeInstances", error={
        "code": "UnauthorizedOperation", "message": "You are not authorized to perform this "
        "operation.", "status": 403})])
    aws = provider(sim)
    with pytest.raises(CloudError) as caught:
        aws.tagged(spec.exchange_id, [REGION])
    assert (caught.value.failure, caught.value.where) == (Failure.AUTH, REGION)
    sim.proxy.reset([Rule(action="TerminateInstances", error={
        "code": "RequestLimitExceeded", "message": "Request limit exceeded.", "status": 503})])
    with pytest.raises(CloudError) as caught:
        aws.terminate(REGION, ["i-0123456789abcdef0"])
    assert caught.value.failure is Failure.THROTTLE


# check()

def instances(sim: Sim) -> int:
    ec2: Any = sim.client("ec2")
    return sum(len(r["Instances"]) for r in ec2.describe_instances()["Reservations"])


def test_check_with_working_credentials(sim: Sim) -> None:
    before = instances(sim)
    check = provider(sim).check()
    assert (check.cloud, check.enabled, check.regions) == ("aws", True, (REGION,))
    assert check.identity and check.identity.startswith("arn:aws:")
    dry = [c for c in sim.proxy.calls if c.action == "RunInstances"]
    assert [c.params["DryRun"] for c in dry] == ["true"]
    assert instances(sim) == before


def test_check_without_credentials(sim: Sim, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    check = AwsProvider([REGION], endpoint_url=sim.url, image=IMAGE).check()
    assert not check.enabled
    assert check.reason == ("no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_PROFILE or "
                            "run on an instance role)")
    assert sim.proxy.calls == []


def test_check_names_the_denied_permission(sim: Sim) -> None:
    denied = next(r for r in LAUNCH_ERRORS if r.name == "denied")
    sim.proxy.reset([denied])
    check = provider(sim).check()
    assert not check.enabled and check.identity
    assert check.reason == f"ec2:RunInstances denied (UnauthorizedOperation): " \
        f"{denied.error['message']}"


def test_check_with_rejected_credentials(sim: Sim) -> None:
    sim.proxy.reset([Rule(action="GetCallerIdentity", error={
        "code": "InvalidClientTokenId", "status": 403,
        "message": "The security token included in the request is invalid."})])
    check = provider(sim).check()
    assert not check.enabled and check.identity is None
    assert check.reason == ("sts:GetCallerIdentity denied (InvalidClientTokenId): The security "
                            "token included in the request is invalid.")


def test_check_leaves_out_a_region_that_does_not_answer(sim: Sim) -> None:
    sim.proxy.reset([Rule(action="DescribeAvailabilityZones", region="us-west-2", error={
        "code": "AuthFailure", "status": 401,
        "message": "AWS was not able to validate the provided access credentials"})])
    aws = AwsProvider([REGION, "us-west-2"], endpoint_url=sim.url, session=sim.session(),
                      image=IMAGE)
    check = aws.check()
    assert check.enabled and check.regions == (REGION,)
    assert check.reason == ("us-west-2: AuthFailure: AWS was not able to validate the "
                            "provided access credentials")


def test_gangs_share_one_security_group_and_have_a_placement_group_each(
        sim: Sim, spec: LaunchSpec) -> None:
    aws, ec2 = provider(sim), sim.client("ec2")
    first = aws.place_gang(spec.exchange_id, "g-1", REGION, "use1-az1", "p4d.24xlarge")
    second = provider(sim).place_gang(spec.exchange_id, "g-2", REGION, "use1-az1",
                                      "p4d.24xlarge")  # another coordinator: found again
    assert (first.placement_group, second.placement_group) == ("bourse-g-1", "bourse-g-2")
    assert first.security_groups == second.security_groups and first.note is None
    named = ec2.describe_security_groups(Filters=[  # type: ignore[attr-defined]
        {"Name": "group-name", "Values": [f"bourse-gang-{spec.exchange_id}"]}])
    assert [g["GroupId"] for g in named["SecurityGroups"]] == list(first.security_groups)
    small = aws.place_gang(spec.exchange_id, "g-3", REGION, "use1-az1", "t3.micro")
    assert small.placement_group is None and small.security_groups == first.security_groups
    assert small.note is not None and "t3.micro does not support cluster placement" in small.note
    member = aws.launch(another(spec, gang="g-1", placement_group="bourse-g-1",
                                security_groups=first.security_groups))
    assert sorted(aws.gang_groups(spec.exchange_id, [REGION])) == [(REGION, "g-1"),
                                                                   (REGION, "g-2")]
    assert aws.release_gang(REGION, "g-1") is False  # EC2 refuses while an instance is in it
    aws.terminate(REGION, [member.id])
    assert aws.release_gang(REGION, "g-1") is True
    assert aws.release_gang(REGION, "g-1") is True  # gone already: not an error
    assert aws.gang_groups(spec.exchange_id, [REGION]) == [(REGION, "g-2")]


def test_a_permission_missing_for_gangs_fails_the_gang_not_the_cloud(sim: Sim,
                                                                     spec: LaunchSpec) -> None:
    sim.proxy.reset([Rule(action="CreatePlacementGroup", error={
        "code": "UnauthorizedOperation", "status": 403,
        "message": "You are not authorized to perform this operation."})])
    with pytest.raises(CloudError) as refused:
        provider(sim).place_gang(spec.exchange_id, "g-9", REGION, "use1-az1", "p4d.24xlarge")
    assert refused.value.failure is Failure.CONFIG  # one-node launches go on
    assert refused.value.code == "UnauthorizedOperation"
    assert "ec2:CreatePlacementGroup" in refused.value.message
