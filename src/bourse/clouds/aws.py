"""AWS EC2 behind the provider seam, with boto3.

Credentials come from boto3's standard chain (environment, profile, SSO, instance role);
``AWS_ENDPOINT_URL`` (or ``endpoint_url``) points every client at another endpoint, which is
how the tests reach a simulator. The clients fail fast: one attempt per call, as botocore
would otherwise retry a capacity error three times in the same zone while the exchange could
be trying the next one; the exchange decides what to retry (``aws_errors``).

An instance is launched with its idempotency token. EC2 returns the instance a token already
made, but not forever (its tokens are kept for a limited time) and not in simulators, so the
token is looked up first (``client-token`` filter); a crash between the call and its commit
never makes a second instance. Instances require IMDSv2 (``HttpTokens=required``) and
terminate on shutdown; the zone ids of the catalogue (``use1-az1``, the same in every
account) are mapped to this account's zone names. A multi-node job's members go into a
cluster placement group of their own and a security group open between them (``aws_gang``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, cast

from botocore.exceptions import BotoCoreError, ClientError

from bourse.clouds import aws_gang
from bourse.clouds.aws_errors import cloud_error
from bourse.clouds.aws_request import fail_fast, fast_timestamps, quiet_user_data, run_request
from bourse.clouds.base import (
    TAG_EXCHANGE,
    CloudCheck,
    CloudError,
    GangPlace,
    Instance,
    LaunchSpec,
)
from bourse.clouds.refresh import SpotPrice, latest
from bourse.core.launch import Failure

if TYPE_CHECKING:
    import boto3
    from types_boto3_ec2 import EC2Client
    from types_boto3_ec2.type_defs import InstanceTypeDef
    from types_boto3_ssm import SSMClient
    from types_boto3_sts import STSClient

# The Deep Learning Base AMI (NVIDIA driver, CUDA, Docker and the NVIDIA container toolkit;
# Ubuntu 24.04, whose Python 3.12 runs the agent), by architecture, from AWS's public SSM
# parameters (docs.aws.amazon.com/dlami/latest/devguide/find-dlami-id.html).
DLAMI_PARAMETER = ("/aws/service/deeplearning/ami/{arch}/"
                   "base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id")
TERMINATE_BATCH = 500  # EC2 takes up to 1000 ids a call and recommends smaller batches
OFFERINGS_BATCH = 100  # instance types per filter of DescribeInstanceTypeOfferings
_NOT_TERMINATED = ["pending", "running", "shutting-down", "stopping", "stopped"]
_INSTANCE_ID = re.compile(r"i-[0-9a-f]+")
_EPOCH = datetime.fromtimestamp(0, UTC)
GANG_PERMISSIONS = ("ec2:DescribeVpcs, ec2:DescribeSecurityGroups, ec2:CreateSecurityGroup, "
                    "ec2:AuthorizeSecurityGroupIngress, ec2:DescribeInstanceTypes, "
                    "ec2:CreatePlacementGroup, ec2:DescribePlacementGroups and "
                    "ec2:DeletePlacementGroup")
_CHECK_TYPE: Final = "t3.micro"  # the dry-run launch of check(): any type the account may run


def _where(spec: LaunchSpec) -> str:
    return f"{spec.region}/{spec.zone or '*'}/{spec.instance_type}"


def _gang_error(error: CloudError) -> CloudError:
    if error.failure is not Failure.AUTH or error.code == "NoCredentialsError":
        return error
    return CloudError(Failure.CONFIG, error.code, f"{error.message} (a multi-node job also "
                      f"needs {GANG_PERMISSIONS})", where=error.where)


class AwsProvider:
    """One AWS account, in ``regions``. ``image``: the AMI every launch uses unless its spec
    names one (default: the Deep Learning Base AMI of the region and architecture)."""

    name = "aws"

    def __init__(self, regions: Sequence[str], *, image: str | None = None,
                 endpoint_url: str | None = None, session: boto3.session.Session | None = None,
                 connect_timeout: float = 5.0, read_timeout: float = 30.0) -> None:
        import boto3

        quiet_user_data()
        if not regions:
            raise ValueError("AwsProvider needs at least one region (e.g. regions=['us-east-1'])")
        self.regions, self.image = tuple(regions), image
        self._session = session or boto3.session.Session()
        fast_timestamps(self._session)
        self._endpoint = endpoint_url
        self._config = fail_fast(connect_timeout, read_timeout)
        self._lock = threading.Lock()  # a boto3 session makes clients one at a time
        self._clients: dict[tuple[str, str], Any] = {}
        self._zones: dict[str, dict[str, str]] = {}  # region -> zone name -> zone id
        self._cache: dict[tuple[str, ...], str] = {}  # AMIs, architectures, root devices

    # clients

    def _client(self, service: str, region: str) -> Any:
        with self._lock:
            key = (service, region)
            if key not in self._clients:
                self._clients[key] = self._session.client(
                    service, region_name=region, endpoint_url=self._endpoint,
                    config=self._config)  # type: ignore[call-overload]
            return self._clients[key]

    def _ec2(self, region: str) -> EC2Client:
        return cast("EC2Client", self._client("ec2", region))

    def _ssm(self, region: str) -> SSMClient:
        return cast("SSMClient", self._client("ssm", region))

    def _sts(self) -> STSClient:
        return cast("STSClient", self._client("sts", self.regions[0]))

    # zones, images

    def zone_names(self, region: str) -> dict[str, str]:
        """This account's zones of ``region``: zone name -> zone id (cached)."""
        if region not in self._zones:
            zones = self._ec2(region).describe_availability_zones()["AvailabilityZones"]
            self._zones[region] = {z["ZoneName"]: z["ZoneId"] for z in zones}
        return self._zones[region]

    def _zone_name(self, region: str, zone_id: str) -> str:
        names = {v: k for k, v in self.zone_names(region).items()}
        if zone_id not in names:
            raise CloudError(Failure.UNSUPPORTED, "ZoneNotInAccount",
                             f"zone {zone_id} is not one of this account's zones of {region} "
                             f"({', '.join(sorted(names))})", where=f"{region}/{zone_id}")
        return names[zone_id]

    def _zone_id(self, region: str, name: str | None) -> str | None:
        return self.zone_names(region).get(name, name) if name else None

    def _cached(self, key: tuple[str, ...], compute: Callable[[], str]) -> str:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def _architecture(self, region: str, instance_type: str) -> str:
        def compute() -> str:
            found = self._ec2(region).describe_instance_types(
                InstanceTypes=[cast(Any, instance_type)])["InstanceTypes"]
            info = found[0].get("ProcessorInfo", {}) if found else {}
            arches = info.get("SupportedArchitectures", [])
            return "arm64" if arches and "x86_64" not in arches else "x86_64"
        return self._cached(("arch", region, instance_type), compute)

    def _dlami(self, region: str, arch: str) -> str:
        name = DLAMI_PARAMETER.format(arch=arch)

        def compute() -> str:
            try:
                return self._ssm(region).get_parameter(Name=name)["Parameter"]["Value"]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ParameterNotFound":
                    raise
            raise CloudError(Failure.CONFIG, "NoImage",
                             f"no machine image: the public SSM parameter {name} is not in "
                             f"{region}; give the provider an image (an AMI id)",
                             where=region)
        return self._cached(("image", region, arch), compute)

    def _image(self, spec: LaunchSpec) -> str:
        chosen = spec.image or self.image
        if chosen:
            return chosen
        return self._dlami(spec.region, self._architecture(spec.region, spec.instance_type))

    def _root_device(self, region: str, image: str) -> str:
        def compute() -> str:
            images = self._ec2(region).describe_images(ImageIds=[image])["Images"]
            if not images or "RootDeviceName" not in images[0]:
                raise CloudError(Failure.CONFIG, "InvalidAMIID.NotFound",
                                 f"the image {image} is not in {region}", where=region)
            return images[0]["RootDeviceName"]
        return self._cached(("root", region, image), compute)

    # the seam

    def check(self) -> CloudCheck:
        """Whether the credentials work (STS), which regions answer, and whether they may
        launch (a dry-run RunInstances in the first region that answers)."""
        try:
            identity = self._sts().get_caller_identity()["Arn"]
        except (ClientError, BotoCoreError) as exc:
            return self._disabled(cloud_error(exc, where="sts:GetCallerIdentity"), None)
        regions, notes = self._answering()
        if not regions:
            return CloudCheck(self.name, False, "; ".join(notes), (), identity)
        try:
            self._dry_run(regions[0])
        except CloudError as exc:
            return self._disabled(exc, identity)
        return CloudCheck(self.name, True, "; ".join(notes) or None, tuple(regions), identity)

    def _answering(self) -> tuple[list[str], list[str]]:
        regions, notes = [], []
        for region in self.regions:
            try:
                self.zone_names(region)
            except (ClientError, BotoCoreError) as exc:
                error = cloud_error(exc, where=region)
                notes.append(f"{region}: {error.code}: {error.message}")
                continue
            regions.append(region)
        return regions, notes

    def _dry_run(self, region: str) -> None:
        try:
            image = self.image or self._dlami(region, "x86_64")
            self._ec2(region).run_instances(DryRun=True, MinCount=1, MaxCount=1,
                                            InstanceType=_CHECK_TYPE, ImageId=image)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "DryRunOperation":
                return
            raise cloud_error(exc, where="ec2:RunInstances") from exc
        except BotoCoreError as exc:
            raise cloud_error(exc, where="ec2:RunInstances") from exc

    def _disabled(self, error: CloudError, identity: str | None) -> CloudCheck:
        if error.code == "NoCredentialsError":
            reason = error.message
        elif error.failure is Failure.AUTH:
            reason = f"{error.where} denied ({error.code}): {error.message}"
        else:
            reason = f"{error.where}: {error.code}: {error.message}"
        return CloudCheck(self.name, False, reason, (), identity)

    def launch(self, spec: LaunchSpec) -> Instance:
        try:
            return self._launch(spec)
        except (ClientError, BotoCoreError) as exc:
            raise cloud_error(exc, where=_where(spec), instance_type=spec.instance_type,
                              spot=spec.spot) from exc

    def _launch(self, spec: LaunchSpec) -> Instance:
        ec2 = self._ec2(spec.region)
        made = self._made_by(ec2, spec.client_token)
        if made is not None:
            return self._instance(spec.region, made)
        image = self._image(spec)
        zone = self._zone_name(spec.region, spec.zone) if spec.zone else None
        root = self._root_device(spec.region, image) if spec.disk_gib is not None else None
        reply = ec2.run_instances(**run_request(spec, image=image, zone_name=zone,
                                                root_device=root))
        return self._instance(spec.region, reply["Instances"][0])

    def _made_by(self, ec2: EC2Client, token: str) -> InstanceTypeDef | None:
        """The instance a client token already launched, if any (the newest)."""
        found = [i for r in ec2.describe_instances(Filters=[
            {"Name": "client-token", "Values": [token]}])["Reservations"]
            for i in r.get("Instances", [])]
        return max(found, key=lambda i: i.get("LaunchTime", _EPOCH)) if found else None

    def _instance(self, region: str, data: InstanceTypeDef) -> Instance:
        placement = data.get("Placement", {})
        zone = placement.get("AvailabilityZoneId") or \
            self._zone_id(region, placement.get("AvailabilityZone"))
        launched = data.get("LaunchTime")
        return Instance(
            id=data["InstanceId"], region=region, instance_type=data["InstanceType"],
            state=data["State"]["Name"].lower(), zone=zone,
            spot=data.get("InstanceLifecycle") == "spot",
            launched_at=launched.timestamp() if launched else None,
            tags={t["Key"]: t["Value"] for t in data.get("Tags", [])})

    def tagged(self, exchange_id: str, regions: Sequence[str]) -> list[Instance]:
        out: list[Instance] = []
        for region in regions:
            try:
                out.extend(self._instance(region, i) for i in self._tagged(region, exchange_id))
            except (ClientError, BotoCoreError) as exc:
                raise cloud_error(exc, where=region) from exc
        return out

    def _tagged(self, region: str, exchange_id: str) -> Iterator[InstanceTypeDef]:
        pages = self._ec2(region).get_paginator("describe_instances").paginate(Filters=[
            {"Name": f"tag:{TAG_EXCHANGE}", "Values": [exchange_id]},
            {"Name": "instance-state-name", "Values": _NOT_TERMINATED}],
            PaginationConfig={"PageSize": 1000})
        for page in pages:
            for reservation in page["Reservations"]:
                yield from reservation.get("Instances", [])

    def terminate(self, region: str, instance_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(instance_ids))
        for start in range(0, len(ids), TERMINATE_BATCH):
            self._terminate(region, ids[start:start + TERMINATE_BATCH])

    def _terminate(self, region: str, ids: list[str]) -> None:
        """Terminate ``ids``. EC2 refuses a whole call that names an unknown id: the ids its
        message names are left out and the call made again (one at a time if it names none)."""
        while ids:
            try:
                self._ec2(region).terminate_instances(InstanceIds=ids)
                return
            except (ClientError, BotoCoreError) as exc:
                error = cloud_error(exc, where=region)
                if error.code != "InvalidInstanceID.NotFound":
                    raise error from exc
            unknown = set(_INSTANCE_ID.findall(error.message)) & set(ids)
            if not unknown:
                if len(ids) > 1:
                    for one in ids:
                        self._terminate(region, [one])
                return
            ids = [i for i in ids if i not in unknown]

    # gangs (``aws_gang``)

    def place_gang(self, exchange_id: str, gang: str, region: str, zone: str | None,
                   instance_type: str) -> GangPlace:
        """The gang's placement group and security group. A permission missing for them is
        a configuration error of the gang's (its job fails saying which), not of the cloud's:
        one-node launches go on."""
        try:
            return self._place_gang(exchange_id, gang, region, zone, instance_type)
        except (ClientError, BotoCoreError) as exc:
            raise _gang_error(cloud_error(
                exc, where=f"{region}/{zone or '*'}/{instance_type}")) from exc

    def _place_gang(self, exchange_id: str, gang: str, region: str, zone: str | None,
                    instance_type: str) -> GangPlace:
        ec2 = self._ec2(region)
        group = aws_gang.security_group(ec2, exchange_id, region)
        cluster = self._cached(("cluster", region, instance_type), lambda: str(
            aws_gang.supports_cluster(ec2, instance_type)))
        if cluster != "True":
            return GangPlace(None, (group,), (
                f"{instance_type} does not support cluster placement groups: the members are "
                f"launched in {zone or region} without one"))
        return GangPlace(aws_gang.make_placement_group(ec2, exchange_id, gang), (group,))

    def gang_groups(self, exchange_id: str, regions: Sequence[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for region in regions:
            try:
                out += [(region, g) for g in aws_gang.tagged_groups(self._ec2(region),
                                                                    exchange_id)]
            except (ClientError, BotoCoreError) as exc:
                raise cloud_error(exc, where=region) from exc
        return out

    def release_gang(self, region: str, gang: str) -> bool:
        try:
            return aws_gang.delete_placement_group(self._ec2(region), gang)
        except (ClientError, BotoCoreError) as exc:
            raise cloud_error(exc, where=region) from exc

    # prices and availability

    def spot_prices(self, region: str, instance_types: Sequence[str],
                    now: datetime | None = None) -> list[SpotPrice]:
        """The spot price in force of each of ``instance_types`` in each zone (Linux)."""
        try:
            return list(latest(self._spot_history(region, instance_types, now)).values())
        except (ClientError, BotoCoreError) as exc:
            raise cloud_error(exc, where=f"{region} spot prices") from exc

    def _spot_history(self, region: str, instance_types: Sequence[str],
                      now: datetime | None) -> Iterator[SpotPrice]:
        pages = self._ec2(region).get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=cast(Any, list(instance_types)), ProductDescriptions=["Linux/UNIX"],
            StartTime=now or datetime.now(UTC))
        for page in pages:
            for row in page["SpotPriceHistory"]:
                zone = row.get("AvailabilityZoneId") or \
                    self._zone_id(region, row.get("AvailabilityZone"))
                if zone and "SpotPrice" in row and "Timestamp" in row:
                    yield SpotPrice(row["InstanceType"], zone, float(row["SpotPrice"]),
                                    row["Timestamp"])

    def offerings(self, region: str, instance_types: Sequence[str]) -> set[tuple[str, str]]:
        """(instance type, zone id) of each of ``instance_types`` the region's zones offer."""
        try:
            return set(self._offerings(region, list(instance_types)))
        except (ClientError, BotoCoreError) as exc:
            raise cloud_error(exc, where=f"{region} offerings") from exc

    def _offerings(self, region: str, types: list[str]) -> Iterator[tuple[str, str]]:
        paginator = self._ec2(region).get_paginator("describe_instance_type_offerings")
        for start in range(0, len(types), OFFERINGS_BATCH):
            for page in paginator.paginate(LocationType="availability-zone-id", Filters=[
                    {"Name": "instance-type", "Values": types[start:start + OFFERINGS_BATCH]}]):
                for row in page["InstanceTypeOfferings"]:
                    yield row["InstanceType"], row["Location"]
