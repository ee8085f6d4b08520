"""Fixtures only (helpers live in ``support``): databases, Redis, the emulator, workers.

Databases
    ``sqlite_url``    a fresh, empty SQLite file per test.
    ``postgres_url``  a PostgreSQL database made for this test session (and dropped at
                      its end) on the server named by ``SHEETSYNC_TEST_POSTGRES_URL``,
                      e.g. ``postgresql://postgres@127.0.0.1:5432/test``. Tests that
                      use it are skipped when the variable is unset.
    ``db_url``        SQLite, or PostgreSQL for a test parametrized indirectly with
                      ``"postgres"`` (``support.databases.BOTH_DATABASES`` runs both).
    ``engine``        an engine on ``db_url`` with the schema at head, also the process
                      default (``SHEETSYNC_DATABASE_URL`` points at it). Every table is
                      emptied after the test.
    ``session``       a session on ``engine``; the test commits what others must see.

Keys
    ``pii_keys``      two fresh keys in ``SHEETSYNC_PII_KEYS`` (newest first), as bytes.

The pipeline
    ``redis_url``        a Redis DB for buffers (db 15 of this process's own redis-server,
                         ``support.redis_dbs``), emptied before and after each test; the
                         broker uses the next-lower DB, emptied likewise.
    ``emulator``         one Sheets API emulator for the session; ``admin`` resets it.
    ``pipeline_env``     SHEETSYNC_* variables for a test: short delays (never the
                         production 10 s), the emulator's endpoints, these Redis DBs and
                         the test's database. ``configure(**overrides)`` changes them.
    ``pipeline``         the process-wide Pipeline for that environment.
    ``worker``           an in-process Celery worker (``start_worker``, solo pool).
    ``worker_processes`` a factory of real ``celery -A sheetsync.celery worker`` processes.
    ``world``            seeds owners, forms, sheets (in the emulator) and answers.
    ``alerts``           a webhook that records alerts, set as SHEETSYNC_ALERT_WEBHOOK_URL.
    ``notify_dir``       where the owner hooks of ``support.notify_hooks`` (named by dotted
                         path in SHEETSYNC_OWNER_HOOK) write what they were called with.

Settings, keyring and the default engine are cached per process; they are reset around
every test so one test's environment never leaks into the next.

The tiers: ``support.tiers``, registered here, marks every test with what it starts
(``redis``, ``emulator``, ``worker``, ``process``, ``postgres``, ``docker``; ``unit`` for
none), derived from the fixtures and helpers it uses, and guards the unit tier.
"""

from __future__ import annotations

import base64
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session
from support import tiers
from support.alerts import AlertSink
from support.paths import ROOT
from support.processes import WorkerProcesses
from support.redis_dbs import broker_url_for, pipeline_redis_url
from support.world import World

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync.crypto import generate_key, reset_keyring
from sheetsync.db import dispose_engine, is_postgres, make_engine, normalize_url, session_factory
from sheetsync.db import upgrade as upgrade_schema
from sheetsync.dispatch import QUEUES
from sheetsync.metrics import events as metric_events
from sheetsync.models import Base
from sheetsync.services import Services, get_services, reset_services
from sheetsync.settings import reset_settings

POSTGRES_URL_VARIABLE = "SHEETSYNC_TEST_POSTGRES_URL"

#: Short timings for tests. Production defaults are 10 s, 60 s, ...
TEST_SETTINGS = {
    "FLUSH_DELAY_S": "0.5",
    "LEASE_S": "4",
    "GOOGLE_TIMEOUT_S": "2",
    "SWEEP_GRACE_S": "1",
    "RETRY_BASE_S": "0.05",
    "RECONCILE_AFTER_S": "0",
    "RATE_LIMIT_PER_ACCOUNT": "100000",
    "RATE_LIMIT_PER_PROJECT": "100000",
    "ALERT_TIMEOUT_S": "1",
}

_migrated_urls: set[str] = set()


def pytest_configure(config: pytest.Config) -> None:
    """The tiers' markers and the unit tier's guard (``support.tiers``), for the whole run
    (the emulator's tests too)."""
    if not config.pluginmanager.is_registered(tiers):
        config.pluginmanager.register(tiers, "sheetsync-tiers")


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


@pytest.fixture
def db_url(request: pytest.FixtureRequest) -> str:
    """The URL of an empty database: SQLite, or PostgreSQL when a test parametrizes it
    indirectly with ``"postgres"`` (``support.databases.BOTH_DATABASES`` does both)."""
    backend = getattr(request, "param", "sqlite")
    url: str = request.getfixturevalue(f"{backend}_url")
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


# -- the pipeline ----------------------------------------------------------------------


@pytest.fixture
def redis_url() -> Iterator[str]:
    url = pipeline_redis_url()
    client = redis.Redis.from_url(url)
    broker = redis.Redis.from_url(broker_url_for(url))
    # An emit publishes its metric counts a moment later: never into the next test's Redis.
    metric_events.tally.clear()
    client.flushdb()
    broker.flushdb()
    yield url
    metric_events.tally.clear()
    client.flushdb()
    broker.flushdb()
    client.close()
    broker.close()


@pytest.fixture(scope="session")
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer() as server:
        yield server


@pytest.fixture
def admin(emulator: EmulatorServer) -> EmulatorAdmin:
    client = EmulatorAdmin(emulator.url)
    client.reset()
    return client


@pytest.fixture
def pipeline_env(
    monkeypatch: pytest.MonkeyPatch,
    engine: Engine,
    pii_keys: tuple[bytes, bytes],
    emulator: EmulatorServer,
    admin: EmulatorAdmin,
    redis_url: str,
) -> Iterator[Callable[..., dict[str, str]]]:
    """Set the test's SHEETSYNC_* environment; returns ``configure(**overrides)``."""
    env: dict[str, str] = {
        "SHEETSYNC_REDIS_URL": redis_url,
        "SHEETSYNC_BROKER_URL": broker_url_for(redis_url),
        "SHEETSYNC_DATABASE_URL": str(engine.url.render_as_string(hide_password=False)),
        "SHEETSYNC_PII_KEYS": os.environ["SHEETSYNC_PII_KEYS"],
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-tests",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
        "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
    }
    env.update({f"SHEETSYNC_{k}": v for k, v in TEST_SETTINGS.items()})

    def configure(**overrides: Any) -> dict[str, str]:
        env.update({f"SHEETSYNC_{k.upper()}": str(v) for k, v in overrides.items()})
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        reset_settings()
        reset_keyring()
        reset_services()
        from sheetsync.celery.application import reconfigure

        reconfigure()
        return dict(env)

    configure()
    yield configure
    reset_services()


@pytest.fixture
def pipeline(pipeline_env: Callable[..., dict[str, str]]) -> Services:
    return get_services()


@pytest.fixture
def worker(pipeline_env: Callable[..., dict[str, str]]) -> Iterator[Any]:
    from sheetsync.celery import app as celery_app

    with start_worker(
        celery_app,
        pool="solo",
        concurrency=1,
        perform_ping_check=False,
        queues=list(QUEUES),
        shutdown_timeout=30,
    ) as controller:
        yield controller


@pytest.fixture
def worker_processes(
    pipeline_env: Callable[..., dict[str, str]], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcesses]]:
    made: list[WorkerProcesses] = []

    def factory(**overrides: Any) -> WorkerProcesses:
        workers = WorkerProcesses(pipeline_env(**overrides), tmp_path)
        made.append(workers)
        return workers

    yield factory
    for workers in made:
        workers.stop()


@pytest.fixture
def world(pipeline: Services, admin: EmulatorAdmin) -> World:
    return World(pipeline, admin)


@pytest.fixture
def alerts(pipeline_env: Callable[..., dict[str, str]]) -> Iterator[AlertSink]:
    sink = AlertSink()
    pipeline_env(alert_webhook_url=sink.url)
    yield sink
    sink.close()


@pytest.fixture
def notify_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the dotted-path hooks (run by a worker, maybe a process) write what they saw."""
    directory = tmp_path / "notified"
    directory.mkdir()
    monkeypatch.setenv("SHEETSYNC_TEST_NOTIFY_DIR", str(directory))
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    return directory
