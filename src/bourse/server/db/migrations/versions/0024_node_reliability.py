"""node reliability: what the exchange measures of each node (``core.reliability``)

``nodes.up_s``: the connected time of the node's ended connections; ``nodes.up_since``: when
its live connection began (none when it is not connected). ``nodes.attempts_ended``,
``nodes.attempts_interrupted`` (lost with the node or preempted) and ``nodes.work_s`` (their
run time) are counted as attempts end there. ``nodes.reliability``: the score those give
(none before an hour watched), stored so that placement's cached offers carry it; the
scheduler works it out again every minute. A node enrolled before this migration starts
from zero: its earlier history was not kept.

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("up_s", sa.Float(), nullable=False, server_default="0"))
    op.add_column("nodes", sa.Column("up_since", sa.Float(), nullable=True))
    op.add_column("nodes", sa.Column("attempts_ended", sa.Integer(), nullable=False,
                                     server_default="0"))
    op.add_column("nodes", sa.Column("attempts_interrupted", sa.Integer(), nullable=False,
                                     server_default="0"))
    op.add_column("nodes", sa.Column("work_s", sa.Float(), nullable=False, server_default="0"))
    op.add_column("nodes", sa.Column("reliability", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        for column in ("reliability", "work_s", "attempts_interrupted", "attempts_ended",
                       "up_since", "up_s"):
            batch.drop_column(column)
