"""INSERT ... ON CONFLICT DO NOTHING on SQLite and PostgreSQL alike: the de-duplication of
at-least-once agent messages rests on it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Insert, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession


def _insert(session: AsyncSession, table: Table) -> Insert:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise NotImplementedError(f"database {dialect!r} is not supported")


async def insert_ignore(session: AsyncSession, table: Table, rows: Sequence[dict[str, Any]]) -> int:
    """Insert the rows that do not collide with a unique key; return how many were inserted."""
    if not rows:
        return 0
    result = await session.execute(_insert(session, table).values(list(rows)))
    return int(getattr(result, "rowcount", 0) or 0)


async def insert_one_ignore(session: AsyncSession, table: Table, row: dict[str, Any],
                            key: Any) -> Any | None:
    """Insert one row unless it collides; return its ``key`` column value, None if it existed."""
    statement = _insert(session, table).values(row).returning(key)
    return (await session.execute(statement)).scalar_one_or_none()
