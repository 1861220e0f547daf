"""launched nodes: launches, launch blocks, project clouds and caps, exchange settings

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("projects", sa.Column("clouds", sa.JSON(), nullable=True))
    op.add_column("projects", sa.Column("cap_hour", sa.Float(), nullable=True))
    op.add_column("projects", sa.Column("cap_day", sa.Float(), nullable=True))
    op.add_column("nodes", sa.Column("launch_id", sa.String(length=40), nullable=True))
    op.create_table(
        "launches",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("node_id", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=True),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=True),
        sa.Column("instance_type", sa.String(length=64), nullable=False),
        sa.Column("spot", sa.Boolean(), nullable=False),
        sa.Column("price", sa.Float(), nullable=False),
        sa.Column("on_demand", sa.Float(), nullable=True),
        sa.Column("offer", sa.JSON(), nullable=False),
        sa.Column("client_token", sa.String(length=64), nullable=False),
        sa.Column("instance_id", sa.String(length=64), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("launched_at", sa.Float(), nullable=True),
        sa.Column("enrolled_at", sa.Float(), nullable=True),
        sa.Column("idle_since", sa.Float(), nullable=True),
        sa.Column("terminated_at", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_launches_state", "launches", ["state"])
    op.create_index("ix_launches_job", "launches", ["job_id"])
    op.create_table(
        "launch_blocks",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("until", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "settings",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("settings")
    op.drop_table("launch_blocks")
    op.drop_index("ix_launches_job", table_name="launches")
    op.drop_index("ix_launches_state", table_name="launches")
    op.drop_table("launches")
    op.drop_column("nodes", "launch_id")
    op.drop_column("projects", "cap_day")
    op.drop_column("projects", "cap_hour")
    op.drop_column("projects", "clouds")
