"""app runs: the driver's lease, so that a run whose driver is gone ends

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("cancelled", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("project_id", "id"),
    )
    op.create_index("ix_runs_lease_until", "runs", ["lease_until"])


def downgrade() -> None:
    op.drop_index("ix_runs_lease_until", table_name="runs")
    op.drop_table("runs")
