"""Job logs: pages with cursors, and the SSE follow stream over a real HTTP connection."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fake_agent import WAIT_S, FakeAgent
from server_harness import Exchange, Live, place_job

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


async def _page(exchange: Exchange, job_id: str, **params: Any) -> dict[str, Any]:
    response = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _text(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(base64.b64decode(c["data"]) for c in chunks)


async def _running(exchange: Exchange, agent: FakeAgent) -> tuple[str, int]:
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=1)
    return job_id, attempt


async def test_logs_page_with_cursors_and_say_when_they_are_done(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(exchange, agent)
    assert await _page(exchange, job_id) == {"chunks": [], "cursor": 0, "done": False,
                                             "pruned": False}
    lines = [b"epoch 1\n", b"warning\n", b"epoch 2\n", b"\xff\x00binary\n", b"epoch 3\n"]
    offsets = {"stdout": 0, "stderr": 0}
    for seq, line in enumerate(lines):
        stream = "stderr" if line == b"warning\n" else "stdout"
        await agent.log(job_id, attempt, seq, line, stream=stream, offset=offsets[stream])
        offsets[stream] += len(line)
    first = await _page(exchange, job_id, limit=2)
    assert [c["seq"] for c in first["chunks"]] == [0, 1]
    assert [c["stream"] for c in first["chunks"]] == ["stdout", "stderr"]
    assert [c["time"] for c in first["chunks"]] == [0.0, 0.0]  # the agent's (fake) clock
    assert first["cursor"] == first["chunks"][-1]["cursor"] and not first["done"]
    rest = await _page(exchange, job_id, after=first["cursor"])
    assert [c["seq"] for c in rest["chunks"]] == [2, 3, 4]
    assert _text(first["chunks"] + rest["chunks"]) == b"".join(lines)
    assert rest["done"] is False  # still running: more may come
    assert [c["offset"] for c in rest["chunks"]] == [8, 16, 25]
    await agent.event(job_id, attempt, "exited", exit_code=0)
    exact = await _page(exchange, job_id, limit=5)
    assert (len(exact["chunks"]), exact["done"]) == (5, False)  # a full page: maybe more
    end = await _page(exchange, job_id, after=exact["cursor"], limit=5)
    assert end == {"chunks": [], "cursor": exact["cursor"], "done": True, "pruned": False}
    assert (await _page(exchange, job_id, limit=6))["done"] is True


async def test_logs_of_every_attempt_are_kept_in_arrival_order(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(exchange, agent)
    await agent.log(job_id, attempt, 0, b"attempt one\n")
    await agent.heartbeat(running=[])  # lost
    await exchange.tick()
    await agent.expect("start_job", job_id=job_id)
    await agent.log(job_id, 2, 0, b"attempt two\n")
    page = await _page(exchange, job_id)
    assert [(c["attempt"], c["seq"]) for c in page["chunks"]] == [(1, 0), (2, 0)]


async def _sse(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of a text/event-stream; comments (keep-alives) are skipped."""
    event, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif not line and event:
            yield event, json.loads(data)
            event, data = "", ""


async def _next(events: AsyncIterator[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    async with asyncio.timeout(WAIT_S):
        return await anext(events)


async def test_follow_streams_chunks_and_states_until_the_job_ends(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(exchange, agent)
    await agent.log(job_id, attempt, 0, b"before\n")
    headers = {"Authorization": f"Bearer {exchange.admin_token}"}
    async with httpx.AsyncClient(base_url=live.http_url, headers=headers) as client, \
            client.stream("GET", f"/api/v1/jobs/{job_id}/logs/follow") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse(response)
        kind, chunk = await _next(events)
        assert (kind, base64.b64decode(chunk["data"])) == ("chunk", b"before\n")
        kind, job = await _next(events)
        assert (kind, job["state"]) == ("job", "RUNNING")
        await agent.log(job_id, attempt, 1, b"during\n")
        kind, chunk = await _next(events)
        assert (kind, base64.b64decode(chunk["data"]), chunk["seq"]) == (
            "chunk", b"during\n", 1)
        await agent.event(job_id, attempt, "exited", exit_code=0)
        rest = [item async for item in events]
    assert [(kind, body["state"]) for kind, body in rest] == [
        ("job", "SUCCEEDED"), ("end", "SUCCEEDED")]


async def test_follow_ends_without_end_when_the_coordinator_stops(live: Live) -> None:
    """Asked to stop, the coordinator ends open follows at once (uvicorn would otherwise
    wait for them until their jobs end); no ``end``: the client reconnects from its cursor."""
    exchange = live.exchange
    job = await exchange.submit()  # pending, with no agent: its follow would stay open
    headers = {"Authorization": f"Bearer {exchange.admin_token}"}
    async with httpx.AsyncClient(base_url=live.http_url, headers=headers) as client, \
            client.stream("GET", f"/api/v1/jobs/{job['id']}/logs/follow") as response:
        events = _sse(response)
        kind, view = await _next(events)
        assert (kind, view["state"]) == ("job", "PENDING")
        exchange.state.notifier.close()
        async with asyncio.timeout(WAIT_S):
            rest = [item async for item in events]
    assert rest == [("stopping", {"reason": "the coordinator is stopping"})]


async def test_follow_of_an_ended_job_replays_and_ends(exchange: Exchange) -> None:
    job = await exchange.submit()
    await exchange.client.post(f"/api/v1/jobs/{job['id']}/cancel")
    response = await exchange.client.get(f"/api/v1/jobs/{job['id']}/logs/follow")
    assert response.status_code == 200
    assert "event: job" in response.text
    assert response.text.rstrip().split("\n\n")[-1].startswith("event: end")


async def test_follow_starts_after_the_cursor(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(exchange, agent)
    for seq in range(3):
        await agent.log(job_id, attempt, seq, f"line {seq}\n".encode())
    cursor = (await _page(exchange, job_id, limit=2))["cursor"]
    await agent.event(job_id, attempt, "exited", exit_code=0)
    response = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs/follow",
                                         params={"after": cursor})
    chunks = [json.loads(block.split("data: ", 1)[1])
              for block in response.text.split("\n\n") if block.startswith("event: chunk")]
    assert [c["seq"] for c in chunks] == [2]
