"""Database schema, engine and migrations (SQLite embedded, PostgreSQL in production)."""
