"""The launcher over the Lambda provider, against the replayed Lambda Cloud API
(``tests/clouds/lambda_sim.py``, built from https://docs-api.lambda.ai/api/cloud): a job no
node can take launches Lambda's cheapest fitting offer on demand, in a region that lists
capacity; a refused key disables the cloud; the reconciler ends this exchange's orphans and
leaves every other instance of the account alone."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clouds"))

from lambda_sim import KEY, LambdaSim, serve
from launch_harness import Launching, launching
from sqlalchemy import select

from bourse.clouds.lambda_api import LambdaApi, Pacer
from bourse.clouds.lambda_cloud import LambdaProvider
from bourse.clouds.lambda_names import instance_name
from bourse.core.states import LaunchState
from bourse.server.db.schema import Launch

pytestmark = pytest.mark.anyio
REGIONS = ("us-east-1", "us-west-1")
H100X8 = "gpu_8x_h100_sxm5"


@pytest.fixture
def sim() -> Iterator[tuple[LambdaSim, str]]:
    account = LambdaSim(capacity={H100X8: {"us-west-1"}})
    with serve(account) as url:
        yield account, url


async def launches_of(run: Launching) -> list[Launch]:
    async with run.exchange.state.db.read() as session:
        return list((await session.scalars(select(Launch))).all())


def lambda_cloud(url: str, key: str = KEY) -> LambdaProvider:
    return LambdaProvider(REGIONS, api=LambdaApi(key, base_url=url, pacer=Pacer(0.0, 0.0)))


async def test_a_job_launches_on_demand_where_lambda_lists_capacity(
        tmp_path: Path, database_url: str, sim: tuple[LambdaSim, str]) -> None:
    account, url = sim
    async with launching(tmp_path, database_url, cloud=lambda_cloud(url), provider="lambda",
                         regions=REGIONS) as run:  # type: ignore[arg-type]
        job = await run.exchange.submit(compute={"gpu": "h100:8", "spot": "prefer"})
        report = await run.cycle()
        assert report.tries[-1].outcome == "launched"
        assert [t.outcome for t in report.tries if t.region == "us-east-1"] in ([], ["capacity"])
        [body] = account.launches()  # us-east-1 listed no capacity: no launch call there
        assert (body["region_name"], body["instance_type_name"]) == ("us-west-1", H100X8)
        [launch] = [la for la in await launches_of(run) if la.state == LaunchState.BOOTING]
        assert launch.region == "us-west-1" and not launch.spot
        assert body["name"] == instance_name(await run.launcher.exchange_id(), launch.id,
                                             launch.node_id)
        detail = await run.exchange.job(job["id"])
        assert detail["pending_reason"].startswith(f"launching lambda us-west-1 {H100X8} "
                                                   "on-demand")
        await run.tick()
        assert len(account.launches()) == 1  # one launch per job


async def test_a_refused_key_disables_the_cloud_saying_why(
        tmp_path: Path, database_url: str, sim: tuple[LambdaSim, str]) -> None:
    account, url = sim
    async with launching(tmp_path, database_url, cloud=lambda_cloud(url, "revoked-key-000"),
                         provider="lambda", regions=REGIONS) as run:  # type: ignore[arg-type]
        status = run.launcher.clouds.status["lambda"]
        assert not status.enabled and "global/invalid-api-key" in (status.reason or "")
        assert "revoked-key-000" not in (status.reason or "")
        await run.exchange.submit(compute={"gpu": "h100:8"})
        await run.cycle()
        assert account.launches() == []


async def test_a_key_revoked_after_the_check_disables_the_cloud_at_launch(
        tmp_path: Path, database_url: str, sim: tuple[LambdaSim, str]) -> None:
    account, url = sim
    async with launching(tmp_path, database_url, cloud=lambda_cloud(url), provider="lambda",
                         regions=REGIONS) as run:  # type: ignore[arg-type]
        account.keys.clear()
        await run.exchange.submit(compute={"gpu": "h100:8"})
        await run.cycle()
        status = run.launcher.clouds.status["lambda"]
        assert not status.enabled and "global/invalid-api-key" in (status.reason or "")
        assert account.launches() == [] and account.alive() == []


async def test_the_reconciler_ends_this_exchanges_orphans_only(
        tmp_path: Path, database_url: str, sim: tuple[LambdaSim, str]) -> None:
    account, url = sim
    cloud = lambda_cloud(url)
    async with launching(tmp_path, database_url, cloud=cloud, provider="lambda",
                         regions=REGIONS) as run:  # type: ignore[arg-type]
        exchange = await run.launcher.exchange_id()
        body = {"region_name": "us-west-1", "instance_type_name": H100X8,
                "ssh_key_names": ["bourse-ops"]}
        for name in (instance_name(exchange, "l-000000000001", "n-000000000001"),
                     instance_name("x-000000000000", "l-000000000002", "n-000000000002"),
                     "someone's notebook"):
            account.launch({**body, "name": name})
        orphan, other, notebook = account.instances
        terminated = await run.launcher.reconcile()
        assert terminated == [orphan]
        assert account.instances[orphan]["status"] == "terminating"
        assert account.instances[other]["status"] == account.instances[notebook]["status"] \
            == "booting"

