"""What `bourse server` keeps on disk, end to end: a real coordinator with its embedded
SeaweedFS and a real agent running a job whose spec marks an env variable secret. Under a
umask that lets others read (022), everything in the coordinator's data dir is its user's
alone, the secret value is in neither the database file nor its WAL, and the job got it; the
audit trail verifies against its seal."""

from __future__ import annotations

import base64
import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness import Cluster, Exchange

from bourse.cli.main import cli
from bourse.protocol.common import JobSpec
from conftest import KEEP_ALIVE_S

pytestmark = pytest.mark.slow
VALUE = "wandb-key-Jx81Qm2-not-for-others"


@pytest.fixture
def loose_exchange(cluster: Cluster) -> Iterator[Exchange]:
    before = os.umask(0o022)
    try:
        exchange = Exchange(cluster, KEEP_ALIVE_S, store=()).start()  # the embedded store
    finally:
        os.umask(before)
    yield exchange


def _open_to_others(top: Path) -> dict[str, str]:
    found = {}
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = Path(folder, name)
            mode = stat.S_IMODE(path.lstat().st_mode)
            if path.is_symlink():
                continue
            if mode & 0o077 or (path.is_dir() and mode != 0o700):
                found[str(path.relative_to(top))] = oct(mode)
    return found


def test_the_coordinators_files_are_its_own(loose_exchange: Exchange) -> None:
    exchange = loose_exchange
    agent = exchange.agent("n1")
    spec = JobSpec(command=["sh", "-c", 'echo "key=$WANDB_API_KEY"'],
                   env={"WANDB_API_KEY": VALUE}, secrets=["WANDB_API_KEY"])
    job = exchange.client.submit(spec)
    assert exchange.wait_ended(job.id).state == "SUCCEEDED"
    stored = b"".join(base64.b64decode(c.data) for c in exchange.client.iter_logs(job.id))
    assert stored == b"key=[redacted]\n"
    assert f"key={VALUE}".encode() in agent.stdout(job.id, 1)  # the job had it
    data = exchange.coordinator.data_dir
    assert {"bourse.db-wal", "seaweed", "audit.seal"} <= {p.name for p in data.iterdir()}
    assert _open_to_others(data) == {}
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for name in ("bourse.db", "bourse.db-wal"):
        assert VALUE.encode() not in (data / name).read_bytes(), name
    for spool in agent.work_dir.rglob("*.db"):
        with sqlite3.connect(spool) as db:
            assert VALUE not in "\n".join(db.iterdump()), spool
    admin = {"BOURSE_URL": exchange.coordinator.url, "BOURSE_TOKEN": exchange.coordinator.token}
    verified = CliRunner(env=admin).invoke(cli, ["audit", "verify"])
    assert verified.exit_code == 0, verified.output
    assert re.fullmatch(r"audit trail intact: (\d+) records verified, sealed at row \1\n",
                        verified.output), verified.output
