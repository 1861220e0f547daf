"""Alembic environment: migrations always run on a connection handed in by bourse."""

from __future__ import annotations

from alembic import context

from bourse.server.db.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("bourse runs migrations itself at start (Database.migrate)")
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
