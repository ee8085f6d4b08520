"""The settings and connections of one command; a failure's one line is
:mod:`sheetsync.ops.explain`'s.

The library is imported when a command runs, not when the command line is built, so
``--help`` and usage errors answer at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from sheetsync.services import Services
    from sheetsync.settings import Settings

#: Set to 1 to see the traceback of an unexpected error instead of its one-line summary.
TRACEBACK_VARIABLE = "SHEETSYNC_CLI_TRACEBACK"


def load_settings() -> Settings:
    """The settings, read fresh from the environment (a bad value: one-line ConfigError)."""
    from sheetsync.settings import get_settings, reset_settings

    reset_settings()
    return get_settings()


def require_database(url: str, *, create: bool = False) -> None:
    """Refuse a SQLite database this command must not open, in one line: a file that
    does not exist (only ``db upgrade``, ``create=True``, makes one), or an in-memory
    database (:func:`sheetsync.db.require_database`)."""
    from sheetsync.db import require_database as require

    require(url, create=create)


#: ``sheetsync db upgrade`` without SHEETSYNC_DATABASE_URL: it names no database to migrate.
DATABASE_URL_UNSET = (
    "SHEETSYNC_DATABASE_URL is not set: set it to the database to create or migrate "
    "(sqlite:///path or postgresql://user@host/db); db upgrade does not fall back to "
    "sqlite:///sheetsync.db in the current directory"
)


def upgrade_database() -> str:
    """``sheetsync db upgrade`` (the whole command line's and the slim install's): the
    settings' database migrated to the newest revision; returns the line to print, which
    says what it did (created the schema, upgraded it from which revision, or nothing).

    SHEETSYNC_DATABASE_URL must be set (a one-line ConfigError otherwise): the migration
    is the one command that creates a database, and a deploy step that lost the variable
    would make an empty ./sheetsync.db while the database meant stays unmigrated."""
    from sheetsync.db import upgrade
    from sheetsync.errors import ConfigError
    from sheetsync.text import mask_url

    settings = load_settings()
    if "database_url" not in settings.model_fields_set:
        raise ConfigError(DATABASE_URL_UNSET)
    require_database(settings.database_url, create=True)
    return upgrade(settings.database_url).report(mask_url(settings.database_url))


@contextmanager
def open_services() -> Iterator[Services]:
    """Redis and the database for one command; both are closed at the end."""
    from sheetsync.services import Services

    settings = load_settings()
    require_database(settings.database_url)
    services = Services.build(settings)
    try:
        yield services
    finally:
        services.close()


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
