"""The agent channel seam: a real agent (spool, runtime, a real job process) and a real
coordinator (hub, intake, scheduler) in one process, talking over the in-memory channel that
ships in ``bourse.channel`` — no socket anywhere between them."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from server_harness import Exchange, until

from bourse.agent import credentials
from bourse.agent.daemon import Agent, AgentConfig
from bourse.channel import ChannelClosed, MemoryChannel, memory_pair
from bourse.tunnel.loopback import host_mark

pytestmark = pytest.mark.anyio


async def test_a_memory_pair_carries_frames_in_order_and_says_when_it_closes() -> None:
    one, two = memory_pair()
    for text in ("a", "b", "c"):
        await one.send(text)
    assert [await two.receive() for _ in range(3)] == ["a", "b", "c"]
    await two.close(4000, "replaced")
    with pytest.raises(ChannelClosed) as closed:
        await one.receive()
    assert (closed.value.code, closed.value.reason) == (4000, "replaced")
    with pytest.raises(ChannelClosed):
        await two.send("late")


async def test_a_real_agent_runs_a_job_over_the_memory_channel(
        exchange: Exchange, tmp_path: Path) -> None:
    node_id, secret = await exchange.enroll("in-memory")
    work = tmp_path / "agent"
    credentials.save(work, credentials.NodeCredential("memory://", node_id, secret))
    served: list[asyncio.Task[None]] = []

    @contextlib.asynccontextmanager
    async def dial() -> AsyncIterator[MemoryChannel]:
        coordinator_end, agent_end = memory_pair()
        served.append(asyncio.create_task(exchange.state.hub.serve(coordinator_end, node_id,
                                                                   peer="127.0.0.1")))
        try:
            yield agent_end
        finally:
            await agent_end.close()

    agent = Agent(AgentConfig(server="memory://", work_dir=work, name="in-memory",
                              keep_alive_s=1.0, cpus=2, metrics_interval_s=0), dial=dial)
    running = asyncio.create_task(agent.run())
    try:
        await until(lambda: _connected(exchange, node_id), timeout=60)
        # its hello's mark is this machine's, from a loopback address: replicas go direct
        assert exchange.state.hub.connections[node_id].direct is (host_mark() is not None)
        job = await exchange.submit(command=["sh", "-c", "echo over the memory channel"])
        await exchange.tick()
        await until(lambda: _ended(exchange, job["id"]), timeout=60)
        detail = await exchange.job(job["id"])
        assert (detail["state"], detail["exit_code"]) == ("SUCCEEDED", 0)
        logs = (await exchange.client.get(f"/api/v1/jobs/{job['id']}/logs")).json()
        assert "over the memory channel" in "".join(
            base64.b64decode(c["data"]).decode() for c in logs["chunks"])
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        for task in served:
            await task


async def _connected(exchange: Exchange, node_id: str) -> bool:
    return exchange.state.hub.connected(node_id)


async def _ended(exchange: Exchange, job_id: str) -> bool:
    return (await exchange.job(job_id))["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
