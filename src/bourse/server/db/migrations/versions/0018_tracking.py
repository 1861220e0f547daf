"""experiment tracking: MLflow's experiments, runs, params, tags and metric points

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

RUN_ID = sa.String(length=64)
KEY = sa.String(length=250)


def upgrade() -> None:
    op.create_table(
        "tracking_experiments",
        sa.Column("project_id", sa.String(length=64), primary_key=True),
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("lifecycle_stage", sa.String(length=16), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("project_id", "name", name="uq_tracking_experiment_name"))
    op.create_table(
        "tracking_runs",
        sa.Column("id", RUN_ID, primary_key=True),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=250), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lifecycle_stage", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=256), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=False),
        sa.Column("end_time", sa.BigInteger(), nullable=True),
        sa.Column("job_id", sa.String(length=40), nullable=True))
    op.create_index("ix_tracking_runs_experiment", "tracking_runs",
                    ["project_id", "experiment_id", "start_time"])
    for name in ("tracking_params", "tracking_tags"):
        op.create_table(name, sa.Column("run_id", RUN_ID, primary_key=True),
                        sa.Column("key", KEY, primary_key=True),
                        sa.Column("value", sa.Text(), nullable=False))
    op.create_table(
        "tracking_metrics",
        sa.Column("run_id", RUN_ID, primary_key=True),
        sa.Column("key", KEY, primary_key=True),
        sa.Column("step", sa.BigInteger(), primary_key=True),
        sa.Column("timestamp", sa.BigInteger(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("value", sa.Float(), nullable=True),
        sqlite_with_rowid=False)
    op.create_table(
        "tracking_latest",
        sa.Column("run_id", RUN_ID, primary_key=True),
        sa.Column("key", KEY, primary_key=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False))
    op.create_table(
        "tracking_buckets",
        sa.Column("run_id", RUN_ID, primary_key=True),
        sa.Column("key", KEY, primary_key=True),
        sa.Column("level", sa.Integer(), primary_key=True),
        sa.Column("bucket", sa.BigInteger(), primary_key=True),
        sa.Column("min_step", sa.BigInteger(), nullable=False),
        sa.Column("max_step", sa.BigInteger(), nullable=False),
        sa.Column("min_value", sa.Float(), nullable=False),
        sa.Column("max_value", sa.Float(), nullable=False))


def downgrade() -> None:
    for name in ("tracking_buckets", "tracking_latest", "tracking_metrics", "tracking_tags", "tracking_params",
                 "tracking_runs", "tracking_experiments"):
        op.drop_table(name)
