"""Fixtures of the coordinator tests. Every test that touches the database runs twice: on a
SQLite file in its temp dir and on PostgreSQL (see ``pg.py``: one database per test worker,
emptied before each test; a new one for tests that need an empty database)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from pg import ENV_URL, PgServer, Unavailable, postgres_server
from server_harness import Exchange, Live, capabilities, memory_store_exchange, open_exchange, serve

from bourse.server.db.database import Database, sqlite_url
from bourse.storage import MemoryStore

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """PostgreSQL for the session. Without it: an error in CI (``CI`` set), else a skip."""
    with contextlib.ExitStack() as stack:
        missing = None
        try:
            server = stack.enter_context(postgres_server())
        except Unavailable as exc:
            missing = str(exc)
        if missing is not None:
            if os.environ.get("CI"):
                pytest.fail(f"PostgreSQL is required in CI (CI is set): {missing}",
                            pytrace=False)
            pytest.skip(f"PostgreSQL unavailable: {missing}")
        yield server
        if os.environ.get(ENV_URL) and server.shared:  # a throwaway cluster goes whole
            asyncio.run(server.drop_database(server.shared))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test (a copy is three times faster than
    migrating anew)."""
    path = tmp_path_factory.mktemp("template") / "bourse.db"

    async def migrate() -> None:
        database = Database(sqlite_url(path))
        await database.migrate()
        await database.close()

    asyncio.run(migrate())
    return path


@pytest.fixture(params=BACKENDS)
async def database_url(request: pytest.FixtureRequest, tmp_path: Path,
                       sqlite_template: Path) -> str:
    """A database with the schema and no rows (the app migrates it again: a no-op)."""
    if request.param == "sqlite":
        shutil.copyfile(sqlite_template, tmp_path / "bourse.db")
        return sqlite_url(tmp_path / "bourse.db")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url(await server.clean_database())


@pytest.fixture(params=BACKENDS)
async def empty_database_url(request: pytest.FixtureRequest,
                             tmp_path: Path) -> AsyncIterator[str]:
    """A new database with nothing in it."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "empty.db")
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = await server.create_database()
    try:
        yield server.url(name)
    finally:
        await server.drop_database(name)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """Which database this test runs on: the parameter of its database fixture."""
    params = request.node.callspec.params
    found: str = params.get("database_url") or params["empty_database_url"]
    return found


@pytest.fixture
async def exchange(database_url: str, tmp_path: Path) -> AsyncIterator[Exchange]:
    async with open_exchange(tmp_path, database_url) as opened:
        yield opened


@pytest.fixture
def store() -> MemoryStore:
    """An in-memory object store, bucket ``bourse``."""
    return MemoryStore("bourse")


@pytest.fixture
async def store_exchange(database_url: str, tmp_path: Path,
                         store: MemoryStore) -> AsyncIterator[Exchange]:
    """``exchange`` with a data plane over ``store`` (``memory_store_exchange``)."""
    async with memory_store_exchange(tmp_path, database_url, store) as opened:
        yield opened


@pytest.fixture
async def live(exchange: Exchange) -> AsyncIterator[Live]:
    async with serve(exchange) as served:
        yield served


@pytest.fixture
async def agent_factory(live: Live) -> AsyncIterator[Callable[..., Any]]:
    """``await make(name, cpus=2, gpus=0, connect=True)``: enrol a node, and connect its agent."""
    made: list[FakeAgent] = []

    async def make(name: str = "node", *, connect: bool = True, keep_alive_s: float = 20.0,
                   declared: Any = None, **caps: Any) -> FakeAgent:
        node_id, credential = await live.exchange.enroll(name)
        agent = FakeAgent(live.ws_url, node_id, credential, capabilities(**caps), name=name,
                          keep_alive_s=keep_alive_s, declared=declared)
        made.append(agent)
        if connect:
            await agent.connect()
        return agent

    yield make
    for agent in made:
        await agent.close()
