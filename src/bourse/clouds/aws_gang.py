"""A gang's place on EC2: a cluster placement group per gang launch, and a security group per
exchange (and region) that lets its members reach each other.

The placement group (``bourse-<gang id>``, strategy ``cluster``, tagged with the exchange and
the gang) puts the members on one network spine of one zone; it is made only for types that
support cluster placement (``DescribeInstanceTypes``' ``PlacementGroupInfo``), and deleted by
the reconciler once its gang has no live launch (EC2 refuses while instances are in it). The
security group (``bourse-gang-<exchange id>``, in the region's default VPC) allows all
traffic from its own members and, as every new group, all outbound traffic; gang members get
it instead of the default group, so nothing outside the gang can reach them. It is made once
and found again by name.

Functions of an EC2 client; ``aws.AwsProvider`` turns their botocore errors into
``CloudError``s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from bourse.clouds.base import TAG_EXCHANGE, TAG_GANG, CloudError
from bourse.core.launch import Failure

if TYPE_CHECKING:
    from types_boto3_ec2 import EC2Client
    from types_boto3_ec2.type_defs import IpPermissionTypeDef, TagSpecificationTypeDef

PLACEMENT_PREFIX = "bourse-"
SECURITY_GROUP = "bourse-gang-{exchange}"
ALL_TRAFFIC = "-1"


def placement_group(gang: str) -> str:
    return f"{PLACEMENT_PREFIX}{gang}"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _tags(kind: str, tags: Mapping[str, str]) -> list[TagSpecificationTypeDef]:
    return [cast("TagSpecificationTypeDef", {
        "ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]})]


def supports_cluster(ec2: EC2Client, instance_type: str) -> bool:
    found = ec2.describe_instance_types(InstanceTypes=[cast(Any, instance_type)])
    info = found["InstanceTypes"][0].get("PlacementGroupInfo", {}) \
        if found["InstanceTypes"] else {}
    return "cluster" in info.get("SupportedStrategies", [])


def make_placement_group(ec2: EC2Client, exchange_id: str, gang: str) -> str:
    """The gang's cluster placement group, made (a second call finds it made)."""
    name = placement_group(gang)
    try:
        ec2.create_placement_group(GroupName=name, Strategy="cluster", TagSpecifications=_tags(
            "placement-group", {TAG_EXCHANGE: exchange_id, TAG_GANG: gang}))
    except ClientError as exc:
        if _code(exc) != "InvalidPlacementGroup.Duplicate":
            raise
    return name


def tagged_groups(ec2: EC2Client, exchange_id: str) -> list[str]:
    """The gang ids of the placement groups tagged with ``exchange_id``."""
    groups = ec2.describe_placement_groups(Filters=[
        {"Name": f"tag:{TAG_EXCHANGE}", "Values": [exchange_id]}])["PlacementGroups"]
    out = []
    for group in groups:
        tags = {t["Key"]: t["Value"] for t in group.get("Tags", [])}
        if tags.get(TAG_GANG) and group.get("State") not in ("deleting", "deleted"):
            out.append(tags[TAG_GANG])
    return out


def delete_placement_group(ec2: EC2Client, gang: str) -> bool:
    """True once the gang's group is gone; False while instances are still in it."""
    try:
        ec2.delete_placement_group(GroupName=placement_group(gang))
    except ClientError as exc:
        if _code(exc) == "InvalidPlacementGroup.InUse":
            return False
        if _code(exc) != "InvalidPlacementGroup.Unknown":
            raise
    return True


def default_vpc(ec2: EC2Client, region: str) -> str:
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise CloudError(Failure.CONFIG, "NoDefaultVpc",
                         f"{region} has no default VPC: gang members are launched into it "
                         "(create one with `aws ec2 create-default-vpc`)", where=region)
    return vpcs[0]["VpcId"]


def security_group(ec2: EC2Client, exchange_id: str, region: str) -> str:
    """The exchange's gang security group in the region's default VPC, made if missing, with
    its rule between members."""
    vpc = default_vpc(ec2, region)
    name = SECURITY_GROUP.format(exchange=exchange_id)
    found = _find_group(ec2, vpc, name)
    if found is None:
        found = _make_group(ec2, vpc, name, exchange_id)
    group_id = str(found["GroupId"])
    if not any(pair.get("GroupId") == group_id for rule in found.get("IpPermissions", [])
               for pair in rule.get("UserIdGroupPairs", [])):
        _allow_members(ec2, group_id)
    return group_id


def _find_group(ec2: EC2Client, vpc: str, name: str) -> Mapping[str, Any] | None:
    groups = ec2.describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [name]},
        {"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]
    return cast("Mapping[str, Any]", groups[0]) if groups else None


def _make_group(ec2: EC2Client, vpc: str, name: str, exchange_id: str) -> Mapping[str, Any]:
    try:
        made = ec2.create_security_group(
            GroupName=name, VpcId=vpc, Description="bourse: gang members reach each other",
            TagSpecifications=_tags("security-group", {TAG_EXCHANGE: exchange_id}))
    except ClientError as exc:  # another coordinator of the exchange made it meanwhile
        again = _find_group(ec2, vpc, name) if _code(exc) == "InvalidGroup.Duplicate" else None
        if again is None:
            raise
        return again
    return {"GroupId": made["GroupId"], "IpPermissions": []}


def _allow_members(ec2: EC2Client, group_id: str) -> None:
    rule = cast("IpPermissionTypeDef", {"IpProtocol": ALL_TRAFFIC,
                                        "UserIdGroupPairs": [{"GroupId": group_id}]})
    try:
        ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[rule])
    except ClientError as exc:
        if _code(exc) != "InvalidPermission.Duplicate":
            raise
