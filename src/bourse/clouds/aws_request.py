"""The RunInstances request of a launch spec (pure), the fail-fast botocore config every
client uses, and the user data kept out of botocore's log."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from botocore.config import Config
from botocore.utils import parse_timestamp as botocore_timestamp

from bourse.clouds.base import LaunchSpec

if TYPE_CHECKING:
    from types_boto3_ec2.type_defs import (
        InstanceMarketOptionsRequestTypeDef,
        RunInstancesRequestTypeDef,
        TagSpecificationTypeDef,
        TagTypeDef,
    )


class _RedactUserData(logging.Filter):
    """botocore logs each request's parameters at DEBUG; a launch's user data carries the
    node's enrolment token."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], dict):
            body = args[1].get("body")
            if isinstance(body, dict) and "UserData" in body:
                record.args = (args[0], {**args[1], "body": {**body, "UserData": "[redacted]"}})
        return True


_REDACT = _RedactUserData()


def quiet_user_data() -> None:
    """Keep launches' user data out of botocore's DEBUG log (idempotent)."""
    logger = logging.getLogger("botocore.endpoint")
    if _REDACT not in logger.filters:
        logger.addFilter(_REDACT)


def fail_fast(connect_timeout: float = 5.0, read_timeout: float = 30.0) -> Config:
    """A botocore config that makes one attempt per call. (Its ``max_attempts`` counts
    retries, not attempts: ``max_attempts=1`` would send a failed launch twice.)"""
    return Config(retries={"total_max_attempts": 1, "mode": "standard"},
                  connect_timeout=connect_timeout, read_timeout=read_timeout)


def fast_timestamps(session: Any) -> None:
    """Parse the responses' timestamps with ``datetime.fromisoformat`` (EC2 sends ISO 8601)
    instead of botocore's dateutil parser, which is half of the CPU of reading a thousand
    instances; anything it cannot read goes to botocore's parser."""
    factory = session._session.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)


def parse_timestamp(value: Any) -> datetime:
    if not isinstance(value, str):  # the JSON protocols' epoch seconds
        return botocore_timestamp(value)
    try:
        found = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return botocore_timestamp(value)
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _price(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


def _market(spec: LaunchSpec) -> InstanceMarketOptionsRequestTypeDef:
    options: InstanceMarketOptionsRequestTypeDef = {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
    if spec.max_price is not None:
        options["SpotOptions"]["MaxPrice"] = _price(spec.max_price)
    return options


def _tag_specs(spec: LaunchSpec) -> list[TagSpecificationTypeDef]:
    tags: list[TagTypeDef] = [{"Key": k, "Value": v} for k, v in
                              {**spec.tags(), "Name": f"bourse-{spec.node_id}"}.items()]
    return [{"ResourceType": "instance", "Tags": tags}, {"ResourceType": "volume", "Tags": tags}]


def run_request(spec: LaunchSpec, *, image: str, zone_name: str | None,
                root_device: str | None) -> RunInstancesRequestTypeDef:
    """The RunInstances request of ``spec`` (pure). ``root_device``: the image's root device,
    resized to ``spec.disk_gib`` when both are set."""
    request: RunInstancesRequestTypeDef = {
        "MinCount": 1, "MaxCount": 1, "ClientToken": spec.client_token,
        "InstanceType": cast(Any, spec.instance_type), "ImageId": image,
        "UserData": spec.user_data, "TagSpecifications": _tag_specs(spec),
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        "InstanceInitiatedShutdownBehavior": "terminate"}
    if zone_name is not None:
        request["Placement"] = {"AvailabilityZone": zone_name}
    if spec.placement_group is not None:
        request["Placement"] = {**request.get("Placement", {}),
                                "GroupName": spec.placement_group}
    if spec.security_groups:  # in place of the default VPC's default group
        request["SecurityGroupIds"] = list(spec.security_groups)
    if spec.spot:
        request["InstanceMarketOptions"] = _market(spec)
    if spec.disk_gib is not None and root_device is not None:
        request["BlockDeviceMappings"] = [{"DeviceName": root_device, "Ebs": {
            "VolumeSize": spec.disk_gib, "VolumeType": "gp3", "DeleteOnTermination": True}}]
    return request
