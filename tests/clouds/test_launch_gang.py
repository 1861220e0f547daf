"""A multi-node job's machines through the real AWS provider and a simulated account (moto,
with the simulator's placement groups): two instances of one type in one zone, in one cluster
placement group of their own, with the exchange's security group open between its members;
their agents told the zone's network; the group deleted once the gang has gone — on a real
coordinator (in process, SQLite)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sim import Sim

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))

from launch_harness import Launching, launching

from bourse.clouds.aws import AwsProvider
from bourse.server.db.database import Database, sqlite_url

pytestmark = pytest.mark.anyio
REGION = "us-east-1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def run(tmp_path: Path, sim: Sim) -> AsyncIterator[Launching]:
    url = sqlite_url(tmp_path / "bourse.db")
    db = Database(url)
    await db.migrate()
    await db.close()
    ec2: Any = sim.client("ec2", REGION)
    image = ec2.describe_images(Owners=["amazon"], Filters=[
        {"Name": "architecture", "Values": ["x86_64"]}])["Images"][0]["ImageId"]
    provider = AwsProvider([REGION], endpoint_url=sim.url, session=sim.session(), image=image)
    async with launching(tmp_path, url, cloud=provider,  # type: ignore[arg-type]
                         regions=(REGION,)) as opened:
        yield opened


def _instances(ec2: Any, job_id: str) -> list[dict[str, Any]]:
    found = ec2.describe_instances(Filters=[{"Name": "tag:bourse:job", "Values": [job_id]}])
    return [i for r in found["Reservations"] for i in r["Instances"]
            if i["State"]["Name"] not in ("shutting-down", "terminated")]


def _group(ec2: Any, name: str) -> list[dict[str, Any]]:
    return list(ec2.describe_placement_groups(Filters=[
        {"Name": "group-name", "Values": [name]}])["PlacementGroups"])


async def test_a_two_node_gang_shares_a_zone_a_placement_group_and_a_security_group(
        run: Launching, sim: Sim) -> None:
    ec2: Any = sim.client("ec2", REGION)
    job = await run.exchange.submit(compute={"gpu": "a100:8", "num_nodes": 2})
    report = await run.cycle()
    assert [t.outcome for t in report.tries] == ["launched"]
    members = _instances(ec2, job["id"])
    assert len(members) == 2 and len({i["InstanceType"] for i in members}) == 1
    [zone] = {i["Placement"]["AvailabilityZone"] for i in members}
    [name] = {i["Placement"]["GroupName"] for i in members}
    [group] = _group(ec2, name)
    tags = {t["Key"]: t["Value"] for t in group["Tags"]}
    assert group["Strategy"] == "cluster"
    assert tags["bourse:exchange"] == await run.launcher.exchange_id()
    assert {{t["Key"]: t["Value"] for t in i["Tags"]}["bourse:gang"] for i in members} == {
        tags["bourse:gang"]}
    [groups] = {tuple(g["GroupId"] for g in i["SecurityGroups"]) for i in members}
    [rules] = [g["IpPermissions"] for g in ec2.describe_security_groups(
        GroupIds=list(groups))["SecurityGroups"]]
    assert [(r["IpProtocol"], [p["GroupId"] for p in r["UserIdGroupPairs"]])
            for r in rules] == [("-1", list(groups))]  # all traffic, from its members only
    zone_id = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()[
        "AvailabilityZones"]}[zone]
    assert [f["network"] for f in run.user_data] == [f"aws:{zone_id}"] * 2  # its agents'

    cancelled = await run.exchange.client.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    await run.tick()
    assert not _instances(ec2, job["id"])
    await run.launcher.reconcile()
    assert not _group(ec2, name)
