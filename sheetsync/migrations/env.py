"""Alembic environment: runs on the connection :func:`sheetsync.db.upgrade` passes in.

Run without one (``alembic`` on the command line with a config pointing here), it
connects to ``SHEETSYNC_DATABASE_URL``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from sheetsync.db import is_postgres, make_engine
from sheetsync.migrations.compat import include_name
from sheetsync.models import Base

#: Any constant shared by every sheetsync process: two of them starting at once (web
#: app and workers) then migrate one after the other instead of racing on DDL.
MIGRATION_LOCK_ID = 0x5EE7_5AC0


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        compare_type=True,
        include_name=include_name,  # schema_compat is not the ORM's
        # SQLite cannot ALTER most things in place; batch mode copies the table.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        if is_postgres(connection):
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    engine = make_engine(create=True)  # a migration is told to make the database
    try:
        with engine.begin() as owned_connection:
            run_migrations(owned_connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("sheetsync migrations run online only: use `sheetsync db upgrade`")
run_migrations_online()
