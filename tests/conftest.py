"""Shared fixtures: databases (SQLite and PostgreSQL), sessions and PII keys.

Databases
    ``sqlite_url``    a fresh, empty SQLite file per test.
    ``postgres_url``  a PostgreSQL database made for this test session (and dropped at
                      its end) on the server named by ``SHEETSYNC_TEST_POSTGRES_URL``,
                      e.g. ``postgresql://postgres@127.0.0.1:5432/test``. Tests that
                      use it are skipped when the variable is unset.
    ``db_url``        both of the above: a test that uses it runs once per backend
                      (ids ``sqlite`` and ``postgres``; the latter is marked ``postgres``).
    ``engine``        an engine on ``db_url`` with the schema at head (a SQLite file
                      starts as a copy of one migrated template; PostgreSQL is migrated
                      once per session). It is also the process default:
                      ``SHEETSYNC_DATABASE_URL`` points at it, so library code that calls
                      ``get_sessionmaker()`` sees the same data. Every table is emptied
                      after the test.
    ``session``       a session on ``engine``; the test commits what others must see.

Keys
    ``pii_keys``      two fresh keys in ``SHEETSYNC_PII_KEYS`` (newest first), returned
                      as raw bytes.

Settings, keyring and the default engine are cached per process; they are reset around
every test so one test's environment never leaks into the next.
"""

from __future__ import annotations

import base64
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from sheetsync.crypto import generate_key, reset_keyring
from sheetsync.db import dispose_engine, is_postgres, make_engine, normalize_url, session_factory
from sheetsync.db import upgrade as upgrade_schema
from sheetsync.models import Base
from sheetsync.settings import reset_settings

POSTGRES_URL_VARIABLE = "SHEETSYNC_TEST_POSTGRES_URL"

_migrated_urls: set[str] = set()


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    """Forget cached settings, keys and the default engine before and after each test."""
    _reset_caches()
    yield
    _reset_caches()


def _reset_caches() -> None:
    reset_settings()
    reset_keyring()
    dispose_engine()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file in the test's temporary directory (not created yet)."""
    return f"sqlite:///{tmp_path}/sheetsync.db"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A new, empty PostgreSQL database for this test session; dropped at the end."""
    server_url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not server_url:
        pytest.skip(
            f"{POSTGRES_URL_VARIABLE} is not set (e.g. postgresql://postgres@127.0.0.1:5432/test)"
        )
    server = make_url(normalize_url(server_url))
    name = f"sheetsync_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        dispose_engine()
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def db_url(request: pytest.FixtureRequest) -> str:
    """The URL of an empty database, once per backend."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once; each test's database starts as a copy."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade_schema(f"sqlite:///{path}")
    return path


@pytest.fixture
def engine(
    db_url: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Engine]:
    """An engine on ``db_url`` with the schema at head, also the process default."""
    if db_url not in _migrated_urls:
        database = make_url(db_url).database
        if db_url.startswith("sqlite") and database and not Path(database).exists():
            shutil.copyfile(request.getfixturevalue("_sqlite_template"), database)
        else:
            upgrade_schema(db_url)
        _migrated_urls.add(db_url)
    monkeypatch.setenv("SHEETSYNC_DATABASE_URL", db_url)
    _reset_caches()
    engine = make_engine(db_url)
    try:
        yield engine
    finally:
        dispose_engine()
        _empty_tables(engine)
        engine.dispose()


def _empty_tables(engine: Engine) -> None:
    tables = list(reversed(Base.metadata.sorted_tables))
    with engine.begin() as connection:
        if is_postgres(connection):
            # Fail fast, naming the cause, if a test leaked an open transaction.
            connection.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
            names = ", ".join(f'"{table.name}"' for table in tables)
            connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                connection.execute(table.delete())


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session on ``engine``; whatever the test left uncommitted is rolled back."""
    with session_factory(engine)() as session:
        yield session
        session.rollback()


@pytest.fixture
def pii_keys(monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    """Two new keys in ``SHEETSYNC_PII_KEYS``: ``(newest, older)`` as raw bytes."""
    newest, older = generate_key(), generate_key()
    monkeypatch.setenv("SHEETSYNC_PII_KEYS", f"{newest},{older}")
    _reset_caches()
    return base64.urlsafe_b64decode(newest), base64.urlsafe_b64decode(older)
