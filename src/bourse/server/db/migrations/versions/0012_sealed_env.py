"""sealed env: the values of a job's secret env variables are encrypted with the server key

Jobs stored before kept them in clear in ``jobs.spec``; they are sealed into ``sealed_env``
here and redacted in the spec, which needs the server key (``Database.migrate`` hands it in).

Revision ID: 0012
Revises: 0011
"""

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from bourse.protocol.common import REDACTED
from bourse.server.services.secrets import SecretBox

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
JOBS = sa.table("jobs", sa.column("id", sa.String), sa.column("spec", sa.JSON),
                sa.column("sealed_env", sa.LargeBinary))


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("sealed_env", sa.LargeBinary(), nullable=True))
    clear = list(_with_secrets())
    if not clear:
        return
    box = SecretBox(_server_key("seal the secret env values of earlier jobs"))
    with _secure_delete():
        for job_id, spec in clear:
            values = {n: spec["env"][n] for n in spec["secrets"] if n in spec["env"]}
            redacted = {**spec, "env": {k: REDACTED if k in values else v
                                        for k, v in spec["env"].items()}}
            op.get_bind().execute(JOBS.update().where(JOBS.c.id == job_id).values(
                spec=redacted, sealed_env=box.seal_env(job_id, values)))


@contextlib.contextmanager
def _secure_delete() -> Iterator[None]:
    """SQLite overwrites the space the updates free (the values in clear), whatever its
    build's default."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    before = bind.exec_driver_sql("PRAGMA secure_delete").scalar()
    bind.exec_driver_sql("PRAGMA secure_delete = 1")
    try:
        yield
    finally:
        bind.exec_driver_sql(f"PRAGMA secure_delete = {int(before or 0)}")


def downgrade() -> None:
    sealed = op.get_bind().execute(sa.select(JOBS.c.id, JOBS.c.spec, JOBS.c.sealed_env).where(
        JOBS.c.sealed_env.is_not(None))).all()
    if sealed:
        box = SecretBox(_server_key("put the secret env values of jobs back in their specs"))
        for job_id, stored, ciphertext in sealed:
            spec = _loaded(stored)
            restored = {**spec, "env": {**spec["env"], **box.open_env(job_id, ciphertext)}}
            op.get_bind().execute(JOBS.update().where(JOBS.c.id == job_id).values(
                spec=restored))
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("sealed_env")


def _with_secrets() -> Iterator[tuple[str, dict[str, Any]]]:
    """(id, spec) of the jobs whose spec marks env variables secret."""
    for job_id, stored in op.get_bind().execute(sa.select(JOBS.c.id, JOBS.c.spec)):
        spec = _loaded(stored)
        if spec.get("secrets") and spec.get("env"):
            yield job_id, spec


def _loaded(spec: Any) -> dict[str, Any]:
    return json.loads(spec) if isinstance(spec, str) else dict(spec or {})


def _server_key(why: str) -> bytes:
    key: bytes | None = context.config.attributes.get("server_key")
    if not key:
        raise RuntimeError(f"migration 0012 needs the server key to {why}: run it through "
                           "the coordinator's start (Database.migrate(key))")
    return key
