"""Alembic migrations for the sheetsync schema (run with :func:`sheetsync.db.upgrade`)."""
