"""A gang's logs through the API and the SDK: each chunk names the member (rank) that wrote it,
``?rank=N`` reads one member's (pages, follow, ``iter_logs``), a rank the job lacks is refused
with the field named (fake agents play the members, as in test_gangs.py)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import pytest
from fake_agent import WAIT_S, FakeAgent
from server_harness import Exchange, Live, place_job
from test_gangs import _nodes, _started_gang

from bourse.core.errors import InvalidInput
from bourse.protocol.api import LogChunkView
from bourse.sdk.async_client import AsyncClient
from bourse.sdk.client import Client

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]
# (rank, seq, bytes) in the order the members send them: rank 1's first line is split
WRITES = [(0, 0, b"r0 one\n"), (1, 0, b"r1 hal"), (0, 1, b"r0 two\n"), (1, 1, b"f\n"),
          (0, 2, b"r0 three\n")]


async def gang_with_logs(exchange: Exchange, agents: list[FakeAgent], *,
                         end: bool = True) -> tuple[str, dict[int, FakeAgent]]:
    """A two-member gang that wrote ``WRITES`` (and ended, with ``end``): its members by rank."""
    job, starts = await _started_gang(exchange, agents)
    members = {s["gang"]["rank"]: a for a, s in starts.items()}
    await members[1].event(job, 1, "accepted")
    for agent in members.values():
        await agent.event(job, 1, "started", pid=1)
    for rank, seq, data in WRITES:
        await members[rank].log(job, 1, seq, data)
    if end:
        await members[1].event(job, 1, "exited", exit_code=0)
        await members[0].event(job, 1, "exited", exit_code=0)
        assert (await exchange.job(job))["state"] == "SUCCEEDED"
    return job, members


async def page(exchange: Exchange, job_id: str, **params: Any) -> dict[str, Any]:
    response = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ranked(chunks: list[dict[str, Any]]) -> list[tuple[int, bytes]]:
    return [(c["rank"], base64.b64decode(c["data"])) for c in chunks]


async def test_each_chunk_names_its_member_and_a_rank_reads_only_that_members(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    job, _ = await gang_with_logs(exchange, await _nodes(agent_factory, 2))
    every = await page(exchange, job)
    assert ranked(every["chunks"]) == [(r, d) for r, _, d in WRITES]  # arrival order
    one = await page(exchange, job, rank=1)
    assert ranked(one["chunks"]) == [(1, b"r1 hal"), (1, b"f\n")]
    assert [c["seq"] for c in one["chunks"]] == [0, 1]
    # nothing of rank 1's is left after rank 0's last chunk: the cursor moves past it too
    assert (one["cursor"], one["done"]) == (every["cursor"], True)
    first = await page(exchange, job, rank=0, limit=2)
    assert ranked(first["chunks"]) == [(0, b"r0 one\n"), (0, b"r0 two\n")]
    assert (first["cursor"], first["done"]) == (first["chunks"][-1]["cursor"], False)
    rest = await page(exchange, job, rank=0, limit=2, after=first["cursor"])
    assert (ranked(rest["chunks"]), rest["done"]) == ([(0, b"r0 three\n")], True)


async def test_a_one_node_jobs_chunks_are_rank_0(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.log(job_id, attempt, 0, b"alone\n")
    assert ranked((await page(exchange, job_id))["chunks"]) == [(0, b"alone\n")]
    assert ranked((await page(exchange, job_id, rank=0))["chunks"]) == [(0, b"alone\n")]


@pytest.mark.parametrize(("rank", "field", "message"), [
    ("2", "rank", "rank 2 is not a member of job {job}: its 2 members are ranks 0 to 1"),
    ("-1", "query.rank", "greater than or equal to 0"),
    ("one", "query.rank", "a valid integer"),
    ("1024", "query.rank", "less than 1024"),
])
async def test_a_rank_the_gang_lacks_is_refused_naming_the_field(
        live: Live, agent_factory: Factory, rank: str, field: str, message: str) -> None:
    exchange = live.exchange
    job, _ = await gang_with_logs(exchange, await _nodes(agent_factory, 2), end=False)
    for path in ("logs", "logs/follow"):
        response = await exchange.client.get(f"/api/v1/jobs/{job}/{path}", params={"rank": rank})
        assert response.status_code == 422, (path, response.text)
        body = response.json()
        assert body["field"] == field
        assert message.format(job=job) in body["error"], body


async def test_a_one_node_job_has_rank_0_only(exchange: Exchange) -> None:
    job = await exchange.submit()
    response = await exchange.client.get(f"/api/v1/jobs/{job['id']}/logs", params={"rank": 1})
    assert response.status_code == 422
    assert response.json()["error"] == (f"rank 1 is not a member of job {job['id']}: it runs "
                                        "on one node (rank 0)")
    assert response.json()["hint"] == "leave out the rank, or pass 0"


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    event = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield event, json.loads(line.removeprefix("data: "))


async def test_follow_of_one_member_streams_only_its_chunks_as_they_come(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    job, members = await gang_with_logs(exchange, await _nodes(agent_factory, 2), end=False)
    headers = {"Authorization": f"Bearer {exchange.admin_token}"}
    async with httpx.AsyncClient(base_url=live.http_url, headers=headers) as client, \
            client.stream("GET", f"/api/v1/jobs/{job}/logs/follow",
                          params={"rank": 1}) as response:
        assert response.status_code == 200
        events = sse_events(response)
        seen = []
        async with asyncio.timeout(WAIT_S):
            while len(seen) < 2:
                kind, body = await anext(events)
                if kind == "chunk":
                    seen.append((body["rank"], base64.b64decode(body["data"])))
        assert seen == [(1, b"r1 hal"), (1, b"f\n")]
        await members[0].log(job, 1, 3, b"r0 four\n")  # not rank 1's: never sent
        await members[1].log(job, 1, 2, b"r1 late\n")
        async with asyncio.timeout(WAIT_S):
            kind, body = await anext(events)
            while kind != "chunk":
                kind, body = await anext(events)
        assert (body["rank"], base64.b64decode(body["data"])) == (1, b"r1 late\n")


async def test_the_sdk_reads_one_member_or_all(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    job, _ = await gang_with_logs(exchange, await _nodes(agent_factory, 2))
    token = exchange.admin_token
    async with AsyncClient(live.http_url, token) as client:
        every = [c async for c in client.iter_logs(job)]
        one = [c async for c in client.iter_logs(job, rank=1)]
        followed = [i async for i in client.follow(job, rank=0)]
        with pytest.raises(InvalidInput, match="ranks 0 to 1"):
            await client.logs(job, rank=2)
    assert [(c.rank, c.seq) for c in every] == [(r, s) for r, s, _ in WRITES]
    assert [(c.rank, c.seq) for c in one] == [(1, 0), (1, 1)]
    assert [(i.rank, i.seq) for i in followed if isinstance(i, LogChunkView)] == [
        (0, 0), (0, 1), (0, 2)]

    def sync() -> tuple[list[LogChunkView], list[Any]]:
        with Client(live.http_url, token) as plain:
            return list(plain.iter_logs(job, rank=1)), list(plain.follow(job, rank=1))

    pages, follows = await anyio.to_thread.run_sync(sync)
    assert [(c.rank, c.seq) for c in pages] == [(1, 0), (1, 1)]
    assert [(i.rank, i.seq) for i in follows if isinstance(i, LogChunkView)] == [(1, 0), (1, 1)]
