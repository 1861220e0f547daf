"""Simulated agents (``bourse.agent.sim``) against a real coordinator, over the in-memory channel
and over the real WebSocket; and the coordinator's side of holding many of them: a pass with
nothing pending reads no node, and a node whose connection talks is never judged silent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from server_harness import Exchange, Live, capabilities, until

from bourse.agent.sim import SimAgent, SimConfig, websocket_dial
from bourse.channel import Channel, memory_pair
from bourse.server.agents.connections import Connections
from bourse.server.agents.frames import Connection
from bourse.server.services import placement
from bourse.server.services.capacity import Memo
from bourse.server.services.placement import place_pending

pytestmark = pytest.mark.anyio


def _memory_dial(exchange: Exchange, node_id: str, served: list[asyncio.Task[None]]) -> Any:
    @contextlib.asynccontextmanager
    async def dial() -> AsyncIterator[Channel]:
        coordinator_end, agent_end = memory_pair()
        served.append(asyncio.create_task(exchange.state.hub.serve(coordinator_end, node_id)))
        try:
            yield agent_end
        finally:
            await agent_end.close()
    return dial


@contextlib.asynccontextmanager
async def _running(agents: list[SimAgent]) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(a.run()) for a in agents]
    try:
        await asyncio.wait_for(asyncio.gather(*(a.welcomed.wait() for a in agents)), 30)
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _states(exchange: Exchange, ids: list[str]) -> list[str]:
    return [(await exchange.job(i))["state"] for i in ids]


async def test_a_fleet_of_simulated_agents_runs_jobs_over_the_memory_channel(
        exchange: Exchange) -> None:
    served: list[asyncio.Task[None]] = []
    agents = []
    for n in range(10):
        node_id, _ = await exchange.enroll(f"sim-{n}")
        config = SimConfig(f"sim-{n}", capabilities(cpus=1), keep_alive_s=0.2, log_chunks=2)
        agents.append(SimAgent(config, _memory_dial(exchange, node_id, served)))
    async with _running(agents):
        jobs = [(await exchange.submit())["id"] for _ in range(15)]  # more than the CPUs
        for _ in range(10):
            await exchange.tick()
            if set(await _states(exchange, jobs)) == {"SUCCEEDED"}:
                break
        await until(lambda: _all(exchange, jobs, "SUCCEEDED"))
        await until(lambda: _true(all(a.stats.ack_s for a in agents)))
        logs = (await exchange.client.get(f"/api/v1/jobs/{jobs[0]}/logs")).json()
        assert len(logs["chunks"]) == 2
        assert sum(a.stats.jobs_ended for a in agents) == 15
        assert all(a.stats.closed is None for a in agents)
    for task in served:
        await task


async def test_simulated_agents_speak_the_real_websocket(live: Live) -> None:
    agents = []
    for n in range(3):
        _, credential = await live.exchange.enroll(f"ws-{n}")
        # a keep-alive long enough for the pings' timeout (two) on a loaded machine
        agents.append(SimAgent(SimConfig(f"ws-{n}", capabilities(cpus=1), keep_alive_s=1.0),
                               websocket_dial(live.ws_url, credential, 1.0)))
    async with _running(agents):
        assert {a.node_id for a in agents} == set(live.exchange.state.hub.connections)
        job = (await live.exchange.submit())["id"]
        await live.exchange.tick()
        await until(lambda: _all(live.exchange, [job], "SUCCEEDED"))
        await until(lambda: _true(all(a.stats.ack_s for a in agents)))


async def test_a_pass_with_nothing_pending_reads_no_node(
        exchange: Exchange, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[bool] = []

    async def counted(*args: Any, **kwargs: Any) -> list[Any]:
        read.append(True)
        return []

    monkeypatch.setattr(placement, "live_capacity", counted)
    memo = Memo()
    async with exchange.state.db.write() as session:
        for full in (True, False, False):
            report = await place_pending(session, exchange.clock(), 30.0, full=full, memo=memo)
            assert (report.placed, report.unplaced) == (0, 0)
    assert read == []
    await exchange.submit()
    async with exchange.state.db.write() as session:  # a job waits: the room is read
        await place_pending(session, exchange.clock(), 30.0, full=False, memo=memo)
    assert read == [True]


async def test_a_node_whose_hello_waits_is_not_judged_silent(exchange: Exchange) -> None:
    node_id, _ = await exchange.enroll("slow-hello")
    connections = exchange.state.hub.connections
    assert connections.wait(node_id)  # its connection is open, its hello not handled yet
    exchange.clock.advance(10 * exchange.config.keep_alive_s)
    assert (await exchange.tick()).lost_nodes == []
    connections.waited(node_id)  # the connection went away without a hello
    exchange.clock.advance(10 * exchange.config.keep_alive_s)
    assert (await exchange.tick()).lost_nodes == [node_id]


async def _all(exchange: Exchange, ids: list[str], state: str) -> bool:
    return set(await _states(exchange, ids)) == {state}


async def _true(value: bool) -> bool:
    return value


async def test_a_node_whose_messages_wait_for_the_intake_is_heard_now() -> None:
    connections = Connections()
    talking = Connection("n-1", "s-1", memory_pair()[0])
    quiet = Connection("n-2", "s-2", memory_pair()[0])
    connections.add(talking)
    connections.add(quiet)
    talking.busy = True  # its reader holds a message the intake has no room for yet
    connections.heard("n-2", 5.0)
    assert connections.take_heard(100.0) == {"n-1": 100.0, "n-2": 5.0}
    assert connections.take_heard(200.0) == {"n-1": 200.0}  # n-2 said nothing since
