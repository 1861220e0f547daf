"""Logs of ended jobs move into the exchange's store: the API answers the same pages (cursors,
attempts, offsets, ``done``) from the archive, late chunks are folded in on the next pass, and
the database keeps no rows for them."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, open_exchange, place_job, serve
from sqlalchemy import func, select

from bourse.protocol.api import LogChunkView
from bourse.server.dataplane import DataPlane
from bourse.server.db.schema import LogChunk
from bourse.server.logs.archive import archive_key, decode, encode, merge
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings

pytestmark = pytest.mark.anyio
AFTER_S = 600.0


@pytest.fixture
async def live(database_url: str, tmp_path: Path, store: MemoryStore) -> AsyncIterator[Live]:
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=store)
    async with open_exchange(tmp_path, database_url, dataplane=plane,
                             archive_logs_after_s=AFTER_S) as exchange, \
            serve(exchange) as served:
        yield served


@pytest.fixture
async def agent(agent_factory: Callable[..., Any]) -> FakeAgent:
    made: FakeAgent = await agent_factory()  # on this module's exchange (``live`` above)
    return made


async def _pages(exchange: Exchange, job_id: str, limit: int) -> list[dict[str, Any]]:
    pages, after = [], 0
    while True:
        response = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs",
                                              params={"after": after, "limit": limit})
        assert response.status_code == 200, response.text
        pages.append(response.json())
        if pages[-1]["done"]:
            return pages
        after = pages[-1]["cursor"]


async def _rows(exchange: Exchange, job_id: str) -> int:
    async with exchange.state.db.read() as session:
        return int(await session.scalar(
            select(func.count()).select_from(LogChunk).where(LogChunk.job_id == job_id)) or 0)


async def _ended_job_with_logs(exchange: Exchange, agent: FakeAgent, lines: int) -> str:
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=1)
    for seq in range(lines):
        await agent.log(job_id, attempt, seq, f"line {seq}\n".encode(),
                        stream="stderr" if seq % 3 == 0 else "stdout")
    await agent.event(job_id, attempt, "exited", exit_code=0)
    return job_id


async def test_an_ended_jobs_logs_move_to_the_store_and_read_the_same(
        live: Live, agent: FakeAgent, store: MemoryStore) -> None:
    exchange = live.exchange
    logs = exchange.state.logs
    assert logs is not None
    job_id = await _ended_job_with_logs(exchange, agent, 25)
    before = await _pages(exchange, job_id, limit=10)
    assert await logs.tick() == 0  # not yet: it ended less than AFTER_S ago
    exchange.clock.advance(AFTER_S + 1)
    assert await logs.tick() == 25
    assert await _rows(exchange, job_id) == 0
    assert len(decode(bytes(await store.get(archive_key(job_id))))) == 25
    assert await _pages(exchange, job_id, limit=10) == before
    assert await logs.tick() == 0  # nothing left to move


async def test_late_chunks_are_read_beside_the_archive_and_folded_in(
        live: Live, agent: FakeAgent) -> None:
    exchange = live.exchange
    logs = exchange.state.logs
    assert logs is not None
    job_id = await _ended_job_with_logs(exchange, agent, 3)
    exchange.clock.advance(AFTER_S + 1)
    await logs.tick()
    await agent.log(job_id, 1, 3, b"late\n")  # a replayed chunk after the archive was written
    [page] = await _pages(exchange, job_id, limit=100)
    text = b"".join(base64.b64decode(c["data"]) for c in page["chunks"])
    assert text == b"line 0\nline 1\nline 2\nlate\n"
    assert await logs.tick() == 1
    assert await _rows(exchange, job_id) == 0
    assert await _pages(exchange, job_id, limit=100) == [page]


async def test_a_running_jobs_logs_stay_in_the_database(live: Live, agent: FakeAgent) -> None:
    exchange = live.exchange
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=1)
    await agent.log(job_id, attempt, 0, b"still going\n")
    exchange.clock.advance(10 * AFTER_S)
    assert exchange.state.logs is not None and await exchange.state.logs.tick() == 0
    assert await _rows(exchange, job_id) == 1


def _chunk(cursor: int) -> LogChunkView:
    return LogChunkView(cursor=cursor, attempt=1, seq=cursor, stream="stdout", offset=0,
                        data=base64.b64encode(b"x").decode())


def test_encode_keeps_one_chunk_per_cursor_in_order() -> None:
    assert [c.cursor for c in decode(encode([_chunk(3), _chunk(1), _chunk(3)]))] == [1, 3]


def test_merge_pages_across_archive_and_rows() -> None:
    archived, rows = [_chunk(1), _chunk(2), _chunk(5)], [_chunk(7), _chunk(5)]
    assert [c.cursor for c in merge(archived, rows, after=1, limit=3)] == [2, 5, 7]
    assert merge(archived, rows, after=7, limit=3) == []
