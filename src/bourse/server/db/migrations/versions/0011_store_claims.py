"""store claims: which project owns a prefix of the object store

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
STORE_KEY = sa.String(1024).with_variant(postgresql.VARCHAR(1024, collation="C"),
                                         "postgresql")  # as in schema.py


def upgrade() -> None:
    op.create_table(
        "store_claims",
        sa.Column("scheme", sa.String(length=16), nullable=False),
        sa.Column("bucket", sa.String(length=255), nullable=False),
        sa.Column("prefix", STORE_KEY, nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("scheme", "bucket", "prefix"),
    )


def downgrade() -> None:
    op.drop_table("store_claims")
