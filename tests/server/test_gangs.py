"""Gangs through the coordinator's real protocol: placed all or nothing on nodes of one
network, rank 0 started first and the others once it said its port, ended and retried as one
(fake agents play the nodes; tests/gang runs real ones)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live
from sqlalchemy import select

from bourse.protocol.agent import Metrics
from bourse.protocol.metrics import JobSample
from bourse.server.db.schema import Attempt, LogChunk

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


async def _nodes(make: Factory, count: int, network: str = "lab",
                 cpus: int = 2) -> list[FakeAgent]:
    return [await make(f"n{i}", cpus=cpus, network=network, address=f"10.9.0.{i + 1}")
            for i in range(count)]


async def _starts(agent: FakeAgent) -> list[dict[str, Any]]:
    await agent.barrier()
    found = agent.received("start_job")
    for body in found:
        await agent.expect("start_job", job_id=body["job_id"])
    return found


async def _cancels(agent: FakeAgent) -> list[dict[str, Any]]:
    await agent.barrier()
    return agent.received("cancel_job")


async def _first_start(agents: list[FakeAgent]) -> tuple[FakeAgent, dict[str, Any]]:
    """The agent told to start first (rank 0) and its start. Waited for, not looked for: with
    a data plane a start is completed (credentials) before it is sent, after the commit."""
    waits = {asyncio.ensure_future(a.expect("start_job")): a for a in agents}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    first = next(iter(done))
    return waits[first], first.result()


async def _started_gang(exchange: Exchange, agents: list[FakeAgent],
                        **compute: Any) -> tuple[str, dict[FakeAgent, dict[str, Any]]]:
    """A gang submitted, placed and through its rendezvous: the start each member got."""
    job = (await exchange.submit(compute={"num_nodes": len(agents), **compute}))["id"]
    await exchange.tick()
    first, start = await _first_start(agents)
    assert start["gang"]["rank"] == 0
    await first.event(job, start["attempt"], "accepted")
    await first.event(job, start["attempt"], "rendezvous", address="10.9.0.1", port=29517)
    starts = {first: start}
    for agent in agents:
        if agent is not first:
            starts[agent] = await agent.expect("start_job")
    return job, starts


async def test_a_gang_is_placed_whole_and_its_ranks_start_after_rank_0s_port(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agents = await _nodes(agent_factory, 3)
    job = (await exchange.submit(compute={"num_nodes": 3, "cpus": 2}))["id"]
    report = await exchange.tick()
    assert report.placed == 1
    first_starts = [await _starts(a) for a in agents]
    assert sorted(len(s) for s in first_starts) == [0, 0, 1]  # rank 0 only, so far
    (rank0, start), = ((a, s[0]) for a, s in zip(agents, first_starts, strict=True) if s)
    gang = start["gang"]
    assert (gang["rank"], gang["port"], len(gang["addresses"])) == (0, None, 3)
    detail = await exchange.job(job)
    assert detail["state"] == "SCHEDULED"
    await rank0.event(job, 1, "accepted")
    await rank0.event(job, 1, "rendezvous", address=gang["addresses"][0], port=29517)
    others = [a for a in agents if a is not rank0]
    later = [(await _starts(a))[0]["gang"] for a in others]
    assert sorted(g["rank"] for g in later) == [1, 2]
    assert all(g["port"] == 29517 and g["addresses"] == gang["addresses"] for g in later)
    for agent in others:
        await agent.run_job(job, 1)
    assert (await exchange.job(job))["state"] == "RUNNING"  # rank 0 still runs
    await rank0.event(job, 1, "started", pid=7)
    await rank0.event(job, 1, "exited", exit_code=0)
    detail = await exchange.job(job)
    assert detail["state"] == "SUCCEEDED", detail
    assert "all 3 members exited 0" in detail["reason"]


async def test_one_member_failing_stops_the_others_and_retries_the_gang_elsewhere(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agents = await _nodes(agent_factory, 3, cpus=1)
    job, starts = await _gang_on_two_of_three(exchange, agents)
    failing = next(a for a, s in starts.items() if s["gang"]["rank"] == 1)
    survivor = next(a for a in starts if a is not failing)
    for agent in starts:
        await agent.event(job, 1, "started", pid=1)
    await failing.event(job, 1, "exited", exit_code=3)
    cancels = await _cancels(survivor)
    assert [(c["job_id"], c["attempt"]) for c in cancels] == [(job, 1)]
    assert "its gang's rank 1 failed" in cancels[0]["reason"]
    await exchange.tick()  # (the exit's own transaction may have placed it again already)
    detail = await exchange.job(job)
    assert (detail["state"], detail["attempt"]) == ("SCHEDULED", 2), detail
    placed = {a: s for a in agents for s in await _starts(a)}
    assert failing not in placed  # the gang avoids the node that failed
    assert {s["attempt"] for s in placed.values()} == {2}


async def _gang_on_two_of_three(
        exchange: Exchange, agents: list[FakeAgent]) -> tuple[str, dict[FakeAgent, Any]]:
    response = await exchange.client.post("/api/v1/jobs", json={
        "command": ["python", "-c", "pass"], "compute": {"num_nodes": 2, "cpus": 1},
        "retry": {"on_failure": 1}})
    assert response.status_code == 201, response.text
    job = response.json()["id"]
    await exchange.tick()
    starts = {a: s for a in agents for s in await _starts(a)}
    (first, _), = starts.items()
    await first.event(job, 1, "rendezvous", port=29600)
    for agent in agents:
        if agent is not first:
            starts.update((agent, s) for s in await _starts(agent))
    assert len(starts) == 2
    return job, starts


async def test_a_lost_member_ends_the_attempt_for_all(live: Live,
                                                      agent_factory: Factory) -> None:
    exchange = live.exchange
    agents = await _nodes(agent_factory, 2)
    job, _ = await _started_gang(exchange, agents)
    for agent in agents:
        await agent.event(job, 1, "started", pid=1)
    exchange.clock.advance(200)
    await agents[1].heartbeat(running=[(job, 1)])  # one stays, the other goes silent
    report = await exchange.tick()
    assert report.lost_nodes == [agents[0].node_id]
    assert [c["job_id"] for c in await _cancels(agents[1])] == [job]
    async with exchange.state.db.read() as session:
        states = dict((await session.execute(select(Attempt.node_id, Attempt.state).where(
            Attempt.job_id == job, Attempt.number == 1))).all())
    assert states == {agents[0].node_id: "LOST", agents[1].node_id: "CANCELLED"}
    assert (await exchange.job(job))["state"] == "PENDING"  # one node left: it waits


async def test_cancelling_a_gang_stops_every_member(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agents = await _nodes(agent_factory, 2)
    job, _ = await _started_gang(exchange, agents)
    assert (await exchange.client.post(f"/api/v1/jobs/{job}/cancel")).status_code == 200
    for agent in agents:
        assert [c["job_id"] for c in await _cancels(agent)] == [job]


async def test_two_gangs_on_three_nodes_one_runs_the_other_waits_holding_nothing(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    await _nodes(agent_factory, 3, cpus=1)
    first = (await exchange.submit(compute={"num_nodes": 2, "cpus": 1}))["id"]
    exchange.clock.advance(1)
    second = (await exchange.submit(compute={"num_nodes": 2, "cpus": 1}))["id"]
    report = await exchange.tick()
    assert report.placed == 1
    async with exchange.state.db.read() as session:
        held = (await session.scalars(select(Attempt.job_id))).all()
    assert held == [first, first]  # the waiting gang holds no node
    waiting = await exchange.job(second)
    assert waiting["state"] == "PENDING"
    assert "needs 2 nodes of one network" in waiting["pending_reason"]
    assert "lab: 1" in waiting["pending_reason"]


async def test_a_gang_waits_for_a_node_to_join_its_network_then_runs(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    await _nodes(agent_factory, 2)
    await agent_factory("elsewhere", network="other", address="10.8.0.1")
    await agent_factory("loose")
    job = (await exchange.submit(compute={"num_nodes": 3}))["id"]
    report = await exchange.tick()
    assert (report.placed, report.failed) == (0, 0)
    reason = (await exchange.job(job))["pending_reason"]
    assert "lab: 2 (n0, n1); other: 1 (elsewhere); 1 without a network" in reason
    third = await agent_factory("n2", network="lab", address="10.9.0.3")
    await exchange.tick()
    detail = await exchange.job(job)
    assert (detail["state"], detail["attempt"]) == ("SCHEDULED", 1)
    async with exchange.state.db.read() as session:
        nodes = set((await session.scalars(select(Attempt.node_id).where(
            Attempt.job_id == job))).all())
    assert third.node_id in nodes and len(nodes) == 3


async def test_each_members_logs_are_kept_apart(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agents = await _nodes(agent_factory, 2)
    job, starts = await _started_gang(exchange, agents)
    for agent, start in starts.items():
        await agent.log(job, 1, 0, f"rank {start['gang']['rank']}\n".encode())
        await agent.log(job, 1, 0, b"a duplicate is dropped\n")
    async with exchange.state.db.read() as session:
        rows = (await session.execute(select(LogChunk.rank, LogChunk.data).where(
            LogChunk.job_id == job).order_by(LogChunk.rank))).all()
    assert [(r, bytes(d)) for r, d in rows] == [(0, b"rank 0\n"), (1, b"rank 1\n")]


async def test_a_gang_that_cannot_gather_in_time_releases_every_node(
        live: Live, agent_factory: Factory) -> None:
    """Rank 0 never says its port: the others' start leases run out and the gang is placed
    again, holding nothing meanwhile."""
    exchange = live.exchange
    agents = await _nodes(agent_factory, 2)
    job = (await exchange.submit(compute={"num_nodes": 2}))["id"]
    await exchange.tick()
    exchange.clock.advance(31)
    for agent in agents:
        await agent.heartbeat()
    await exchange.tick()
    async with exchange.state.db.read() as session:
        states = sorted((await session.scalars(select(Attempt.state).where(
            Attempt.job_id == job, Attempt.number == 1))).all())
    assert states == ["CANCELLED", "LOST"]
    assert (await exchange.job(job))["attempt"] == 2  # placed again, whole


async def test_each_members_metrics_are_told_apart(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agents = await _nodes(agent_factory, 2)
    job, starts = await _started_gang(exchange, agents)
    for agent, start in starts.items():
        rank = start["gang"]["rank"]
        await agent.event(job, 1, "started", pid=1)
        await agent.send(Metrics(jobs=[JobSample(job_id=job, attempt=1, time=exchange.clock(),
                                                 cpu_percent=10.0 * rank + 5)]))

    async def samples(**params: Any) -> list[tuple[int, float]]:
        response = await exchange.client.get(f"/api/v1/jobs/{job}/metrics", params=params)
        assert response.status_code == 200, response.text
        return sorted((s["rank"], s["cpu_percent"]) for s in response.json()["samples"])

    assert await samples() == [(0, 5.0), (1, 15.0)]
    assert await samples(rank=1) == [(1, 15.0)]
    refused = await exchange.client.get(f"/api/v1/jobs/{job}/metrics", params={"rank": 2})
    assert refused.status_code == 422 and refused.json()["field"] == "rank"
