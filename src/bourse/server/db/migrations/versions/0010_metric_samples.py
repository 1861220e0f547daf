"""metrics: resource samples of jobs and nodes, and a job's stall evidence

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # as in schema.py


def upgrade() -> None:
    op.create_table(
        "metric_samples",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("node_id", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("period_s", sa.Float(), nullable=False),
        sa.Column("cpu_percent", sa.Float(), nullable=True),
        sa.Column("gpu_percent", sa.Float(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
    )
    op.create_index("ix_metric_samples_job", "metric_samples", ["job_id", "time"])
    op.create_index("ix_metric_samples_node", "metric_samples", ["node_id", "time"])
    op.create_index("ix_metric_samples_period", "metric_samples", ["period_s", "time"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("stalled", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("stalled")
    op.drop_index("ix_metric_samples_period", table_name="metric_samples")
    op.drop_index("ix_metric_samples_node", table_name="metric_samples")
    op.drop_index("ix_metric_samples_job", table_name="metric_samples")
    op.drop_table("metric_samples")
