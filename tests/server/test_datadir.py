"""The coordinator's data dir is its user's alone: directories 0700, files 0600, the SQLite
database's -wal and -shm included (SQLite copies the database file's mode), whatever the
umask; a data dir an earlier version left open is tightened at start, and the log says so."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import open_exchange
from sqlalchemy import text

from bourse.server.db.database import Database, sqlite_url
from bourse.server.files.keys import KEY_FILE, ServerKeyError

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def loose_umask() -> Iterator[None]:
    """A umask that lets group and others read what is made (the usual default)."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _modes(top: Path) -> dict[str, int]:
    """Permission bits of ``top`` and everything below it, by relative path."""
    found = {".": stat.S_IMODE(top.stat().st_mode)}
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = Path(folder, name)
            found[str(path.relative_to(top))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _open_to_others(modes: dict[str, int], top: Path) -> dict[str, str]:
    return {name: oct(mode) for name, mode in modes.items() if mode & 0o077
            or ((top / name).is_dir() and mode != 0o700)}


async def test_every_file_the_coordinator_writes_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    bundle = b"a code bundle"
    sha = hashlib.sha256(bundle).hexdigest()
    async with open_exchange(tmp_path, sqlite_url(data / "bourse.db"),
                             credentials_path=data / "admin-token") as exchange:
        assert (await exchange.client.put(f"/api/v1/bundles/{sha}",
                                          content=bundle)).status_code == 201
        for n in range(3):
            await exchange.submit(name=f"job-{n}", bundle=sha)
        modes = _modes(data)  # while it runs: the WAL and the shared memory file exist
    assert {"bourse.db", "bourse.db-wal", "bourse.db-shm", KEY_FILE, "admin-token",
            "audit.seal", f"bundles/{sha[:2]}/{sha}"} <= set(modes), sorted(modes)
    assert _open_to_others(modes, data) == {}


async def test_a_database_outside_the_data_dir_is_private_too(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "bourse.db"
    path.parent.mkdir()
    db = Database(sqlite_url(path))
    try:
        await db.migrate()
        async with db.write() as session:
            await session.execute(text("INSERT INTO bundles (sha256, size, created_at) "
                                       "VALUES ('ab', 1, 0)"))
        modes = _modes(path.parent)
    finally:
        await db.close()
    assert {"bourse.db", "bourse.db-wal", "bourse.db-shm"} <= set(modes)
    assert {k: oct(v) for k, v in modes.items() if k != "." and v != 0o600} == {}


def _loose_data_dir(data: Path) -> None:
    """What an earlier version left: everything readable by all, a WAL among it."""
    data.mkdir(mode=0o755)
    connection = sqlite3.connect(data / "bourse.db")
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    with contextlib.closing(connection):
        (data / "left-wal").write_bytes((data / "bourse.db-wal").read_bytes())
    os.replace(data / "left-wal", data / "bourse.db-wal")  # a WAL left by a killed process
    (data / "bundles" / "ab").mkdir(parents=True, mode=0o755)
    (data / "bundles" / "ab" / ("ab" * 32)).write_bytes(b"code")
    (data / "seaweed").mkdir(mode=0o755)
    (data / "seaweed" / "ports.json").write_text("{}")
    (data / "admin-token").write_text("{}")


async def test_a_loose_data_dir_is_tightened_at_start_and_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    _loose_data_dir(data)
    loose = _open_to_others(_modes(data), data)
    assert len(loose) == 9, loose  # the test starts from a loose dir
    with caplog.at_level(logging.WARNING):
        async with open_exchange(tmp_path, sqlite_url(tmp_path / "bourse.db"),
                                 credentials_path=tmp_path / "cred.json") as exchange:
            await exchange.submit()
            modes = _modes(data)
    assert _open_to_others(modes, data) == {}
    said = [r.getMessage() for r in caplog.records if "was open to other users" in r.message]
    assert said and f"made {len(loose)} path(s) private" in said[0], said
    for name in ("bourse.db-wal", "bundles/ab", "seaweed/ports.json", "admin-token"):
        assert name in said[0]


async def test_a_server_key_others_could_read_is_still_refused(tmp_path: Path) -> None:
    """Not tightened silently: its secrets may have been read, and must be rotated."""
    data = tmp_path / "data"
    data.mkdir()
    (data / KEY_FILE).write_bytes(b"k" * 32)
    (data / KEY_FILE).chmod(0o644)
    with pytest.raises(ServerKeyError, match="readable by others"):
        async with open_exchange(tmp_path, sqlite_url(tmp_path / "bourse.db")):
            pass
