"""Engines, sessions and migrations.

SQLite is the embedded default and PostgreSQL the production database. On SQLite,
worker processes and the web app share one file, so every connection runs in WAL mode
with a 30 s busy timeout and foreign keys on, and every transaction starts with
``BEGIN IMMEDIATE``: writers queue for the write lock at BEGIN instead of failing (or
losing an update) when a read transaction later tries to write.

Only a migration creates a database: every other engine opens a SQLite file read-write
without creating it, so a process pointed at the wrong directory (or with no
``SHEETSYNC_DATABASE_URL`` at all) fails with one line instead of making an empty file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from sheetsync import extras
from sheetsync.errors import ConfigError
from sheetsync.settings import get_settings
from sheetsync.text import mask_url

if TYPE_CHECKING:
    from alembic.config import Config

#: Where Alembic finds the migrations; no alembic.ini needed. A plain path rather than
#: ``"sheetsync:migrations"``: Alembic resolves that through importlib.resources, which
#: fails when an editable install exposes ``sheetsync`` as a namespace package.
MIGRATIONS_LOCATION = str(Path(__file__).with_name("migrations"))
#: SQLite waits this long for another process's write lock before giving up.
DEFAULT_SQLITE_BUSY_TIMEOUT_S = 30.0

_POSTGRES_DRIVER = "postgresql+psycopg"


class _ProcessDefault:
    """The process-wide engine and sessionmaker, made on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.engine: Engine | None = None
        self.sessionmaker: sessionmaker[Session] | None = None


_default = _ProcessDefault()


def normalize_url(url: str) -> str:
    """Pin PostgreSQL URLs to psycopg 3 (``postgres://`` and ``postgresql://`` alike)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return f"{_POSTGRES_DRIVER}://{url.removeprefix(prefix)}"
    return url


def is_postgres(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "postgresql"


def is_sqlite(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "sqlite"


def require_driver(url: str) -> str:
    """The URL's backend (``sqlite``, ``postgresql``); a one-line
    :class:`~sheetsync.extras.MissingExtraError` when its driver's extra is not installed
    (checked at start-up too, not only at the first use of the database)."""
    backend = make_url(normalize_url(url)).get_backend_name()
    if backend == "postgresql":
        extras.require("postgres", "PostgreSQL (SHEETSYNC_DATABASE_URL)")
    return backend


def make_engine(url: str | None = None, *, create: bool = False, **engine_options: Any) -> Engine:
    """A new engine for ``url`` (default: ``SHEETSYNC_DATABASE_URL``).

    A SQLite file must exist unless ``create`` (migrations): connecting to a missing one
    raises a one-line :class:`ConfigError` and creates nothing. ``engine_options`` go to
    :func:`sqlalchemy.create_engine` unchanged.
    """
    url = normalize_url(url if url is not None else get_settings().database_url)
    backend = require_driver(url)
    if backend == "sqlite":
        connect_args = engine_options.pop("connect_args", {})
        connect_args.setdefault("timeout", DEFAULT_SQLITE_BUSY_TIMEOUT_S)
        engine = create_engine(url, connect_args=connect_args, **engine_options)
        _configure_sqlite(engine)
        if not create:
            open_existing_files_only(engine, url)
        return engine
    engine_options.setdefault("pool_pre_ping", True)
    return create_engine(url, **engine_options)


def sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names; "" for an in-memory database; None for any other
    database (or a ``file:`` URI, ``?uri=true``, which names its own open mode)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if str(parsed.query.get("uri", "")).lower() == "true":
        if parsed.query.get("mode") == "memory":
            return ""
        return None
    path = parsed.database or ""
    return "" if path == ":memory:" else path


def missing_database_message(url: str) -> str:
    return (
        f"no database at {mask_url(url)}: run `sheetsync db upgrade` first "
        "(or set SHEETSYNC_DATABASE_URL)"
    )


def require_database(url: str, *, create: bool = False) -> None:
    """Refuse, in one line (:class:`ConfigError`), a SQLite database this process must
    not open: a file that does not exist (only a migration, ``create=True``, makes one),
    or an in-memory database, which starts empty and is gone when the process ends."""
    shown = mask_url(url)
    path = sqlite_file(url)
    if make_url(url).get_backend_name() == "sqlite" and path == "":
        raise ConfigError(
            f"SHEETSYNC_DATABASE_URL={shown} is an in-memory SQLite database, empty and gone "
            "when the process ends: point it at a file (sqlite:///path) or PostgreSQL"
        )
    if not path:
        return
    if create:
        folder = Path(path).absolute().parent
        if not folder.is_dir():
            raise ConfigError(f"cannot create the database at {shown}: no directory {folder}")
    elif not Path(path).is_file():
        raise ConfigError(missing_database_message(url))


def open_existing_files_only(engine: Engine, url: str) -> None:
    """Open the SQLite file read-write but never create it (``mode=rw``): a file that is
    missing, or was deleted since, is a one-line ConfigError, not a new empty database."""

    @event.listens_for(engine, "do_connect")
    def _existing_file(
        _dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]
    ) -> None:
        path = cargs[0] if cargs else None
        if not isinstance(path, str) or path in ("", ":memory:") or cparams.get("uri"):
            return
        if not os.path.isfile(path):
            raise ConfigError(missing_database_message(url))
        cargs[0] = f"file:{quote(os.path.abspath(path))}?mode=rw"
        cparams["uri"] = True


def _configure_sqlite(engine: Engine) -> None:
    busy_timeout_ms = int(DEFAULT_SQLITE_BUSY_TIMEOUT_S * 1000)

    # SQLAlchemy's documented pysqlite recipe: take BEGIN away from the driver (which
    # would issue a deferred BEGIN only before DML) and issue our own at every begin.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            cursor.execute("PRAGMA foreign_keys=ON")
            # WAL makes NORMAL durable across application crashes; only an OS crash
            # can lose the last commits, never corrupt the file.
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions on ``engine``. Objects stay readable after commit (no expiry)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


def get_engine() -> Engine:
    """The process-wide engine for ``SHEETSYNC_DATABASE_URL``, made on first use."""
    return _get_default()[0]


def get_sessionmaker() -> sessionmaker[Session]:
    """The process-wide sessionmaker, bound to :func:`get_engine`."""
    return _get_default()[1]


def _get_default() -> tuple[Engine, sessionmaker[Session]]:
    with _default.lock:
        if _default.engine is None or _default.sessionmaker is None:
            _default.engine = make_engine()
            _default.sessionmaker = session_factory(_default.engine)
        return _default.engine, _default.sessionmaker


def dispose_engine(*, close: bool = True) -> None:
    """Forget the process-wide engine; the next :func:`get_engine` makes a new one.

    In a forked child (a Celery worker process) call it with ``close=False``: the
    pooled connections belong to the parent and must not be closed from here.
    """
    with _default.lock:
        engine, _default.engine, _default.sessionmaker = _default.engine, None, None
    if engine is not None:
        engine.dispose(close=close)


@contextmanager
def session_scope(factory: sessionmaker[Session] | None = None) -> Iterator[Session]:
    """A session that commits when the block ends and rolls back if it raises."""
    session = (factory or get_sessionmaker())()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config() -> Config:
    """Alembic's configuration, built in code: there is no alembic.ini."""
    # Imported here: Alembic is needed to migrate, not by every process that queries.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS_LOCATION)
    return config


@dataclass(frozen=True)
class Upgrade:
    """What :func:`upgrade` did: the schema revision before it (None: no schema), the one
    after, and the SQLite file it created (None: the database was there)."""

    before: str | None
    after: str | None
    new_file: Path | None = None

    def report(self, shown_url: str) -> str:
        """The line ``sheetsync db upgrade`` prints: what it did, then the state."""
        if self.before == self.after:
            return f"{shown_url}: schema up to date at revision {self.after}; nothing to do"
        if self.before is None:
            where = ""
            if self.new_file is not None:  # its full path, unless the URL shows it
                named = str(self.new_file) in shown_url
                where = " in a new SQLite file" + ("" if named else f", {self.new_file}")
            done = f"created the schema at revision {self.after}{where}"
        else:
            done = f"upgraded the schema from revision {self.before} to {self.after}"
        return f"{shown_url}: {done} (schema up to date)"


def upgrade(url: str | None = None, revision: str = "head") -> Upgrade:
    """Migrate the database at ``url`` (default: the settings') to ``revision``.

    Idempotent: at head already, nothing changes. Concurrent callers are safe: the
    migration runs in one transaction holding a lock (``BEGIN IMMEDIATE`` on SQLite,
    an advisory lock on PostgreSQL, see ``migrations/env.py``). Returns what it did: the
    revisions before and after, read in that transaction (on PostgreSQL "before" is
    read just ahead of the lock, so a migration another process commits in between is
    reported as this one's), and the SQLite file it created, if any.
    """
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    url = url if url is not None else get_settings().database_url
    path = sqlite_file(url)
    new_file = Path(path).absolute() if path and not Path(path).exists() else None
    engine = make_engine(url, create=True, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            before = MigrationContext.configure(connection).get_current_revision()
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            after = MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
    return Upgrade(before, after, new_file)
