"""services: replicas of a serving job behind the gateway, versions, decisions (issue 20)

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("stable", sa.Integer(), nullable=True),
        sa.Column("canary", sa.Integer(), nullable=True),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("step_since", sa.Float(), nullable=True),
        sa.Column("rollout_since", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("project_id", "name", name="uq_services_name"))
    op.create_table(
        "service_versions",
        sa.Column("service_id", sa.String(length=40), sa.ForeignKey("services.id"),
                  primary_key=True),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("job", sa.JSON(), nullable=False),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True))
    op.create_table(
        "service_replicas",
        sa.Column("job_id", sa.String(length=40), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("service_id", sa.String(length=40), sa.ForeignKey("services.id"),
                  nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("ended", sa.Boolean(), nullable=False))
    op.create_index("ix_service_replicas_service", "service_replicas", ["service_id", "ended"])
    op.create_table(
        "service_events",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("service_id", sa.String(length=40), sa.ForeignKey("services.id"),
                  nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False))
    op.create_index("ix_service_events_service", "service_events", ["service_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_service_events_service", table_name="service_events")
    op.drop_table("service_events")
    op.drop_index("ix_service_replicas_service", table_name="service_replicas")
    op.drop_table("service_replicas")
    op.drop_table("service_versions")
    op.drop_table("services")
