"""Env variables a spec marks secret (``JobSpec.secrets``): sealed with the server key like
project secrets, stored redacted, given to the job only in the start's ``secret_env``, and
redacted from what it prints; jobs stored in clear by an earlier version are sealed when the
coordinator migrates its database."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from alembic import command
from fake_agent import FakeAgent
from server_harness import Exchange, Live, capabilities, open_exchange, serve
from sqlalchemy import make_url, text
from sqlalchemy.engine import Connection

from bourse.protocol.common import REDACTED
from bourse.server.db.database import Database, alembic_config
from bourse.server.db.schema import Job
from bourse.server.files.keys import load_or_create
from bourse.server.services.secrets import SecretBox

pytestmark = pytest.mark.anyio
# every start carries its job's tracking token (services.tracking_tokens)
TRACKED = {"MLFLOW_TRACKING_TOKEN": ANY, "BOURSE_BURST_TOKEN": ANY}  # every job's
VALUE = "hf_Zq8sVd31-a-token-value"
ENV = {"HF_TOKEN": VALUE, "SEED": "7"}
Factory = Callable[..., Any]


def _sqlite_files(url: str) -> list[Path]:
    path = Path(make_url(url).database or "")
    return [p for p in (path, Path(f"{path}-wal")) if p.exists()]


async def test_the_value_is_not_in_the_database(exchange: Exchange, database_url: str) -> None:
    job = await exchange.submit(env=ENV, secrets=["HF_TOKEN"])
    async with exchange.state.db.read() as session:
        spec, sealed = (await session.execute(text(
            "SELECT spec, sealed_env FROM jobs WHERE id = :id"), {"id": job["id"]})).one()
    assert VALUE not in str(spec) and f'"HF_TOKEN": "{REDACTED}"' in json.dumps(
        json.loads(spec) if isinstance(spec, str) else spec)
    assert VALUE.encode() not in sealed
    assert SecretBox(exchange.state.key).open_env(job["id"], sealed) == {"HF_TOKEN": VALUE}
    for path in _sqlite_files(database_url):  # the file itself and its WAL, while written
        assert VALUE.encode() not in path.read_bytes(), path


async def _placed(exchange: Exchange, agent: FakeAgent,
                  **spec: Any) -> tuple[str, int, dict[str, Any]]:
    job = await exchange.submit(**spec)
    await exchange.tick()
    start = await agent.expect("start_job", job_id=job["id"])
    return job["id"], int(start["attempt"]), start


async def test_the_start_carries_the_value_apart_and_logs_are_redacted(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt, start = await _placed(exchange, agent, env=ENV, secrets=["HF_TOKEN"])
    assert start["spec"]["env"] == {"HF_TOKEN": REDACTED, "SEED": "7"}
    assert start["secret_env"] == {"HF_TOKEN": VALUE, **TRACKED}  # the agent never spools these
    exchange.state.secrets._patterns.clear()  # a restarted coordinator reads them again
    await agent.log(job_id, attempt, 1, f"token={VALUE}\n".encode())
    logs = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")
    assert base64.b64decode(logs.json()["chunks"][0]["data"]) == b"token=[redacted]\n"


async def test_a_project_secret_of_the_same_name_wins(live: Live,
                                                      agent_factory: Factory) -> None:
    exchange = live.exchange
    put = await exchange.client.put("/api/v1/secrets/HF_TOKEN", json={"value": "from-project"})
    assert put.status_code == 201
    agent: FakeAgent = await agent_factory()
    *_, start = await _placed(exchange, agent, env=ENV, secrets=["HF_TOKEN"],
                              project_secrets=["HF_TOKEN"])
    assert start["secret_env"] == {"HF_TOKEN": "from-project", **TRACKED}


def _at(revision: str) -> Callable[[Connection], None]:
    def run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    return run


async def _legacy_job(url: str, job_id: str = "j-legacy") -> None:
    """A pending job as 0.x stored it: its secret env value in clear in the spec."""
    spec = {"command": ["true"], "env": ENV, "secrets": ["HF_TOKEN"],
            "compute": {"cpus": 1}}
    db = Database(url)
    try:
        async with db.engine.begin() as connection:
            await connection.run_sync(_at("0011"))
            await connection.execute(text(
                "INSERT INTO jobs (id, state, spec, created_at, updated_at, attempt,"
                " cancel_requested, retries_used, max_retries, avoid_nodes, project_id)"
                " VALUES (:id, 'PENDING', :spec, 0, 0, 0, false, 0, 3, '[]', 'default')"),
                {"id": job_id, "spec": json.dumps(spec)})
    finally:
        await db.close()


async def test_jobs_stored_in_clear_are_sealed_and_still_start(
        empty_database_url: str, tmp_path: Path) -> None:
    await _legacy_job(empty_database_url)
    async with open_exchange(tmp_path, empty_database_url) as exchange, serve(exchange) as live:
        row: Job = await exchange.job_row("j-legacy")
        assert row.spec["env"] == {"HF_TOKEN": REDACTED, "SEED": "7"}
        assert row.sealed_env is not None and VALUE.encode() not in row.sealed_env
        node_id, credential = await exchange.enroll("n0")
        agent = FakeAgent(live.ws_url, node_id, credential, capabilities())
        await agent.connect()
        try:
            await exchange.tick()
            start = await agent.expect("start_job", job_id="j-legacy")
        finally:
            await agent.close()
    assert start["secret_env"] == {"HF_TOKEN": VALUE, **TRACKED}


async def test_the_migration_leaves_no_clear_value_in_the_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await _legacy_job(url)
    db = Database(url)
    try:
        await db.migrate(load_or_create(tmp_path / "data"))
    finally:
        await db.close()
    assert VALUE.encode() not in (tmp_path / "old.db").read_bytes()


async def test_the_migration_needs_the_server_key_for_clear_values(
        empty_database_url: str) -> None:
    await _legacy_job(empty_database_url)
    db = Database(empty_database_url)
    try:
        with pytest.raises(RuntimeError, match="needs the server key"):
            await db.migrate()
    finally:
        await db.close()


async def test_the_migration_can_be_undone_with_the_key(empty_database_url: str,
                                                        tmp_path: Path) -> None:
    await _legacy_job(empty_database_url)
    key = load_or_create(tmp_path / "data")
    db = Database(empty_database_url)
    try:
        await db.migrate(key)
        async with db.engine.begin() as connection:
            await connection.run_sync(lambda c: command.downgrade(
                alembic_config(c, key), "0011"))
            spec = await connection.scalar(text("SELECT spec FROM jobs"))
    finally:
        await db.close()
    assert (json.loads(spec) if isinstance(spec, str) else spec)["env"] == ENV
