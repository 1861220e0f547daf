"""logs of ended jobs archived in the store: the key of a job's archive; log chunk ids
never reused on SQLite

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("logs_archive", sa.String(200), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        # Log chunk ids are cursors and rows now get deleted: on SQLite they need
        # AUTOINCREMENT, or a deleted newest id would be handed out again.
        with op.batch_alter_table("log_chunks", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": True}):
            pass


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("logs_archive")
