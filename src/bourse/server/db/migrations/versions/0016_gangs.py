"""gangs: several attempts of one job at once, one per node rank

An attempt is keyed by its job, its number and its ``rank`` (0 for a one-node job); its
timeline events and log chunks carry the rank, so two members' sequence numbers never collide.
``address`` and ``port`` are a member's address as its peers dial it and its gang's
MASTER_PORT; ``jobs.members`` holds the nodes of a gang's current attempt, by rank.

SQLite rebuilds the three tables (a primary key and unique constraints cannot be altered in
place); the high-water mark of ``log_chunks``' ids is kept, since they are cursors.

Revision ID: 0016
Revises: 0015
"""

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _rank() -> sa.Column[int]:
    return sa.Column("rank", sa.Integer(), nullable=False, server_default="0")


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def _high_water() -> int | None:
    if not _sqlite():
        return None
    value = op.get_bind().execute(sa.text(
        "SELECT seq FROM sqlite_sequence WHERE name = 'log_chunks'")).scalar()
    return None if value is None else int(value)


def _keep_high_water(value: int | None) -> None:
    if value is not None:
        op.get_bind().execute(sa.text(
            "UPDATE sqlite_sequence SET seq = max(seq, :value) WHERE name = 'log_chunks'"),
            {"value": value})


def _attempts(rank: bool) -> None:
    key = ["job_id", "number", "rank"] if rank else ["job_id", "number"]
    if not _sqlite():
        op.drop_constraint("attempts_pkey", "attempts", type_="primary")
    with warnings.catch_warnings(), op.batch_alter_table(
            "attempts", recreate="always" if _sqlite() else "auto") as batch:
        # SQLAlchemy warns that the rebuilt table's key differs from the old one: it is meant to
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        if rank:
            batch.add_column(_rank())
            batch.add_column(sa.Column("address", sa.String(length=64), nullable=True))
            batch.add_column(sa.Column("port", sa.Integer(), nullable=True))
        else:
            batch.drop_column("port")
            batch.drop_column("address")
            batch.drop_column("rank")
        batch.create_primary_key("attempts_pkey", key)


def _unique(table: str, name: str, columns: list[str], rank: bool, **kwargs: object) -> None:
    with op.batch_alter_table(table, recreate="always" if _sqlite() else "auto",
                              **kwargs) as batch:  # type: ignore[arg-type]
        batch.drop_constraint(name, type_="unique")
        if rank:
            batch.add_column(_rank())
        else:
            batch.drop_column("rank")
        batch.create_unique_constraint(name, columns)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("members", sa.JSON(), nullable=True))
    _attempts(rank=True)
    _unique("events", "uq_events_agent_seq", ["job_id", "attempt", "rank", "agent_seq"],
            rank=True)
    high = _high_water()
    _unique("log_chunks", "uq_log_chunks_seq", ["job_id", "attempt", "rank", "seq"], rank=True,
            table_kwargs={"sqlite_autoincrement": True})
    _keep_high_water(high)


def downgrade() -> None:
    high = _high_water()
    _unique("log_chunks", "uq_log_chunks_seq", ["job_id", "attempt", "seq"], rank=False,
            table_kwargs={"sqlite_autoincrement": True})
    _keep_high_water(high)
    _unique("events", "uq_events_agent_seq", ["job_id", "attempt", "agent_seq"], rank=False)
    _attempts(rank=False)
    op.drop_column("jobs", "members")
