"""The scheduler's one-shot ``tick(now)``: lost nodes, expired start leases, retries; and its
loop, woken by submits and by attempts that end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import (
    Clock,
    Exchange,
    Live,
    capabilities,
    open_exchange,
    place_job,
    serve,
    until_disconnected,
)

from bourse.protocol.agent import Hello
from bourse.server.services import agents

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]
CLOSE_POLICY = 1008


async def _running_on(exchange: Exchange, agent: FakeAgent, **spec: Any) -> str:
    job_id, attempt = await place_job(exchange, agent, **spec)
    await agent.event(job_id, attempt, "accepted")
    await agent.event(job_id, attempt, "started", pid=1)
    return job_id


async def test_a_node_silent_for_three_keep_alives_is_lost_and_its_job_moves(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    t0 = exchange.clock()
    first: FakeAgent = await agent_factory("first", keep_alive_s=20)
    job_id = await _running_on(exchange, first)
    exchange.clock.advance(50)
    second: FakeAgent = await agent_factory("second", keep_alive_s=20)
    report = await exchange.tick(t0 + 60)  # exactly three intervals: not yet
    assert (report.lost_nodes, report.placed) == ([], 0)
    report = await exchange.tick(t0 + 60.5)
    assert (report.lost_nodes, report.placed) == ([first.node_id], 1)
    assert await first.wait_closed() == CLOSE_POLICY
    start = await second.expect("start_job", job_id=job_id)
    assert start["attempt"] == 2
    job = await exchange.job(job_id)
    assert (job["state"], job["node_id"]) == ("SCHEDULED", second.node_id)
    assert [a["state"] for a in job["attempts"]] == ["LOST", "SCHEDULED"]
    assert "silent for 60 s" in job["attempts"][0]["reason"]
    assert "node_lost" in [e["kind"] for e in await exchange.events(job_id)]
    node = (await exchange.client.get(f"/api/v1/nodes/{first.node_id}")).json()
    assert (node["state"], node["connected"]) == ("lost", False)
    assert (await exchange.job_row(job_id)).avoid_nodes == [first.node_id]


async def test_a_lost_node_that_returns_is_online_and_its_old_attempt_is_stale(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(keep_alive_s=20)
    job_id = await _running_on(exchange, agent, max_retries=0)
    exchange.clock.advance(61)
    assert (await exchange.tick()).lost_nodes == [agent.node_id]
    await agent.wait_closed()
    await agent.connect(running=[(job_id, 1)])
    cancel = await agent.expect("cancel_job", job_id=job_id)
    assert (cancel["attempt"], cancel["stale"]) == (1, True)
    node = (await exchange.client.get(f"/api/v1/nodes/{agent.node_id}")).json()
    assert (node["state"], node["connected"]) == ("online", True)


async def test_a_job_fails_once_its_retries_are_spent(live: Live,
                                                      agent_factory: Factory) -> None:
    exchange = live.exchange
    first: FakeAgent = await agent_factory("first")
    job_id = await _running_on(exchange, first, max_retries=1)
    exchange.clock.advance(40)
    second: FakeAgent = await agent_factory("second")
    exchange.clock.advance(21)
    assert (await exchange.tick()).lost_nodes == [first.node_id]
    await second.expect("start_job", job_id=job_id)
    exchange.clock.advance(61)
    report = await exchange.tick()
    assert (report.lost_nodes, report.placed) == ([second.node_id], 0)
    job = await exchange.job(job_id)
    assert job["state"] == "FAILED"
    assert "no retries left" in job["reason"]
    assert [a["state"] for a in job["attempts"]] == ["LOST", "LOST"]


async def test_no_retries_means_the_first_loss_fails_the_job(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id = await _running_on(exchange, agent, max_retries=0)
    exchange.clock.advance(61)
    await exchange.tick()
    assert (await exchange.job(job_id))["state"] == "FAILED"


async def test_an_unacknowledged_start_is_lost_when_its_lease_ends(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    t0 = exchange.clock()
    silent: FakeAgent = await agent_factory("silent")
    job_id, _ = await place_job(exchange, silent)
    other: FakeAgent = await agent_factory("other")
    assert (await exchange.tick(t0 + 30)).placed == 0  # the lease is 30 s
    await exchange.tick(t0 + 30.5)
    start = await other.expect("start_job", job_id=job_id)
    assert start["attempt"] == 2
    job = await exchange.job(job_id)
    assert [a["state"] for a in job["attempts"]] == ["LOST", "SCHEDULED"]
    assert "did not acknowledge" in job["attempts"][0]["reason"]
    await silent.event(job_id, 1, "accepted")  # too late: told to stop, the job stays
    cancel = await silent.expect("cancel_job", job_id=job_id)
    assert cancel["stale"] is True
    assert (await exchange.job(job_id))["node_id"] == other.node_id


async def test_an_acknowledged_start_keeps_its_placement(live: Live,
                                                         agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "accepted")
    exchange.clock.advance(50)
    await agent.heartbeat(running=[(job_id, attempt)])
    report = await exchange.tick(exchange.clock() + 10)
    assert (report.lost_nodes, report.placed) == ([], 0)
    assert (await exchange.job(job_id))["state"] == "STARTING"


async def test_with_only_the_slow_node_left_the_job_goes_back_to_it(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, _ = await place_job(exchange, agent)
    exchange.clock.advance(31)
    await exchange.tick()
    start = await agent.expect("start_job", job_id=job_id)
    assert start["attempt"] == 2


async def test_a_cancelled_job_whose_node_is_lost_is_cancelled(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id = await _running_on(exchange, agent)
    await exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")
    exchange.clock.advance(61)
    await exchange.tick()
    job = await exchange.job(job_id)
    assert job["state"] == "CANCELLED"
    assert "node was lost" in job["reason"]


async def test_an_enrolled_node_that_never_connects_is_lost(exchange: Exchange) -> None:
    node_id, _ = await exchange.enroll("never")
    exchange.clock.advance(3 * exchange.config.keep_alive_s + 1)
    assert (await exchange.tick()).lost_nodes == [node_id]
    assert (await exchange.tick()).lost_nodes == []  # once


async def test_the_loop_places_on_submit_and_when_capacity_frees(
        tmp_path: Path, database_url: str) -> None:
    async with open_exchange(tmp_path, database_url, run_scheduler=True) as exchange, \
            serve(exchange) as live:
        node_id, credential = await exchange.enroll("solo")
        agent = FakeAgent(live.ws_url, node_id, credential, capabilities(cpus=1))
        await agent.connect()
        try:
            first = await exchange.submit()
            exchange.clock.advance(1)  # placement is oldest first
            second = await exchange.submit()
            start = await agent.expect("start_job", job_id=first["id"])
            await agent.barrier()
            assert agent.received("start_job") == []  # one CPU: the second waits
            await agent.run_job(first["id"], start["attempt"])
            await agent.expect("start_job", job_id=second["id"])
        finally:
            await agent.close()


async def test_a_restart_does_not_count_the_coordinators_downtime_as_silence(
        tmp_path: Path, database_url: str) -> None:
    clock = Clock()
    async with open_exchange(tmp_path, database_url, clock=clock) as before:
        node_id, _ = await before.enroll("n")
        async with before.state.db.write() as session:
            await agents.node_hello(session, node_id, Hello(
                name="n", capabilities=capabilities(), keep_alive_s=20), "s-1", clock())
        job = await before.submit()
        assert (await before.tick()).placed == 1  # its start lease ends 30 s from now
    restarted = clock.advance(1000)
    async with open_exchange(tmp_path, database_url, clock=clock) as after:
        report = await after.tick()
        assert (report.lost_nodes, (await after.job(job["id"]))["state"]) == ([], "SCHEDULED")
        # its start lease: the node is not connected, so it gets the start again when it
        # says hello; a node that never does is lost with it
        await after.tick(restarted + 30.5)
        assert (await after.job(job["id"]))["attempts"][0]["state"] == "SCHEDULED"
        assert (await after.tick(restarted + 60.5)).lost_nodes == [node_id]
        assert (await after.job(job["id"]))["attempts"][0]["state"] == "LOST"


async def test_a_node_is_lost_after_its_loss_window_not_its_keep_alives(
        tmp_path: Path, database_url: str) -> None:
    """The loss window is a setting of its own: a node heartbeating every 5 s that falls
    silent for a minute (twelve keep-alives) keeps its attempt; past two minutes it is lost."""
    async with (open_exchange(tmp_path, database_url, loss_window_s=120.0) as exchange,
                serve(exchange) as live):
        node_id, credential = await exchange.enroll("n")
        agent = FakeAgent(live.ws_url, node_id, credential, capabilities(), name="n",
                          keep_alive_s=5.0)
        welcome = await agent.connect()
        assert welcome["loss_window_s"] == 120.0
        job_id = await _running_on(exchange, agent)
        t0 = exchange.clock()
        assert (await exchange.tick(t0 + 60)).lost_nodes == []
        assert (await exchange.tick(t0 + 119.5)).lost_nodes == []
        assert (await exchange.job(job_id))["state"] == "RUNNING"
        assert (await exchange.tick(t0 + 120.5)).lost_nodes == [node_id]
        assert (await exchange.job(job_id))["attempts"][0]["state"] == "LOST"
        await agent.close()


async def test_a_start_lease_waits_for_a_node_that_is_away(
        live: Live, agent_factory: Factory) -> None:
    """Placed, then the node's link blinks before it acknowledges: it gets the start again when
    it says hello, with a fresh lease, instead of the attempt being lost and placed again."""
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(keep_alive_s=20)
    job = await exchange.submit()
    await exchange.tick()
    await agent.expect("start_job", job_id=job["id"])
    await agent.close()
    await until_disconnected(exchange, agent.node_id)
    exchange.clock.advance(40)  # past the 30 s start lease, inside the loss window (60 s)
    assert (await exchange.tick()).lost_nodes == []
    assert (await exchange.job(job["id"]))["attempts"][0]["state"] == "SCHEDULED"
    await agent.connect()
    start = await agent.expect("start_job", job_id=job["id"])
    assert start["attempt"] == 1
    exchange.clock.advance(20)
    await exchange.tick()
    assert (await exchange.job(job["id"]))["attempts"][0]["state"] == "SCHEDULED"
    exchange.clock.advance(15)  # 35 s after the hello, still unacknowledged: given up
    await exchange.tick()
    assert (await exchange.job(job["id"]))["attempts"][0]["state"] == "LOST"
