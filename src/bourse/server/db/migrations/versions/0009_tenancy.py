"""tenancy: projects, project of tokens/jobs/nodes, bundle owners, node tags, secrets, audit

Everything that existed before moves into the ``default`` project; the tokens that existed
keep their roles (the first-start admin token stays admin).

Revision ID: 0009
Revises: 0008
"""

import time

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

GENESIS = "0" * 64


def upgrade() -> None:
    projects = op.create_table(
        "projects",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("required_tags", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False))
    op.bulk_insert(projects, [{"id": "default", "required_tags": [],
                               "created_at": time.time()}])
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("project_id", sa.String(length=64), nullable=True))
    op.execute("UPDATE tokens SET project_id = 'default' WHERE kind IN ('user', 'enroll')")
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("project_id", sa.String(length=64), nullable=False,
                                   server_default="default"))
        batch.create_index("ix_jobs_project_created", ["project_id", "created_at"])
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("project_id", sa.String(length=64), nullable=False,
                                   server_default="default"))
        batch.add_column(sa.Column("tags", sa.JSON(), nullable=True))
    op.execute("UPDATE nodes SET tags = '[]'")
    op.create_table(
        "bundle_owners",
        sa.Column("sha256", sa.String(length=64), primary_key=True),
        sa.Column("project_id", sa.String(length=64), primary_key=True))
    op.execute("INSERT INTO bundle_owners (sha256, project_id) "
               "SELECT sha256, 'default' FROM bundles")
    op.create_table(
        "secrets",
        sa.Column("project_id", sa.String(length=64), primary_key=True),
        sa.Column("name", sa.String(length=128), primary_key=True),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False))
    _audit()


def _audit() -> None:
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "audit",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=80), nullable=False),
        sa.Column("actor_kind", sa.String(length=16), nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=True),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=128), nullable=False),
        sa.Column("target", sa.String(length=512), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False))
    op.create_index("ix_audit_time", "audit", ["time"])
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False))
    op.bulk_insert(head, [{"id": 1, "count": 0, "hash": GENESIS}])


def downgrade() -> None:
    op.drop_table("audit_head")
    op.drop_index("ix_audit_time", "audit")
    op.drop_table("audit")
    op.drop_table("secrets")
    op.drop_table("bundle_owners")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("tags")
        batch.drop_column("project_id")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_project_created")
        batch.drop_column("project_id")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("project_id")
    op.drop_table("projects")
