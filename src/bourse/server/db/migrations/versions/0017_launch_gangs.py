"""gang launches: the launches made together for one multi-node job

``launches.gang`` is the id its members share (None for a one-node launch): the reconciler and
the launcher end a gang that never came up whole, and the cloud's placement group of the gang
is named after it.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("launches", sa.Column("gang", sa.String(length=40), nullable=True))
    op.create_index("ix_launches_gang", "launches", ["gang"])


def downgrade() -> None:
    op.drop_index("ix_launches_gang", table_name="launches")
    op.drop_column("launches", "gang")
