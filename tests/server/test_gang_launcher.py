"""Gang launches on a real coordinator and database, over a scripted cloud that places gangs:
a multi-node job's machines are launched together in one zone and placement group, its agents
declare the zone's network and the gang is placed on them; a member the cloud refuses ends
the gang and the next place is tried whole; a cap counts every member; a gang a crash left
half made is ended whole; its placement group goes once its machines have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from launch_harness import Launching, PlacingCloud, launching
from server_harness import capabilities, serve
from test_launcher import cheapest, enrol, launches_of

from bourse.core.launch import Failure
from bourse.core.states import LaunchState
from bourse.server.db.schema import Launch, LaunchBlockRow
from bourse.server.launcher.reconcile import RESTART_GRACE_S

pytestmark = pytest.mark.anyio
GANG = {"gpu": "a100:8", "num_nodes": 2}


async def member(run: Launching, live: Any, index: int) -> FakeAgent:
    """The ``index``-th launched machine boots: its agent enrols and says its network, as the
    user data starts it (its address: the one it reaches the coordinator from)."""
    node_id, credential = await enrol(run, index)
    agent = FakeAgent(live.ws_url, node_id, credential, capabilities(
        cpus=96, gpus=8, memory_gib=1152, network=run.user_data[index]["network"],
        address=f"10.0.0.{index + 1}"), name=f"member-{index}")
    await agent.connect()
    return agent


async def run_gang(agents: list[FakeAgent], job_id: str) -> None:
    """Rank 0 starts and says its port, the others start with it; all exit 0."""
    starts = {}
    for agent in agents:
        await agent.barrier()
        starts[agent] = agent.received("start_job")
    [(first, [start])] = [(a, s) for a, s in starts.items() if s]
    await first.event(job_id, start["attempt"], "accepted")
    await first.event(job_id, start["attempt"], "rendezvous", address="10.0.0.1", port=29517)
    for agent in agents:
        if agent is not first:
            await agent.expect("start_job", job_id=job_id)
            await agent.run_job(job_id, start["attempt"])
    await first.event(job_id, start["attempt"], "started", pid=7)
    await first.event(job_id, start["attempt"], "exited", exit_code=0)


async def test_a_gang_lands_in_one_zone_runs_on_its_nodes_and_goes_when_idle(
        tmp_path: Path, database_url: str) -> None:
    cloud = PlacingCloud()
    async with launching(tmp_path, database_url, cloud=cloud) as run, serve(run.exchange) as live:
        job = await run.exchange.submit(compute=GANG)
        report = await run.cycle()
        assert [t.outcome for t in report.tries] == ["launched"]
        first, second = cloud.calls
        _, _, zone, itype = cheapest(spot=False)[0]
        assert {(c.zone, c.instance_type, c.spot) for c in cloud.calls} == {(zone, itype, False)}
        assert first.gang is not None and second.gang == first.gang
        assert first.placement_group == second.placement_group == f"bourse-{first.gang}"
        assert first.security_groups == second.security_groups == ("sg-gang",)
        assert first.client_token != second.client_token and first.node_id != second.node_id
        assert [f["network"] for f in run.user_data] == [f"aws:{zone}"] * 2
        rows = await launches_of(run)
        assert [(r.gang, r.state) for r in rows] == [(first.gang, LaunchState.BOOTING)] * 2
        await run.tick()
        waiting = (await run.exchange.job(job["id"]))["pending_reason"]
        assert waiting.startswith(f"launching 2 x aws {rows[0].region} ({zone}) {itype}")
        agents = [await member(run, live, i) for i in range(2)]
        try:
            await run.tick()
            assert {r.state for r in await launches_of(run)} == {LaunchState.READY}
            await run.exchange.tick()  # placement: the gang on its two nodes
            await run_gang(agents, job["id"])
            assert (await run.exchange.job(job["id"]))["state"] == "SUCCEEDED"
            await run.tick()
            run.exchange.clock.advance(601)
            report = await run.tick()
            assert sorted(report.terminated) == sorted(r.id for r in rows)
            assert not cloud.alive()
            await run.launcher.reconcile()
            assert cloud.released == [first.gang]
        finally:
            for agent in agents:
                await agent.close()


async def test_a_member_refused_ends_the_gang_and_the_next_place_is_tried_whole(
        tmp_path: Path, database_url: str) -> None:
    cloud = PlacingCloud()
    order = cheapest(spot=False)
    _, region, zone, itype = order[0]
    cloud.fail(Failure.CAPACITY, "InsufficientInstanceCapacity", zone=zone or "*",
               instance_type=itype, market="on-demand", after=1)
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        await run.exchange.submit(compute=GANG)
        report = await run.cycle()
        assert [t.outcome for t in report.tries] == ["capacity", "launched"]
        assert report.tries[0].detail.startswith("member 2 of 2: InsufficientInstanceCapacity")
        refused, _, *again = cloud.calls
        assert [(c.zone, c.instance_type) for c in again] == [order[1][2:]] * 2
        assert again[0].gang != refused.gang and again[0].gang == again[1].gang
        first_instance = cloud.tokens[refused.client_token]
        assert cloud.terminated == [first_instance]  # the member launched did not live on
        assert cloud.released == [refused.gang]
        assert {i.tags["bourse:gang"] for i in cloud.alive()} == {again[0].gang}
        ended = {r.state: r for r in await launches_of(run) if r.gang == refused.gang}
        assert set(ended) == {LaunchState.TERMINATED, LaunchState.FAILED}
        assert "could not be launched whole" in (ended[LaunchState.TERMINATED].reason or "")
        assert await _blocks(run) == [f"zone:aws/{region}/{zone}/{itype}/on-demand"]


async def test_a_gang_counts_every_member_against_the_cap(tmp_path: Path,
                                                         database_url: str) -> None:
    price = cheapest(spot=False)[0][0]
    async with launching(tmp_path, database_url, cloud=PlacingCloud()) as run:
        capped = await run.exchange.client.patch("/api/v1/projects/default/limits",
                                                 json={"cap_hour": price * 1.5})
        assert capped.status_code == 200, capped.text
        gang = await run.exchange.submit(compute=GANG)
        await run.cycle()
        await run.exchange.tick()
        assert not run.cloud.calls
        reason = (await run.exchange.job(gang["id"]))["pending_reason"]
        assert "not launching 2 x aws" in reason
        assert f"these 2 cost ${2 * price:.2f}/h" in reason
        await run.exchange.submit(compute={"gpu": "a100:8"})  # one node fits the same cap
        await run.cycle()
        assert len(run.cloud.calls) == 1


async def test_a_gang_a_crash_left_half_made_is_ended_whole_and_launched_again(
        tmp_path: Path, database_url: str) -> None:
    cloud = PlacingCloud()
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        job = await run.exchange.submit(compute=GANG)
        await run.cycle()
        made, lost = cloud.calls
        async with run.exchange.state.db.write() as session:  # killed before member 2's call
            row = await session.get(Launch, lost.launch_id)
            assert row is not None
            row.state, row.instance_id, row.launched_at = LaunchState.REQUESTED, None, None
        del cloud.instances[cloud.tokens.pop(lost.client_token)]
        run.exchange.clock.advance(1)
        run.launcher.started_at = run.exchange.clock()  # the restarted coordinator
        run.exchange.clock.advance(RESTART_GRACE_S)
        await run.launcher.reconcile()
        states = {r.id: r.state for r in await launches_of(run)}
        assert (states[made.launch_id], states[lost.launch_id]) == (
            LaunchState.BOOTING, LaunchState.FAILED)
        report = await run.tick()
        assert report.terminated == [made.launch_id]
        assert cloud.terminated == [cloud.tokens[made.client_token]]
        [ended] = [r for r in await launches_of(run) if r.id == made.launch_id]
        assert "never came up whole" in (ended.reason or "")
        assert report.launched == [job["id"]]  # the job's gang, launched again whole
        fresh = {i.tags["bourse:gang"] for i in cloud.alive()}
        assert len(cloud.alive()) == 2 and fresh != {made.gang}
        await run.launcher.reconcile()
        assert cloud.released == [made.gang]


async def test_a_type_without_cluster_placement_is_launched_without_and_the_job_says_so(
        tmp_path: Path, database_url: str) -> None:
    _, _, zone, itype = cheapest(spot=False)[0]
    cloud = PlacingCloud(no_cluster={itype})
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        job = await run.exchange.submit(compute=GANG)
        await run.cycle()
        assert [(c.zone, c.placement_group) for c in cloud.calls] == [(zone, None)] * 2
        assert all(c.security_groups == ("sg-gang",) for c in cloud.calls)
        events = await run.exchange.events(job["id"])
        assert any(f"{itype} has no cluster placement" in e["message"] for e in events)


async def _blocks(run: Launching) -> list[str]:
    async with run.exchange.state.db.read() as session:
        from sqlalchemy import select
        return [b.key for b in (await session.scalars(select(LaunchBlockRow))).all()]
