"""The launcher over the real AWS provider and a simulated account whose RunInstances fail as
EC2's do (the fault proxy's XML errors): failover zone by zone with one request per place, the
quota named, the job told where it tried — on a real coordinator (in process, SQLite)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from faultproxy import Rule
from sim import Sim

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))

from launch_harness import Launching, launching

from bourse.clouds.aws import AwsProvider
from bourse.core.compute import Compute
from bourse.server.db.database import Database, sqlite_url

pytestmark = pytest.mark.anyio
REGION = "us-east-1"
CAPACITY = {"code": "InsufficientInstanceCapacity", "status": 500,
            "message": "We currently do not have sufficient p5.48xlarge capacity in the "
                       "Availability Zone you requested."}
QUOTA = {"code": "VcpuLimitExceeded", "status": 400,
         "message": "You have requested more vCPU capacity than your current vCPU limit of 0 "
                    "allows for the instance bucket that the specified instance type belongs "
                    "to."}


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


def _alive(sim: Sim, job_id: str) -> list[dict[str, Any]]:
    ec2: Any = sim.client("ec2", REGION)
    found = ec2.describe_instances(Filters=[{"Name": "tag:bourse:job", "Values": [job_id]}])
    return [i for r in found["Reservations"] for i in r["Instances"]
            if i["State"]["Name"] not in ("shutting-down", "terminated")]


async def test_five_zones_short_of_capacity_then_the_sixth_place(run: Launching,
                                                                sim: Sim) -> None:
    sim.proxy.reset([Rule(error=CAPACITY, action="RunInstances", times=5)])
    assert len(run.launcher.clouds.matches(Compute(gpu="h100:8"), 50)) >= 6  # six zones
    job = await run.exchange.submit(compute={"gpu": "h100:8"})
    report = await run.cycle()
    assert [t.outcome for t in report.tries] == ["capacity"] * 5 + ["launched"]
    assert sim.proxy.count("RunInstances") == 6  # fail-fast: one request per place
    assert len({(t.zone, t.instance_type) for t in report.tries}) == 6
    assert all("InsufficientInstanceCapacity: We currently do not have" in t.detail
               for t in report.tries[:5])
    [instance] = _alive(sim, job["id"])
    assert instance["InstanceType"] == report.tries[-1].instance_type


async def test_a_quota_is_named_and_its_family_not_tried_again(run: Launching,
                                                              sim: Sim) -> None:
    sim.proxy.reset([Rule(error=QUOTA, action="RunInstances")])
    job = await run.exchange.submit(compute={"gpu": "a100:8"})
    report = await run.cycle()
    families = {t.instance_type.split(".")[0] for t in report.tries}
    assert sim.proxy.count("RunInstances") == len(families)  # one per family, then blocked
    await run.exchange.tick()
    reason = (await run.exchange.job(job["id"]))["pending_reason"]
    assert "no launch succeeded" in reason
    assert "EC2 'Running On-Demand P instances' (vCPUs)" in reason
    assert not _alive(sim, job["id"])
