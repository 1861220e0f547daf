"""node verification: fingerprint, probe report, verification report, declared capabilities

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("fingerprint", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("verification_status", sa.String(length=16), nullable=False,
                                   server_default="unverified"))
        batch.add_column(sa.Column("verified_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("verification", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("report", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("declared", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        for column in ("declared", "report", "verification", "verified_at",
                       "verification_status", "fingerprint"):
            batch.drop_column(column)
