"""Settings, connections, and turning any failure into one line an operator can act on.

The library is imported when a command runs, not when the command line is built, so
``--help`` and usage errors answer at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sheetsync.errors import ConfigError, SheetSyncError
from sheetsync.ops.text import mask_url

if TYPE_CHECKING:
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.orm import Session, sessionmaker

    from sheetsync.pipeline import Pipeline
    from sheetsync.settings import Settings

#: Set to 1 to see the traceback of an unexpected error instead of its one-line summary.
TRACEBACK_VARIABLE = "SHEETSYNC_CLI_TRACEBACK"


def load_settings() -> Settings:
    """The settings, read fresh from the environment (a bad value: one-line ConfigError)."""
    from sheetsync.settings import get_settings, reset_settings

    reset_settings()
    return get_settings()


def require_database(url: str, *, create: bool = False) -> None:
    """Refuse a SQLite database this command must not open, in one line.

    Opening a SQLite file that does not exist creates it, empty: only ``db upgrade``
    (``create=True``) may do that. An in-memory database starts empty and is gone when
    the command ends, so no command can use it.
    """
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return
    shown = mask_url(url)
    path = parsed.database or ""
    if str(parsed.query.get("uri", "")).lower() == "true":  # sqlite:///file:x.db?uri=true
        path = path.removeprefix("file:")
        if parsed.query.get("mode") == "memory":
            path = ""
    if path in ("", ":memory:"):
        raise ConfigError(
            f"SHEETSYNC_DATABASE_URL={shown} is an in-memory SQLite database, empty and gone "
            "when the command ends: point it at a file (sqlite:///path) or PostgreSQL"
        )
    if create:
        folder = Path(path).absolute().parent
        if not folder.is_dir():
            raise ConfigError(f"cannot create the database at {shown}: no directory {folder}")
    elif not Path(path).is_file():
        raise ConfigError(
            f"no database at {shown}: run `sheetsync db upgrade` first "
            "(or set SHEETSYNC_DATABASE_URL)"
        )


@contextmanager
def open_pipeline() -> Iterator[Pipeline]:
    """Redis and the database for one command; both are closed at the end."""
    from sheetsync.pipeline import Pipeline

    settings = load_settings()
    require_database(settings.database_url)
    pipeline = Pipeline.build(settings)
    try:
        yield pipeline
    finally:
        pipeline.close()


@contextmanager
def open_database() -> Iterator[sessionmaker[Session]]:
    """Sessions on the database alone, for commands that never touch Redis."""
    from sheetsync.db import make_engine, session_factory

    url = load_settings().database_url
    require_database(url)
    engine = make_engine(url)
    try:
        yield session_factory(engine)
    finally:
        engine.dispose()


def _configured(name: str) -> str:
    """A URL from the settings, masked; ``?`` when the settings themselves are broken."""
    from sheetsync.settings import get_settings

    try:
        url: str = getattr(get_settings(), name)
    except ConfigError:
        return "?"
    return mask_url(url)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe(exc: BaseException) -> str | None:
    """The one-line message for a failure we know how to explain, else None."""
    if isinstance(exc, SheetSyncError):
        return first_line(exc)
    # Only what this failure can be is imported: a module never loaded raised nothing.
    import sys

    if "redis" in sys.modules:
        import redis.exceptions

        if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
            return f"cannot reach Redis at {_configured('redis_url')}: {first_line(exc)}"
        if isinstance(exc, redis.exceptions.RedisError):
            return f"Redis at {_configured('redis_url')} answered: {first_line(exc)}"
    if "kombu" in sys.modules:
        import kombu.exceptions

        if isinstance(exc, kombu.exceptions.OperationalError):
            return (
                f"cannot reach the Celery broker at {_configured('celery_broker_url')}: "
                f"{first_line(exc)}"
            )
    if "sqlalchemy" in sys.modules:
        import sqlalchemy.exc

        if isinstance(exc, sqlalchemy.exc.DBAPIError):
            return _describe_database(exc)
        if isinstance(exc, sqlalchemy.exc.ArgumentError):
            return f"SHEETSYNC_DATABASE_URL: {first_line(exc)}"
    if "alembic" in sys.modules:
        from alembic.util.exc import CommandError

        if isinstance(exc, CommandError):
            return f"migration failed: {first_line(exc)}"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (
            f"the Python module {exc.name} is not installed: "
            "reinstall sheetsync with its dependencies"
        )
    return None


def _describe_database(exc: DBAPIError) -> str:
    import sqlalchemy.exc

    url = _configured("database_url")
    # The driver's own message: SQLAlchemy's str() adds the statement and its
    # parameters, which may hold answer ids or worse.
    reason = first_line(exc.orig) if exc.orig is not None else type(exc).__name__
    lowered = reason.lower()
    if "no such table" in lowered or ("relation" in lowered and "does not exist" in lowered):
        return f"the database at {url} has no sheetsync schema: run `sheetsync db upgrade`"
    if isinstance(exc, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError):
        return f"cannot reach the database at {url}: {reason}"
    return f"database error at {url}: {reason}"
