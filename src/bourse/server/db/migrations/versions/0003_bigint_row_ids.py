"""64-bit row ids for events and log chunks (their ids are the API's cursors)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite row ids are 64-bit already
    for table in ("events", "log_chunks"):
        op.alter_column(table, "id", type_=sa.BigInteger(), existing_type=sa.Integer())


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in ("events", "log_chunks"):
        op.alter_column(table, "id", type_=sa.Integer(), existing_type=sa.BigInteger())
