"""burst: a running job moved to another Compute

``jobs.burst`` is the move under way (``services.burst``): the attempt asked to checkpoint
and exit, the Computes it moves from and to, why, and whether it goes on locally. When that
attempt ends, the job continues with the new Compute without counting a retry
(``lifecycle.move_job``).

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("burst", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "burst")
