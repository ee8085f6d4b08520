"""The ``sheetsync`` console script's fixtures, shared by tests/cli and tests/security.

``cli`` runs ``.venv/bin/sheetsync`` in a subprocess against a fresh SQLite file (a copy
of the one ``sheetsync db upgrade`` made once per pytest process: the migrations are the
same for every test, and running them took 2 to 10 s of each CLI test's setup), Redis
DB 13 (flushed before and after) and new PII keys.
The same variables are set in this process, so seeding with sheetsync.dev.seed encrypts
with the keys the command line decrypts with. A conftest imports them to use them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import Engine

from sheetsync.crypto import generate_key, reset_keyring
from sheetsync.db import dispose_engine, make_engine, session_factory
from sheetsync.models import Base
from sheetsync.settings import reset_settings
from support.cli import Cli, upgraded_engine
from support.redis_dbs import CLI_DB, redis_db_url


@pytest.fixture
def redis_db() -> Iterator[redis.Redis]:
    """The test's Redis database (on this process's own redis-server), empty."""
    client = redis.Redis.from_url(redis_db_url(CLI_DB))
    client.flushdb()
    try:
        yield client
    finally:
        client.flushdb()
        client.close()


@pytest.fixture
def cli_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_db: redis.Redis
) -> dict[str, str]:
    """The environment of every command, also set in this process."""
    variables = {
        "SHEETSYNC_DATABASE_URL": f"sqlite:///{tmp_path}/cli.db",
        "SHEETSYNC_REDIS_URL": redis_db_url(CLI_DB),
        "SHEETSYNC_PII_KEYS": generate_key(),
    }
    for name in [n for n in os.environ if n.startswith("SHEETSYNC_") and "_TEST_" not in n]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    reset_settings()
    reset_keyring()
    dispose_engine()
    env = dict(os.environ)
    # Wide, plain output: no wrapped table cells, no colour codes in what tests read.
    env.update({"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"})
    return env


@pytest.fixture(scope="session")
def upgraded_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file `sheetsync db upgrade` made, for the tests to copy."""
    path = tmp_path_factory.mktemp("schema") / "upgraded.db"
    env = {name: value for name, value in os.environ.items() if not name.startswith("SHEETSYNC_")}
    env["SHEETSYNC_DATABASE_URL"] = f"sqlite:///{path}"
    upgraded_engine(env).dispose()
    return path


@pytest.fixture
def database(cli_env: dict[str, str], upgraded_sqlite: Path) -> Iterator[Engine]:
    """An engine on the test's SQLite file, a copy of the one `sheetsync db upgrade` made."""
    url = cli_env["SHEETSYNC_DATABASE_URL"]
    shutil.copyfile(upgraded_sqlite, url.removeprefix("sqlite:///"))
    engine = make_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def cli(cli_env: dict[str, str], database: Engine, redis_db: redis.Redis) -> Cli:
    return Cli(
        env=cli_env,
        database_url=cli_env["SHEETSYNC_DATABASE_URL"],
        sessions=session_factory(database),
        redis=redis_db,
    )


@pytest.fixture
def pg_cli(
    cli_env: dict[str, str],
    postgres_url: str,
    redis_db: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cli]:
    """Like ``cli``, on the session's PostgreSQL database (emptied after the test)."""
    monkeypatch.setenv("SHEETSYNC_DATABASE_URL", postgres_url)
    reset_settings()
    env = {**cli_env, "SHEETSYNC_DATABASE_URL": postgres_url}
    engine = upgraded_engine(env)
    try:
        yield Cli(
            env=env, database_url=postgres_url, sessions=session_factory(engine), redis=redis_db
        )
    finally:
        names = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
        with engine.begin() as connection:
            connection.exec_driver_sql(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
        engine.dispose()
