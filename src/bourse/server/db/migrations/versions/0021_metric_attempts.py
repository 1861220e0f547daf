"""metric attempts: which attempt of a job wrote each metric point

``tracking_metrics.attempt`` is the attempt of the job (its number; one past the last for a
writer after the job ended, as a local run after ``bourse burst --local``; 0 for a run that is
not a job's) whose writer stored the point. A later attempt's point at a (key, step) replaces
the points earlier attempts stored there (``services.tracking_overlap``): one point per step
across a job's moves. Points stored before are attempt 0.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tracking_metrics", sa.Column("attempt", sa.Integer(), nullable=False,
                                                server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("tracking_metrics") as batch:
        batch.drop_column("attempt")
