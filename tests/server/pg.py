"""A PostgreSQL server for the coordinator tests.

``BOURSE_TEST_PG_URL`` (a ``postgresql+asyncpg://`` URL, e.g. exported by CI) names a server to
use; without it, a throwaway cluster is started in a temporary directory (``initdb`` + ``pg_ctl``,
``fsync=off``, TCP on a free loopback port, its unix socket inside that directory) and removed
at the end. initdb refuses to run as root, so as root the cluster belongs to the ``postgres``
OS user. Tests that need an empty database get a new one; the others take turns on one migrated
database, emptied before each test.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from sqlalchemy.engine import URL, make_url

from bourse.server.db.database import Database
from bourse.server.db.schema import Base

ENV_URL = "BOURSE_TEST_PG_URL"
OS_USER = "postgres"
SERVER_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off",
                   "max_connections=200")


class Unavailable(Exception):
    """No PostgreSQL server can be had here (no URL and no binaries)."""


@dataclass
class PgServer:
    """A server the tests may create and drop databases on, through ``admin`` (a URL)."""

    admin: URL
    shared: str | None = None  # the migrated database the tests take turns on

    def url(self, database: str) -> str:
        return self.admin.set(database=database).render_as_string(hide_password=False)

    async def _execute(self, statement: str, database: str | None = None) -> None:
        connection = await asyncpg.connect(
            host=self.admin.host, port=self.admin.port, user=self.admin.username,
            password=self.admin.password, database=database or self.admin.database)
        try:
            await connection.execute(statement)  # several statements: one transaction
        finally:
            await connection.close()

    async def create_database(self) -> str:
        name = f"bourse_test_{secrets.token_hex(6)}"
        await self._execute(f'CREATE DATABASE "{name}"')
        return name

    async def drop_database(self, name: str) -> None:
        await self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def clean_database(self) -> str:
        """The shared database with the schema and no rows (deleting a few rows is several
        times faster than creating a database per test)."""
        if self.shared is None:
            name = await self.create_database()
            database = Database(self.url(name))
            await database.migrate()
            await database.close()
            self.shared = name
        tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
        await self._execute("; ".join(f'DELETE FROM "{t}"' for t in tables),
                            database=self.shared)
        return self.shared


@contextlib.contextmanager
def postgres_server() -> Iterator[PgServer]:
    """The server named by ``BOURSE_TEST_PG_URL``, or a throwaway cluster for the session."""
    url = os.environ.get(ENV_URL)
    if url:
        admin = make_url(url)
        if admin.drivername != "postgresql+asyncpg":
            raise Unavailable(f"{ENV_URL} must be a postgresql+asyncpg:// URL, got {url!r}")
        yield PgServer(admin.set(database=admin.database or "postgres"))
        return
    with _cluster() as admin:
        yield PgServer(admin)


def _binaries() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    if versions:
        return versions[0].parent
    raise Unavailable(f"no PostgreSQL binaries (initdb, pg_ctl) on PATH or in "
                      f"/usr/lib/postgresql/*/bin, and {ENV_URL} is not set; install "
                      f"PostgreSQL 15 or point {ENV_URL} at a server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _as_owner() -> list[str]:
    """initdb and postgres refuse to run as root: run them as the postgres OS user then."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        raise Unavailable(f"running as root and there is no {OS_USER!r} OS user to own "
                          f"the test cluster") from None
    return ["runuser", "-u", OS_USER, "--"]


def _run(command: list[str], what: str, log: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        detail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise Unavailable(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
                          f"\n{detail}")


@contextlib.contextmanager
def _cluster() -> Iterator[URL]:
    bin_dir, prefix = _binaries(), _as_owner()
    root = Path(tempfile.mkdtemp(prefix="bourse-pg-"))
    if prefix:
        shutil.chown(root, OS_USER, OS_USER)
    data, log, port = root / "data", root / "postgres.log", _free_port()
    try:
        _run([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
              "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"], "initdb")
        options = " ".join([f"-c listen_addresses=127.0.0.1 -p {port}",
                            f"-c unix_socket_directories={root}",
                            *(f"-c {s}" for s in SERVER_SETTINGS)])
        _run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w",
              "-o", options, "start"], "pg_ctl start", log)
        try:
            yield URL.create("postgresql+asyncpg", username="postgres", host="127.0.0.1",
                             port=port, database="postgres")
        finally:
            subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, check=False,
                           timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
