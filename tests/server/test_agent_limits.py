"""The coordinator's own limits on agents: each attempt's log rate, whatever its agent does,
the size of one WebSocket frame, and a node's connections."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Live, place_job, until

from bourse.core.ratelimit import LogLimit
from bourse.server.agents.connections import (
    CLOSE_REPLACED,
    CLOSE_TRY_AGAIN,
    MAX_WAITING_PER_NODE,
)
from bourse.server.agents.frames import Malformed
from bourse.server.agents.socket import SocketChannel
from bourse.server.http.limits import MAX_FRAME_BYTES
from bourse.server.logs.meter import LogMeter

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]
LIMIT = LogLimit(rate=100, burst=1000)  # an attempt may send 2,000 bytes + 100 a second


async def test_an_agent_ignoring_the_log_rate_limit_is_cut_off(live: Live,
                                                              agent_factory: Factory) -> None:
    exchange = live.exchange
    exchange.state.hub.intake.meter = LogMeter(LIMIT)
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.send(agent.job_event(job_id, attempt, "started", time=1.0, pid=1))  # it lies
    line = b"x" * 499 + b"\n"
    for _ in range(4):  # 2,000 bytes: within what the limit allows at once
        await agent.log(job_id, attempt, agent.next_seq(job_id, attempt), line)
    for _ in range(3):  # past it: acknowledged, not stored
        await agent.log(job_id, attempt, agent.next_seq(job_id, attempt), line)
    exchange.clock.advance(20.0)  # 2,000 more allowed, of which 1,500 are counted already
    await agent.log(job_id, attempt, agent.next_seq(job_id, attempt), b"later\n")
    logs = (await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()["chunks"]
    stored = b"".join(base64.b64decode(c["data"]) for c in logs)
    assert stored == line * 4 + LIMIT.marker(1500) + b"later\n"
    messages = [e["message"] for e in await exchange.events(job_id)]
    assert sum("more log than the limit (100 B/s" in m for m in messages) == 1, messages


async def test_no_limit_stores_everything(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    exchange.state.hub.intake.meter = LogMeter(LogLimit(rate=0, burst=0))
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    for seq in range(1, 4):
        await agent.log(job_id, attempt, seq, b"y" * 60_000)
    logs = (await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()["chunks"]
    assert sum(len(base64.b64decode(c["data"])) for c in logs) == 180_000


async def test_a_frame_past_the_limit_closes_only_that_connection(
        live: Live, agent_factory: Factory) -> None:
    """uvicorn (as `bourse server` configures it) refuses it before it is assembled."""
    bad: FakeAgent = await agent_factory("bad")
    good: FakeAgent = await agent_factory("good")
    await bad.send_raw("x" * (MAX_FRAME_BYTES + 1))
    assert await bad.wait_closed() == 1009  # message too big
    await good.heartbeat()
    assert good.close_code is None


class _Socket:
    def __init__(self, text: str) -> None:
        self.text = text

    async def receive(self) -> dict[str, Any]:
        return {"type": "websocket.receive", "text": self.text}


async def test_the_hub_refuses_a_large_frame_under_any_server() -> None:
    fits = SocketChannel(_Socket("x" * MAX_FRAME_BYTES))  # type: ignore[arg-type]
    assert await fits.receive() == "x" * MAX_FRAME_BYTES
    with pytest.raises(Malformed, match="larger than the limit"):
        await SocketChannel(_Socket("x" * (MAX_FRAME_BYTES + 1))).receive()  # type: ignore[arg-type]


async def test_a_node_has_a_bounded_number_of_connections_waiting_for_hello(
        live: Live, agent_factory: Factory) -> None:
    first: FakeAgent = await agent_factory("crowded")
    waiting = [FakeAgent(live.ws_url, first.node_id, first.credential, first.capabilities,
                         name="crowded") for _ in range(MAX_WAITING_PER_NODE + 1)]
    for agent in waiting[:-1]:
        await agent.open()  # and never says hello
    hub = live.exchange.state.hub

    async def waiting_now(count: int) -> bool:
        return hub.connections._waiting[first.node_id] == count

    await until(lambda: waiting_now(MAX_WAITING_PER_NODE))
    await waiting[-1].open()
    assert await waiting[-1].wait_closed() == CLOSE_TRY_AGAIN
    assert first.close_code is None  # the session itself goes on
    await first.heartbeat()
    await waiting[0].close()  # one waiting place is free again
    await until(lambda: waiting_now(MAX_WAITING_PER_NODE - 1))
    await waiting[-1].connect()  # a hello: it replaces the session, and says why
    assert await first.wait_closed() == CLOSE_REPLACED
    for agent in waiting:
        await agent.close()
