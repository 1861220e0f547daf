"""``Database.migrate()`` builds exactly the schema of ``bourse.server.db.schema``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from bourse.server.db import database as database_module
from bourse.server.db.database import Database, alembic_config, head_revision
from bourse.server.db.schema import Base

pytestmark = pytest.mark.anyio


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def _layout(connection: Connection) -> dict[str, Any]:
    inspector = inspect(connection)
    return {table: ({c["name"] for c in inspector.get_columns(table)},
                    {i["name"] for i in inspector.get_indexes(table)})
            for table in inspector.get_table_names()}


def _revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def test_migrate_creates_exactly_the_models(empty_database_url: str) -> None:
    db = Database(empty_database_url)
    try:
        await db.migrate()
        async with db.engine.connect() as connection:
            assert await connection.run_sync(_differences) == []
            layout = await connection.run_sync(_layout)
            revision = await connection.run_sync(_revision)
    finally:
        await db.close()
    assert set(layout) == {*Base.metadata.tables, "alembic_version"}
    for name, table in Base.metadata.tables.items():
        columns, indexes = layout[name]
        assert columns == {c.name for c in table.columns}, name
        assert {i.name for i in table.indexes} <= indexes, name
    assert revision == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_migrate_is_idempotent_and_keeps_data(empty_database_url: str) -> None:
    db = Database(empty_database_url)
    try:
        await db.migrate()
        async with db.engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO bundles (sha256, size, created_at) VALUES ('ab', 1, 0)"))
        await db.migrate()
        await db.migrate()
        async with db.engine.connect() as connection:
            assert await connection.run_sync(_differences) == []
            count = await connection.scalar(text("SELECT count(*) FROM bundles"))
            versions = await connection.scalar(text("SELECT count(*) FROM alembic_version"))
    finally:
        await db.close()
    assert (count, versions) == (1, 1)


async def test_the_comparison_sees_a_drifted_database(empty_database_url: str) -> None:
    """Guards the test above against comparing nothing: a dropped index is a difference."""
    db = Database(empty_database_url)
    try:
        await db.migrate()
        async with db.engine.begin() as connection:
            await connection.execute(text("DROP INDEX ix_events_job"))
        async with db.engine.connect() as connection:
            found = await connection.run_sync(_differences)
    finally:
        await db.close()
    assert [d[0] for d in found] == ["add_index"]
    assert found[0][1].name == "ix_events_job"


def test_the_head_read_off_the_file_names_is_alembics_head() -> None:
    """``migrate`` skips Alembic when the database is at ``head_revision()``: a migration
    whose file name and revision disagree would be skipped, so they must agree."""
    script = ScriptDirectory.from_config(alembic_config())
    assert head_revision() == script.get_current_head()
    for revision in script.walk_revisions():
        assert revision.path.rsplit("/", 1)[-1].startswith(f"{revision.revision}_")


async def test_a_database_at_head_does_not_run_alembic(
        empty_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database(empty_database_url)
    try:
        assert await db.revision() is None  # no version table yet
        await db.migrate()
        assert await db.revision() == head_revision()

        ran: list[bytes | None] = []
        monkeypatch.setattr(database_module, "_upgrade", lambda _c, key: ran.append(key))
        await db.migrate(b"k1")
        assert ran == []
        async with db.engine.begin() as connection:  # one revision back: Alembic must run
            await connection.execute(text("UPDATE alembic_version SET version_num = '0016'"))
        await db.migrate(b"k2")
        assert ran == [b"k2"]
    finally:
        await db.close()


def _upgrade_to(revision: str) -> Any:
    def run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    return run


async def test_tenancy_moves_what_existed_into_the_default_project(
        empty_database_url: str) -> None:
    """Before 0009 there were no projects: jobs, nodes, bundles and tokens go to ``default``
    and the first-start admin token stays an admin."""
    db = Database(empty_database_url)
    try:
        async with db.engine.begin() as connection:
            await connection.run_sync(_upgrade_to("0008"))
            for statement in (
                    "INSERT INTO bundles (sha256, size, created_at) VALUES ('ab', 1, 0)",
                    "INSERT INTO tokens (id, kind, hash, role, created_at) "
                    "VALUES ('tok-1', 'user', 'h1', 'admin', 0)",
                    "INSERT INTO tokens (id, kind, hash, node_id, created_at) "
                    "VALUES ('tok-2', 'node', 'h2', 'n-1', 0)",
                    "INSERT INTO nodes (id, name, state, keep_alive_s, created_at, updated_at,"
                    " verification_status) VALUES ('n-1', 'box', 'offline', 20, 0, 0, 'pass')",
                    "INSERT INTO jobs (id, state, spec, created_at, updated_at, attempt,"
                    " cancel_requested, retries_used, max_retries, avoid_nodes)"
                    " VALUES ('j-1', 'PENDING', '{}', 0, 0, 0, false, 0, 3, '[]')"):
                await connection.execute(text(statement))
        await db.migrate()
        async with db.engine.connect() as connection:
            found = {q: (await connection.execute(text(q))).all() for q in (
                "SELECT project_id FROM jobs", "SELECT project_id, tags FROM nodes",
                "SELECT sha256, project_id FROM bundle_owners",
                "SELECT id, role, project_id FROM tokens ORDER BY id",
                "SELECT id, required_tags FROM projects", "SELECT count, hash FROM audit_head")}
    finally:
        await db.close()
    assert found["SELECT project_id FROM jobs"] == [("default",)]
    assert found["SELECT project_id, tags FROM nodes"] in ([("default", [])], [("default", "[]")])
    assert found["SELECT sha256, project_id FROM bundle_owners"] == [("ab", "default")]
    assert found["SELECT id, role, project_id FROM tokens ORDER BY id"] == [
        ("tok-1", "admin", "default"), ("tok-2", None, None)]
    assert [row[0] for row in found["SELECT id, required_tags FROM projects"]] == ["default"]
    assert found["SELECT count, hash FROM audit_head"] == [(0, "0" * 64)]


async def test_store_claims_take_in_what_earlier_jobs_wrote(empty_database_url: str) -> None:
    """0011: outputs and explicit checkpoints of earlier jobs are claimed for their projects,
    the oldest writer first; default checkpoints (``jobs/<id>/``) are not claims."""
    db = Database(empty_database_url)
    jobs = [("j-1", "alpha", 1.0, {"outputs": {"m": "s3://bourse/data/a/m"},
                                   "checkpoint": "s3://bourse/jobs/j-1/checkpoints/"}),
            ("j-2", "beta", 2.0, {"outputs": {"m": "s3://bourse/data/a/m/"},
                                  "checkpoint": "s3://res/ckpt/", "inputs": {"x": "s3://in/"}}),
            ("j-3", "beta", 3.0, {})]
    try:
        async with db.engine.begin() as connection:
            await connection.run_sync(_upgrade_to("0010"))
            for job_id, project, created, spec in jobs:
                await connection.execute(text(
                    "INSERT INTO jobs (id, state, spec, created_at, updated_at, attempt,"
                    " cancel_requested, retries_used, max_retries, avoid_nodes, project_id)"
                    " VALUES (:id, 'SUCCEEDED', :spec, :created, 0, 1, false, 0, 3, '[]',"
                    " :project)"), {"id": job_id, "spec": json.dumps({"command": ["x"], **spec}),
                                    "created": created, "project": project})
        await db.migrate()
        async with db.engine.connect() as connection:
            found = (await connection.execute(text(
                "SELECT bucket, prefix, project_id, job_id FROM store_claims ORDER BY bucket"
            ))).all()
    finally:
        await db.close()
    assert [tuple(r) for r in found] == [("bourse", "data/a/m/", "alpha", "j-1"),
                                         ("res", "ckpt/", "beta", "j-2")]


async def test_gangs_key_earlier_attempts_as_rank_0_and_keep_log_cursors(
        empty_database_url: str) -> None:
    """0016: attempts, events and log chunks written before gangs are rank 0; log chunk ids
    (cursors) are never handed out again, even after the newest rows were archived away."""
    db = Database(empty_database_url)
    try:
        async with db.engine.begin() as connection:
            await connection.run_sync(_upgrade_to("0015"))
            for statement in (
                    "INSERT INTO jobs (id, state, spec, created_at, updated_at, attempt,"
                    " cancel_requested, retries_used, max_retries, avoid_nodes)"
                    " VALUES ('j-1', 'RUNNING', '{}', 0, 0, 1, false, 0, 3, '[]')",
                    "INSERT INTO attempts (job_id, number, node_id, state, placed_at,"
                    " start_deadline, resources) VALUES ('j-1', 1, 'n-1', 'RUNNING', 0, 0, '{}')",
                    "INSERT INTO events (job_id, attempt, agent_seq, time, kind, message, data)"
                    " VALUES ('j-1', 1, 0, 0, 'started', '', '{}')",
                    *[f"INSERT INTO log_chunks (job_id, attempt, seq, stream, \"offset\", "
                      f"data, time) VALUES ('j-1', 1, {i}, 'stdout', 0, '', 0)"
                      for i in (1, 2, 3)],
                    "DELETE FROM log_chunks WHERE id = 3"):
                await connection.execute(text(statement))
        await db.migrate()
        async with db.engine.begin() as connection:
            found = {q: (await connection.execute(text(q))).all() for q in (
                "SELECT job_id, number, rank FROM attempts", "SELECT rank FROM events",
                "SELECT id, rank FROM log_chunks ORDER BY id")}
            await connection.execute(text(
                "INSERT INTO log_chunks (job_id, attempt, rank, seq, stream, \"offset\", data, "
                "time) VALUES ('j-1', 1, 1, 1, 'stdout', 0, '', 0)"))
            newest = await connection.scalar(text("SELECT max(id) FROM log_chunks"))
    finally:
        await db.close()
    assert found["SELECT job_id, number, rank FROM attempts"] == [("j-1", 1, 0)]
    assert found["SELECT rank FROM events"] == [(0,)]
    assert found["SELECT id, rank FROM log_chunks ORDER BY id"] == [(1, 0), (2, 0)]
    assert newest == 4  # not 3: a follower's cursor past 3 would skip it
