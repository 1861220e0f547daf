"""Log retention (``--log-retention``): an ended job's logs are deleted once it ended longer ago
than the exchange keeps them — its archive from the store, its rows from the database — in
short passes of a few jobs each; readers are told the logs were pruned; running jobs and jobs
that ended recently keep theirs; a store that fails is retried on the next pass."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, open_exchange, place_job, serve
from test_log_archive import _ended_job_with_logs, _rows

from bourse.cli.server import retention_s
from bourse.core.errors import InvalidInput
from bourse.server.dataplane import DataPlane
from bourse.server.logs import retention
from bourse.server.logs.archive import archive_key
from bourse.server.logs.retention import LogRetention
from bourse.storage import MemoryIssuer, MemoryStore, StorageError, StoreSettings

pytestmark = pytest.mark.anyio
AFTER_S = 600.0  # archived this long after the job ended
KEEP_S = 86400.0  # deleted this long after


@pytest.fixture
async def live(database_url: str, tmp_path: Path, store: MemoryStore) -> AsyncIterator[Live]:
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=store)
    async with open_exchange(tmp_path, database_url, dataplane=plane,
                             archive_logs_after_s=AFTER_S, log_retention_s=KEEP_S) as exchange, \
            serve(exchange) as served:
        yield served


@pytest.fixture
async def agent(agent_factory: Callable[..., Any]) -> FakeAgent:
    made: FakeAgent = await agent_factory()
    return made


def _pruner(exchange: Exchange) -> LogRetention:
    assert exchange.state.retention is not None
    return exchange.state.retention


async def _page(exchange: Exchange, job_id: str) -> dict[str, Any]:
    response = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def test_logs_past_the_retention_are_deleted_from_the_store_and_the_database(
        live: Live, agent: FakeAgent, agent_factory: Callable[..., Any],
        store: MemoryStore) -> None:
    exchange = live.exchange
    assert exchange.state.logs is not None
    archived = await _ended_job_with_logs(exchange, agent, 5)
    exchange.clock.advance(AFTER_S + 1)
    assert await exchange.state.logs.tick() == 5  # archived: in the store, no rows
    later = await agent_factory()  # the first agent is silent since the clock moved
    in_db = await _ended_job_with_logs(exchange, later, 3)  # ended later: rows only
    exchange.clock.advance(KEEP_S - AFTER_S)
    assert await _pruner(exchange).tick() == 1  # the first is due, the second not yet
    with pytest.raises(StorageError):
        await store.get(archive_key(archived))
    page = await _page(exchange, archived)
    assert (page["chunks"], page["done"], page["pruned"]) == ([], True, True)
    assert (await _page(exchange, in_db))["pruned"] is False
    assert len((await _page(exchange, in_db))["chunks"]) == 3
    exchange.clock.advance(AFTER_S + 1)
    assert await _pruner(exchange).tick() == 1
    assert await _rows(exchange, in_db) == 0
    assert (await _page(exchange, in_db))["pruned"] is True
    assert await _pruner(exchange).tick() == 0  # nothing left


async def test_a_running_jobs_logs_are_kept_however_old(live: Live, agent: FakeAgent) -> None:
    exchange = live.exchange
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=1)
    await agent.log(job_id, attempt, 0, b"still going\n")
    exchange.clock.advance(10 * KEEP_S)
    assert await _pruner(exchange).tick() == 0
    assert await _rows(exchange, job_id) == 1


async def test_a_pass_prunes_a_batch_and_the_next_pass_the_rest(
        live: Live, agent: FakeAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    exchange = live.exchange
    monkeypatch.setattr(retention, "BATCH", 2)
    jobs = [await _ended_job_with_logs(exchange, agent, 1) for _ in range(3)]
    exchange.clock.advance(KEEP_S + 1)
    assert await _pruner(exchange).tick() == 2
    assert await _pruner(exchange).tick() == 1
    assert all([(await _page(exchange, j))["pruned"] for j in jobs])


async def test_a_store_that_fails_leaves_the_logs_for_the_next_pass(
        live: Live, agent: FakeAgent, store: MemoryStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    exchange = live.exchange
    assert exchange.state.logs is not None
    job_id = await _ended_job_with_logs(exchange, agent, 2)
    exchange.clock.advance(AFTER_S + 1)
    await exchange.state.logs.tick()
    exchange.clock.advance(KEEP_S)

    async def down(key: str) -> None:
        raise StorageError("the store is down")

    with monkeypatch.context() as patched:
        patched.setattr(store, "delete", down)
        assert await _pruner(exchange).tick() == 0
    page = await _page(exchange, job_id)
    assert (page["pruned"], len(page["chunks"])) == (False, 2)  # still readable
    assert await _pruner(exchange).tick() == 1
    assert (await _page(exchange, job_id))["pruned"] is True


async def test_chunks_replayed_after_the_pruning_are_pruned_again(
        live: Live, agent: FakeAgent) -> None:
    exchange = live.exchange
    job_id = await _ended_job_with_logs(exchange, agent, 2)
    exchange.clock.advance(KEEP_S + 1)
    assert await _pruner(exchange).tick() == 1
    await agent.log(job_id, 1, 2, b"late\n")  # a lost node's replay
    assert (await _page(exchange, job_id))["pruned"] is True
    assert await _pruner(exchange).tick() == 1
    assert await _rows(exchange, job_id) == 0


async def test_an_exchange_without_retention_keeps_logs(database_url: str, tmp_path: Path,
                                                        agent_factory: Callable[..., Any]) -> None:
    async with open_exchange(tmp_path, database_url) as exchange:
        assert exchange.state.retention is None


@pytest.mark.parametrize(("text", "expected"), [
    (None, None), ("30d", 30 * 86400.0), ("1h", 3600.0), ("2w", 14 * 86400.0)])
def test_the_retention_flag_reads_durations(text: str | None, expected: float | None) -> None:
    assert retention_s(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("30m", "between 1h and 3650d"), ("0", "between 1h and 3650d"),
    ("soon", "cannot read"), ("4000d", "longer than")])
def test_a_bad_retention_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        retention_s(text)
