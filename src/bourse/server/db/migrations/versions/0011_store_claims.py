"""store claims: which project owns a prefix of the object store

The locations earlier jobs wrote (outputs, explicit checkpoints) are claimed for their
projects, oldest job first, so that data written before this version is not left unclaimed.

Revision ID: 0011
Revises: 0010
"""

import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
STORE_KEY = sa.String(1024).with_variant(postgresql.VARCHAR(1024, collation="C"),
                                         "postgresql")  # as in schema.py


def upgrade() -> None:
    op.create_table(
        "store_claims",
        sa.Column("scheme", sa.String(length=16), nullable=False),
        sa.Column("bucket", sa.String(length=255), nullable=False),
        sa.Column("prefix", STORE_KEY, nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("scheme", "bucket", "prefix"),
    )
    claims: dict[tuple[str, str, str], dict[str, Any]] = {}
    jobs = op.get_bind().execute(sa.text(
        "SELECT id, project_id, spec, created_at FROM jobs ORDER BY created_at, id"))
    for job_id, project_id, spec, created_at in jobs:
        for bucket, prefix in _written(json.loads(spec) if isinstance(spec, str) else spec):
            claims.setdefault(("s3", bucket, prefix), {
                "scheme": "s3", "bucket": bucket, "prefix": prefix, "project_id": project_id,
                "job_id": job_id, "created_at": created_at})
    if claims:
        op.bulk_insert(sa.table("store_claims", *(sa.column(c) for c in (
            "scheme", "bucket", "prefix", "project_id", "job_id", "created_at"))),
            list(claims.values()))


def _written(spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(bucket, prefix) of the s3:// locations a spec writes, outside ``jobs/`` (a job's
    own default checkpoint, never claimed)."""
    uris = [*(spec.get("outputs") or {}).values(), spec.get("checkpoint")]
    for uri in uris:
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            continue
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        prefix = key if key == "" or key.endswith("/") else key + "/"
        if not prefix.startswith("jobs/") and len(prefix.encode()) <= 1024:
            yield bucket, prefix


def downgrade() -> None:
    op.drop_table("store_claims")
