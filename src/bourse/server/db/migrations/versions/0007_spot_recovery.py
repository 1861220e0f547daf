"""spot: preemption notices, attempt lost work and on-demand price, job blocklist and retries

Revision ID: 0007
Revises: 0006
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ATTEMPT_COLUMNS: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (("list_price", sa.Float()), ("spot", sa.Boolean()),
                   ("provider", sa.String(64)), ("region", sa.String(64)),
                   ("preempt_at", sa.Float()), ("checkpoint_at", sa.Float()),
                   ("lost_work_s", sa.Float()))
JOB_COLUMNS: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (("blocklist", sa.JSON()), ("retry_counts", sa.JSON()),
               ("not_before", sa.Float()))


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("reclaimed_at", sa.Float(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        for name, job_kind in JOB_COLUMNS:
            batch.add_column(sa.Column(name, job_kind, nullable=True))
        batch.add_column(sa.Column("resume", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    with op.batch_alter_table("attempts") as batch:
        for name, kind in ATTEMPT_COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        for name, _kind in reversed(ATTEMPT_COLUMNS):
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("resume")
        for name, _kind in reversed(JOB_COLUMNS):
            batch.drop_column(name)
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("reclaimed_at")
