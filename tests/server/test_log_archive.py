"""Logs of ended jobs move into the exchange's store: the API answers the same pages (cursors,
attempts, ranks, offsets, ``done``) from the archive, late chunks are folded in on the next pass,
and the database keeps no rows for them. Archives written before gangs read as rank 0."""

from __future__ import annotations

import base64
import gzip
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, open_exchange, place_job, serve
from sqlalchemy import func, select
from test_gang_logs import gang_with_logs
from test_gangs import _nodes

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


async def _pages(exchange: Exchange, job_id: str, limit: int,
                 **params: Any) -> list[dict[str, Any]]:
    pages, after = [], 0
    while True:
        response = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs",
                                              params={"after": after, "limit": limit, **params})
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


async def test_a_gangs_archive_keeps_each_chunks_rank(
        live: Live, agent_factory: Callable[..., Any], store: MemoryStore) -> None:
    exchange = live.exchange
    assert exchange.state.logs is not None
    job_id, _ = await gang_with_logs(exchange, await _nodes(agent_factory, 2))
    ranks: list[dict[str, int]] = [{}, {"rank": 0}, {"rank": 1}]  # every member, or one
    before = [await _pages(exchange, job_id, 2, **rank) for rank in ranks]
    exchange.clock.advance(AFTER_S + 1)
    assert await exchange.state.logs.tick() == 5
    assert await _rows(exchange, job_id) == 0
    archived = decode(bytes(await store.get(archive_key(job_id))))
    assert [c.rank for c in archived] == [0, 1, 0, 1, 0]
    after = [await _pages(exchange, job_id, 2, **rank) for rank in ranks]
    assert after == before
    assert [c["rank"] for p in after[2] for c in p["chunks"]] == [1, 1]


# an archive line as coordinators wrote them before gangs: no rank
OLD_LINE = ('{"cursor":{cursor},"attempt":1,"seq":{seq},"stream":"stdout","offset":0,'
            '"data":"{data}"}')


def _old_archive(texts: list[bytes], first_cursor: int) -> bytes:
    lines = [OLD_LINE.replace("{cursor}", str(first_cursor + i)).replace("{seq}", str(i))
             .replace("{data}", base64.b64encode(t).decode()) for i, t in enumerate(texts)]
    return gzip.compress("\n".join(lines).encode())


def test_an_archive_written_before_gangs_decodes_as_rank_0() -> None:
    chunks = decode(_old_archive([b"a\n", b"b\n"], 7))
    assert [(c.cursor, c.rank, c.seq) for c in chunks] == [(7, 0, 0), (8, 0, 1)]


async def test_an_archive_written_before_gangs_is_read_as_rank_0(
        live: Live, agent: FakeAgent, store: MemoryStore) -> None:
    exchange = live.exchange
    assert exchange.state.logs is not None
    job_id = await _ended_job_with_logs(exchange, agent, 3)
    exchange.clock.advance(AFTER_S + 1)
    await exchange.state.logs.tick()
    first = decode(bytes(await store.get(archive_key(job_id))))[0].cursor
    await store.put(archive_key(job_id), _old_archive([b"old 0\n", b"old 1\n", b"old 2\n"],
                                                      first))
    [page] = await _pages(exchange, job_id, 100)
    assert [(c["rank"], base64.b64decode(c["data"])) for c in page["chunks"]] == [
        (0, b"old 0\n"), (0, b"old 1\n"), (0, b"old 2\n")]
    assert await _pages(exchange, job_id, 100, rank=0) == [page]


def _chunk(cursor: int, rank: int = 0) -> LogChunkView:
    return LogChunkView(cursor=cursor, attempt=1, rank=rank, seq=cursor, stream="stdout",
                        offset=0, data=base64.b64encode(b"x").decode())


def test_encode_keeps_one_chunk_per_cursor_in_order() -> None:
    assert [c.cursor for c in decode(encode([_chunk(3), _chunk(1), _chunk(3)]))] == [1, 3]


def test_merge_pages_across_archive_and_rows() -> None:
    archived, rows = [_chunk(1), _chunk(2), _chunk(5)], [_chunk(7), _chunk(5)]
    assert [c.cursor for c in merge(archived, rows, after=1, limit=3)] == [2, 5, 7]
    assert merge(archived, rows, after=7, limit=3) == []


def test_merge_reads_one_members_chunks_before_the_limit() -> None:
    archived = [_chunk(1, 0), _chunk(2, 1), _chunk(3, 0), _chunk(4, 1)]
    rows = [_chunk(5, 0), _chunk(6, 1)]
    assert [c.cursor for c in merge(archived, rows, after=0, limit=2, rank=1)] == [2, 4]
    assert [c.cursor for c in merge(archived, rows, after=2, limit=5, rank=1)] == [4, 6]
    assert [c.cursor for c in merge(archived, rows, after=0, limit=9, rank=0)] == [1, 3, 5]
