"""The launcher on a real coordinator and database, over a scripted cloud: a job that no node
can take launches the cheapest fitting offer; its agent enrols with the single-use token bound
to the node; failures fail over by class; idle, boot-timed-out, unwanted and mismatched
machines are terminated; caps and project clouds are kept; the reconciler leaves nothing
behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from launch_harness import Launching, ScriptedCloud, launching
from server_harness import capabilities, serve

from bourse.core.launch import Failure
from bourse.core.states import LaunchState, NodeState
from bourse.market.catalogs import catalog_offers
from bourse.server.db.schema import Launch, LaunchBlockRow, Node

pytestmark = pytest.mark.anyio
A100X8 = {"gpu": "a100:8", "spot": "prefer"}


def cheapest(spot: bool, regions: tuple[str, ...] = ("us-east-1", "us-west-2", "eu-west-1"),
             gpu: str = "A100", count: int = 8) -> list[tuple[float, str, str | None, str]]:
    """The catalogue's a100:8 offers in ``regions`` by the price a job pays (an oracle)."""
    rows = []
    for o in catalog_offers(("aws",)):
        if o.region in regions and o.gpu is not None and o.gpu.startswith(gpu.lower()) \
                and o.gpu_count == count:
            price = o.spot_price if spot else o.price
            if price is not None:
                rows.append((price, o.region, o.zone, o.instance_type))
    return sorted(rows)


def out_of_capacity(places: int) -> tuple[ScriptedCloud, list[tuple[float, str, str | None, str]]]:
    """A cloud whose ``places`` cheapest on-demand a100:8 places have no capacity, and the
    catalogue's order of those places."""
    cloud = ScriptedCloud()
    order = cheapest(spot=False)
    for _, _, zone, itype in order[:places]:
        cloud.fail(Failure.CAPACITY, "InsufficientInstanceCapacity", zone=zone or "*",
                   instance_type=itype, market="on-demand")
    return cloud, order


async def launches_of(run: Launching) -> list[Launch]:
    async with run.exchange.state.db.read() as session:
        from sqlalchemy import select
        return list((await session.scalars(select(Launch).order_by(Launch.requested_at,
                                                                    Launch.id))).all())


async def enrol(run: Launching, index: int = -1, **caps: Any) -> tuple[str, str]:
    """The launched machine's agent spends the token of its user data."""
    fields = run.user_data[index]
    made = await run.exchange.client.post(
        "/api/v1/agent/enroll", json={"name": fields["node_name"]},
        headers={"Authorization": f"Bearer {fields['enrol_token']}"})
    assert made.status_code == 201, made.text
    return made.json()["node_id"], made.json()["credential"]


async def connected(live: Any, node_id: str, credential: str) -> FakeAgent:
    """The launched machine's agent, connected: 8 GPUs as its offer (a p4d) says."""
    agent = FakeAgent(live.ws_url, node_id, credential,
                      capabilities(cpus=96, gpus=8, memory_gib=1152), name="launched")
    await agent.connect()
    return agent


async def launched_agent(run: Launching, live: Any) -> FakeAgent:
    """The last launch's machine boots: its agent enrols and connects."""
    return await connected(live, *await enrol(run))


async def test_a_job_no_node_can_take_launches_the_cheapest_fit(tmp_path: Path,
                                                               database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        job = await run.exchange.submit(compute=A100X8)
        await run.cycle()
        assert len(run.cloud.calls) == 1
        call = run.cloud.calls[0]
        best = cheapest(spot=True)[0]
        assert (call.region, call.zone, call.instance_type, call.spot) == (
            best[1], best[2], best[3], True)
        assert call.tags()["bourse:job"] == job["id"]
        detail = await run.exchange.job(job["id"])
        assert detail["state"] == "PENDING"
        assert detail["pending_reason"].startswith(f"launching aws {best[1]} ({best[2]}) "
                                                   f"{best[3]} spot")
        [launch] = await launches_of(run)
        assert launch.state == LaunchState.BOOTING and launch.instance_id is not None
        node = await run.exchange.node_row(launch.node_id)
        assert node.state == NodeState.BOOTING
        assert node.declared is not None and node.declared["gpus"].startswith("a100")
        assert node.declared["gpus"].endswith(":8")
        await run.exchange.tick()  # the periodic pass keeps the launcher's reason
        assert (await run.exchange.job(job["id"]))["pending_reason"].startswith("launching")
        await run.tick()
        assert len(run.cloud.calls) == 1  # one launch per job, not one per tick


async def test_the_launched_node_enrols_runs_the_job_and_ends_when_idle(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url) as run, serve(run.exchange) as live:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        [launch] = await launches_of(run)
        node_id, credential = await enrol(run)
        assert node_id == launch.node_id  # enrolled into the node made at launch
        again = await run.exchange.client.post(
            "/api/v1/agent/enroll", json={"name": "x"},
            headers={"Authorization": f"Bearer {run.user_data[0]['enrol_token']}"})
        assert again.status_code == 401 and "already been used" in again.text
        agent = await connected(live, node_id, credential)
        try:
            await run.tick()
            assert (await launches_of(run))[0].state == LaunchState.READY
            await run.exchange.tick()
            start = await agent.expect("start_job")
            assert start["job_id"] == job["id"]
            await agent.run_job(job["id"], 1)
            await run.tick()
            run.exchange.clock.advance(599)
            await run.tick()
            assert not run.cloud.terminated  # idle, not yet for the idle timeout
            run.exchange.clock.advance(2)
            report = await run.tick()
            assert report.terminated == [launch.id]
            assert run.cloud.terminated == [launch.instance_id]
            ended = (await launches_of(run))[0]
            assert ended.state == LaunchState.TERMINATED and "idle" in (ended.reason or "")
            assert (await run.exchange.node_row(node_id)).state == NodeState.TERMINATED
            cost = (await run.exchange.client.get("/api/v1/cost")).json()
            [row] = cost["launched"]
            assert row["cost"] == pytest.approx((ended.terminated_at - ended.launched_at)
                                                / 3600 * ended.price)
            assert row["idle_s"] >= 599
        finally:
            await agent.close()


async def test_capacity_errors_fail_over_zone_by_zone_and_block(tmp_path: Path,
                                                               database_url: str) -> None:
    cloud, order = out_of_capacity(5)
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        await run.exchange.submit(compute={"gpu": "a100:8"})
        report = await run.cycle()
        assert [t.outcome for t in report.tries] == ["capacity"] * 5 + ["launched"]
        assert [(c.zone, c.instance_type) for c in cloud.calls] == [
            (z, t) for _, _, z, t in order[:6]]
        assert len({c.client_token for c in cloud.calls}) == 6  # one token per place
        assert len(cloud.alive()) == 1
        states = sorted(launch.state for launch in await launches_of(run))
        assert states == [LaunchState.BOOTING] + [LaunchState.FAILED] * 5
        blocks = await _blocks(run)
        assert len(blocks) == 5 and all(b.startswith("zone:aws/") for b in blocks)
        await run.exchange.submit(compute={"gpu": "a100:8"})  # a second job skips them
        await run.cycle()
        assert (cloud.calls[-1].zone, cloud.calls[-1].instance_type) == order[5][2:]


async def test_quota_blocks_the_family_and_says_which_quota(tmp_path: Path,
                                                           database_url: str) -> None:
    cloud = ScriptedCloud()
    cloud.fail(Failure.QUOTA, "VcpuLimitExceeded", times=100,
               quota="Running On-Demand P instances")
    async with launching(tmp_path, database_url, cloud=cloud, regions=("us-east-1",)) as run:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        report = await run.cycle()
        families = {c.instance_type.split(".")[0] for c in cloud.calls}
        assert len(cloud.calls) == len(families)  # one call per family: the rest is blocked
        assert all(t.outcome == "quota" for t in report.tries)
        await run.exchange.tick()
        reason = (await run.exchange.job(job["id"]))["pending_reason"]
        assert "Running On-Demand P instances" in reason and "VcpuLimitExceeded" in reason
        assert not cloud.alive()


async def test_a_configuration_error_fails_the_job_without_failover(tmp_path: Path,
                                                                   database_url: str) -> None:
    cloud = ScriptedCloud()
    cloud.fail(Failure.CONFIG, "InvalidAMIID.NotFound", times=10)
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        assert len(cloud.calls) == 1
        detail = await run.exchange.job(job["id"])
        assert detail["state"] == "FAILED"
        assert "InvalidAMIID.NotFound: scripted InvalidAMIID.NotFound" in detail["reason"]
        assert not await _blocks(run)


async def test_an_auth_error_disables_the_cloud_and_says_so(tmp_path: Path,
                                                           database_url: str) -> None:
    cloud = ScriptedCloud()
    cloud.fail(Failure.AUTH, "UnauthorizedOperation", times=10)
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        assert len(cloud.calls) == 1
        listed = (await run.exchange.client.get("/api/v1/clouds")).json()
        [aws] = [c for c in listed["clouds"] if c["name"] == "aws"]
        assert aws["enabled"] is False and "UnauthorizedOperation" in aws["reason"]
        await run.tick()
        assert len(cloud.calls) == 1  # a disabled cloud is not called again
        assert (await run.exchange.job(job["id"]))["state"] == "PENDING"


async def test_throttling_retries_the_same_place(tmp_path: Path, database_url: str) -> None:
    cloud = ScriptedCloud()
    cloud.fail(Failure.THROTTLE, "RequestLimitExceeded", times=2)
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        assert len(cloud.calls) == 3
        assert len({(c.zone, c.instance_type) for c in cloud.calls}) == 1
        assert len(cloud.alive()) == 1 and not await _blocks(run)


async def test_when_every_place_fails_the_job_shows_where_it_tried(tmp_path: Path,
                                                                  database_url: str) -> None:
    cloud = ScriptedCloud()
    cloud.fail(Failure.CAPACITY, "InsufficientInstanceCapacity", times=1000)
    async with launching(tmp_path, database_url, cloud=cloud, regions=("us-east-1",)) as run:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        await run.exchange.tick()
        reason = (await run.exchange.job(job["id"]))["pending_reason"]
        assert "no launch succeeded" in reason
        table = reason.split("\n")[2:]
        assert len(table) == len(cloud.calls) and all("capacity" in r for r in table)
        calls = len(cloud.calls)
        await run.cycle()
        assert len(cloud.calls) == calls  # blocked places are not hammered
        await run.exchange.tick()
        assert "blocked for now" in (await run.exchange.job(job["id"]))["pending_reason"]


async def test_a_node_that_never_enrols_is_terminated_and_its_offer_blocked(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url, boot_timeout_s=300.0) as run:
        await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        first = run.cloud.calls[0]
        run.exchange.clock.advance(301)
        report = await run.tick()
        assert run.cloud.terminated == [next(iter(run.cloud.instances))]
        assert any("boot timeout" in launch.reason for launch in await launches_of(run)
                   if launch.reason)
        assert len(report.launched) == 1  # the job launched again elsewhere
        second = run.cloud.calls[-1]
        assert (second.zone, second.instance_type) != (first.zone, first.instance_type)
        refused = await run.exchange.client.post(
            "/api/v1/agent/enroll", json={"name": "late"},
            headers={"Authorization": f"Bearer {run.user_data[0]['enrol_token']}"})
        assert refused.status_code == 401


async def test_a_cancelled_job_leaves_no_instance_behind(tmp_path: Path,
                                                         database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        cancelled = await run.exchange.client.post(f"/api/v1/jobs/{job['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        await run.tick()
        assert not run.cloud.alive()
        [launch] = await launches_of(run)
        assert launch.state == LaunchState.TERMINATED
        listed = (await run.exchange.client.get("/api/v1/clouds")).json()
        [aws] = [c for c in listed["clouds"] if c["name"] == "aws"]
        figures = aws["launch_figures"]  # no failure of the cloud's
        assert (figures["withdrawn"], figures["failed"], figures["success_rate"]) == (1, 0, None)


async def test_a_machine_that_is_not_what_the_offer_said_is_terminated(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url, allow_unverified=False) as run:
        await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        [launch] = await launches_of(run)
        async with run.exchange.state.db.write() as session:  # the verifier's verdict
            node = await session.get(Node, launch.node_id)
            assert node is not None
            node.state, node.verification_status = NodeState.ONLINE, "fail"
            node.verification = {"status": "fail", "checks": [
                {"name": "declared.gpus", "status": "fail",
                 "reason": "declared a100:8, measured 8x NVIDIA H100 80GB HBM3"}]}
        await run.tick()
        assert launch.instance_id in run.cloud.terminated
        [ended] = [row for row in await launches_of(run) if row.id == launch.id]
        assert "not what the offer said" in (ended.reason or "")
        assert any(b.startswith("zone:") for b in await _blocks(run))


async def test_spending_caps_refuse_with_the_figures(tmp_path: Path,
                                                     database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        capped = await run.exchange.client.patch("/api/v1/projects/default/limits",
                                                 json={"cap_hour": 5.0})
        assert capped.status_code == 200, capped.text
        assert capped.json()["cap_hour"] == 5.0
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        await run.exchange.tick()
        assert not run.cloud.calls
        reason = (await run.exchange.job(job["id"]))["pending_reason"]
        assert "cap of $5.00/h" in reason
        bad = await run.exchange.client.patch("/api/v1/projects/default/limits",
                                              json={"clouds": ["gcloud"]})
        assert bad.status_code == 422 and "unknown cloud" in bad.text
        negative = await run.exchange.client.patch("/api/v1/projects/default/limits",
                                                   json={"cap_day": -1})
        assert negative.status_code == 422


async def test_a_project_limited_to_no_cloud_launches_nothing(tmp_path: Path,
                                                              database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        await run.exchange.client.patch("/api/v1/projects/default/limits", json={"clouds": []})
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        await run.exchange.tick()
        assert not run.cloud.calls
        assert "may launch only on no cloud" in (await run.exchange.job(job["id"]))[
            "pending_reason"]


async def test_a_job_no_cloud_sells_fails_at_once(tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        job = await run.exchange.submit(compute={"gpu": "a100:8", "max_price": 0.5})
        await run.cycle()
        detail = await run.exchange.job(job["id"])
        assert detail["state"] == "FAILED" and "no cloud offer can be launched" in detail["reason"]
        assert not run.cloud.calls


async def test_the_reconciler_ends_orphans_and_adopts_what_a_crash_left(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        exchange_id = await run.launcher.exchange_id()
        orphan = run.cloud.launch(_spec(exchange_id, "l-gone"))  # no row: an orphan
        foreign = run.cloud.launch(_spec("x-another", "l-theirs"))  # another exchange's
        await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        [launch] = await launches_of(run)
        async with run.exchange.state.db.write() as session:  # as if killed before commit
            row = await session.get(Launch, launch.id)
            assert row is not None
            row.state, row.instance_id = LaunchState.REQUESTED, None
        terminated = await run.launcher.reconcile()
        assert terminated == [orphan.id]
        assert foreign.id not in run.cloud.terminated
        adopted = (await launches_of(run))[0]
        assert adopted.state == LaunchState.BOOTING and adopted.instance_id is not None


async def _blocks(run: Launching) -> list[str]:
    async with run.exchange.state.db.read() as session:
        from sqlalchemy import select
        return [b.key for b in (await session.scalars(select(LaunchBlockRow))).all()]


def _spec(exchange_id: str, launch_id: str) -> Any:
    from bourse.clouds.base import LaunchSpec
    return LaunchSpec(launch_id=launch_id, exchange_id=exchange_id, node_id="n-x",
                      project_id="default", region="us-east-1", instance_type="p4d.24xlarge",
                      user_data="", client_token=f"ct-{launch_id}")


class PricedCloud(ScriptedCloud):
    """A scripted cloud with a price and offering API (``clouds.refresh.PriceSource``): one
    zone offers p4d.24xlarge, at a spot price of its own."""

    def spot_prices(self, region: str, instance_types: Any) -> list[Any]:
        from datetime import UTC, datetime

        from bourse.clouds.refresh import SpotPrice
        return [SpotPrice("p4d.24xlarge", "use1-az6", 3.21, datetime(2026, 12, 1, tzinfo=UTC))]

    def offerings(self, region: str, instance_types: Any) -> set[tuple[str, str]]:
        return {("p4d.24xlarge", "use1-az6")} if region == "us-east-1" else set()


async def test_prices_and_zones_come_from_the_clouds_api_where_it_has_one(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url, cloud=PricedCloud(),
                         regions=("us-east-1",)) as run:
        await run.exchange.submit(compute={"gpu": "a100:8", "spot": "only"})
        await run.cycle()
        [call] = run.cloud.calls
        assert (call.zone, call.instance_type, call.spot) == ("use1-az6", "p4d.24xlarge", True)
        [launch] = await launches_of(run)
        assert launch.price == 3.21  # the API's spot price, not the catalogue's
        listed = (await run.exchange.client.get("/api/v1/clouds")).json()
        [aws] = [c for c in listed["clouds"] if c["name"] == "aws"]
        assert aws["prices"].startswith("the cloud's API at ") and aws["prices_fetched_at"]
        assert aws["offers"] == 1  # the one zone that offers it


async def test_a_launched_node_serves_the_project_that_launched_it(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url) as run, serve(run.exchange) as live:
        mine = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        agent = await launched_agent(run, live)
        try:
            await run.tick()
            await run.exchange.tick()
            start = await agent.expect("start_job")
            await agent.run_job(mine["id"], start["attempt"])
            await agent.barrier()
            other = await run.exchange.project_token("other-team")
            made = await run.exchange.client.post(
                "/api/v1/jobs", json={"command": ["true"], "compute": {"gpu": "a100:8"}},
                headers={"Authorization": f"Bearer {other}"})
            assert made.status_code == 201, made.text
            await run.cycle()  # the idle node is the default project's: another one launches
            assert not agent.received("start_job")[1:]
            assert len(run.cloud.calls) == 2
            assert run.cloud.calls[1].project_id == "other-team"
            again = await run.exchange.submit(compute={"gpu": "a100:8"})  # reused at once
            await run.cycle()
            assert len(run.cloud.calls) == 2
            assert (await agent.expect("start_job"))["job_id"] == again["id"]
        finally:
            await agent.close()


async def test_a_booting_node_is_not_lost_however_long_it_boots(tmp_path: Path,
                                                                database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        [launch] = await launches_of(run)
        run.exchange.clock.advance(300)  # many loss windows, within the boot timeout
        report = await run.exchange.tick()
        assert report.lost_nodes == []
        assert (await run.exchange.node_row(launch.node_id)).state == NodeState.BOOTING
        node_id, _ = await enrol(run)  # its window starts at its enrolment
        run.exchange.clock.advance(0.5)
        assert (await run.exchange.tick()).lost_nodes == []
        assert (await run.exchange.node_row(node_id)).state == NodeState.OFFLINE


async def test_an_instance_the_cloud_took_away_loses_its_attempt(tmp_path: Path,
                                                                 database_url: str) -> None:
    async with launching(tmp_path, database_url) as run, serve(run.exchange) as live:
        job = await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        agent = await launched_agent(run, live)
        try:
            await run.tick()
            await run.exchange.tick()
            start = await agent.expect("start_job")
            await agent.event(job["id"], start["attempt"], "accepted")
            await agent.event(job["id"], start["attempt"], "started", pid=1)
            await agent.barrier()
            [instance] = run.cloud.alive()
            run.cloud.terminate("us-east-1", [instance.id])  # the cloud took it back
            run.exchange.clock.advance(120)  # past the listing grace
            await run.launcher.reconcile()
            attempt = await run.exchange.attempt_row(job["id"], 1)
            assert attempt.state == "LOST" and "instance was terminated" in (attempt.reason or "")
            assert (await run.exchange.job(job["id"]))["state"] == "PENDING"  # retried
        finally:
            await agent.close()


async def test_each_cloud_publishes_its_launch_success_rate_and_time_to_enrol(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url, boot_timeout_s=300.0) as run, \
            serve(run.exchange) as live:
        await run.exchange.submit(compute={"gpu": "a100:8"})
        await run.cycle()
        run.exchange.clock.advance(301)  # the first machine never enrols
        await run.tick()  # terminated; the job launches again elsewhere
        run.exchange.clock.advance(75)
        agent = await launched_agent(run, live)  # the second enrols 75 s after its request
        try:
            await run.tick()
            listed = (await run.exchange.client.get("/api/v1/clouds")).json()
            [aws] = [c for c in listed["clouds"] if c["name"] == "aws"]
            assert aws["launch_figures"] == {
                "window_s": 30 * 86400.0, "launches": 2, "enrolled": 1, "failed": 1,
                "in_flight": 0, "withdrawn": 0, "success_rate": 0.5, "ready_median_s": 75.0,
                "ready_p90_s": 75.0}
            text = (await run.exchange.client.get("/metrics")).text
            assert 'bourse_cloud_launch_success_ratio{cloud="aws"} 0.5' in text.splitlines()
            assert 'bourse_cloud_launch_ready_seconds{cloud="aws",quantile="0.9"} 75' in \
                text.splitlines()
        finally:
            await agent.close()
