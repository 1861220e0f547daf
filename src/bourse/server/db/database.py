"""The database handle: an async SQLAlchemy engine, sessions, and migrations at start.

SQLite (the embedded default) runs in WAL mode with ``synchronous=NORMAL``: a committed
transaction survives the coordinator being killed (it does not survive a power cut before the
next checkpoint — use PostgreSQL where that matters). SQLite allows one writer at a time, so
writes take an in-process lock instead of failing with "database is locked"; readers never wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, event, insert, make_url, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from bourse.server.db import inline_sqlite
from bourse.server.files import datadir

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                   "busy_timeout=30000"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _private(path: str) -> Callable[[], Any]:
    """SQLite's connections, the database file made 0600 before the first: SQLite gives its
    ``-wal`` and ``-shm`` the database file's mode (``datadir``)."""
    connect = inline_sqlite.creator(path)
    if path == ":memory:" or path.startswith("file:"):
        return connect

    async def private_connect() -> Any:
        for tightened in datadir.private_file(Path(path)):
            log.warning("%s was open to other users: made private (0600)", tightened)
        return await connect()

    return private_connect


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            path = make_url(url).database or ":memory:"
            self.engine = create_async_engine(url, async_creator=_private(path))
        else:
            self.engine = create_async_engine(url, pool_pre_ping=True)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        # called with ``session.info`` after each write transaction commits: where work that
        # must not run inside one (network calls) is started from
        self.after_commit: list[Callable[[dict[str, Any]], None]] = []

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A session in a transaction, committed on success, rolled back on error."""
        if self._write_lock is None:
            async with self.sessions() as session, session.begin():
                yield session
                await flush_deferred(session)
        else:
            async with self._write_lock, self.sessions() as session, session.begin():
                yield session
                await flush_deferred(session)
        for hook in self.after_commit:
            hook(session.info)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as session:
            yield session

    async def migrate(self, key: bytes | None = None) -> None:
        """Apply every Alembic migration not yet applied. ``key``: the server key, for those
        that encrypt what earlier versions stored in clear (none needs it on a new database).
        A database already at the newest revision is left alone without loading Alembic (its
        import and its script directory cost a coordinator start a third of a second)."""
        if await self.revision() == head_revision():
            return
        async with self.engine.begin() as connection:
            await connection.run_sync(_upgrade, key)
        if self.is_sqlite:  # pages a migration rewrote (sealed values) leave the WAL too
            async with self.engine.connect() as connection:
                await connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    async def revision(self) -> str | None:
        """The revision Alembic last stamped; None where it never ran (no version table)."""
        try:
            async with self.engine.connect() as connection:
                row = (await connection.execute(
                    text("SELECT version_num FROM alembic_version"))).first()
        except DBAPIError:
            return None
        return None if row is None else str(row[0])

    async def close(self) -> None:
        await self.engine.dispose()


def defer_insert(session: AsyncSession, table: Table, row: dict[str, Any]) -> None:
    """Queue a row for one multi-row INSERT at the end of the transaction (after the ORM's
    own flush). For rows nobody reads back in the same transaction — timeline events — this
    turns one statement per row into one per transaction."""
    deferred: dict[Table, list[dict[str, Any]]] = session.info.setdefault("deferred", {})
    deferred.setdefault(table, []).append(row)


Counts = dict[tuple[Table, str, str], dict[str, float]]  # (table, key column, key) -> adds


def defer_add(session: AsyncSession, table: Table, key_column: str, key: str,
              **adds: float) -> None:
    """Queue additions to counters of one row (``column = column + n``), summed over the
    transaction and applied at its end in one UPDATE per row: counters many writers bump (a
    node's ended attempts) without reading the row or locking it for the whole transaction."""
    counts: Counts = session.info.setdefault("deferred_adds", {})
    row = counts.setdefault((table, key_column, key), {})
    for column, n in adds.items():
        row[column] = row.get(column, 0) + n


async def flush_deferred(session: AsyncSession) -> None:
    deferred: dict[Table, list[dict[str, Any]]] = session.info.pop("deferred", {})
    counts: Counts = session.info.pop("deferred_adds", {})
    if not deferred and not counts:
        return
    await session.flush()
    for table, rows in deferred.items():
        await session.execute(insert(table), rows)
    for (table, key_column, key), adds in sorted(counts.items(), key=lambda kv: kv[0][1:]):
        await session.execute(update(table).where(table.c[key_column] == key).values(
            {column: table.c[column] + n for column, n in adds.items()}))


def _migrations() -> Traversable:
    return resources.files("bourse.server.db").joinpath("migrations")


def head_revision() -> str:
    """The newest migration's revision, read off the file names: each migration is
    ``versions/NNNN_what.py`` with ``revision = "NNNN"``, each revising the one before
    (test_migrations checks this is Alembic's own head)."""
    names = [entry.name for entry in _migrations().joinpath("versions").iterdir()]
    return max(name.split("_", 1)[0] for name in names
               if name.endswith(".py") and name[:4].isdigit())


def alembic_config(connection: Connection | None = None, key: bytes | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_migrations()))
    config.attributes["connection"] = connection
    config.attributes["server_key"] = key
    return config


def _upgrade(connection: Connection, key: bytes | None) -> None:
    from alembic import command

    command.upgrade(alembic_config(connection, key), "head")
