"""The run's own services: a redis-server it can restart, a PostgreSQL database it drops,
and the SHEETSYNC_* environment of this process (the web app) while the run lasts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from sheetsync.db import dispose_engine, normalize_url
from sheetsync.dev.local import LocalRedis, free_port, start_redis_server

#: The buffer Redis and the broker are two databases of one server.
BUFFER_DB = 0
BROKER_DB = 1


class RedisServer:
    """A redis-server without persistence on a fixed port: a restart loses everything."""

    def __init__(self) -> None:
        self.port = free_port()
        self._server: LocalRedis | None = None
        self.restarts = 0
        self.down_s = 0.0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{BUFFER_DB}"

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{BROKER_DB}"

    def start(self) -> None:
        self._server = start_redis_server(port=self.port)

    def restart(self) -> None:
        """SIGKILL the server and start a fresh, empty one on the same port."""
        started = time.monotonic()
        server = self._server
        if server is not None and server.process is not None:
            server.process.kill()
            server.process.wait()
        self._server = start_redis_server(port=self.port)
        self.restarts += 1
        self.down_s += time.monotonic() - started

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class Database:
    """A fresh PostgreSQL database on ``server_url``, dropped by :meth:`drop`."""

    def __init__(self, server_url: str, name: str) -> None:
        self.server = make_url(normalize_url(server_url))
        self.name = name
        self.url = self.server.set(database=name).render_as_string(hide_password=False)

    def create(self) -> None:
        admin = create_engine(self.server, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
                connection.exec_driver_sql(f'CREATE DATABASE "{self.name}"')
        finally:
            admin.dispose()

    def drop(self) -> None:
        dispose_engine()
        admin = create_engine(self.server, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            admin.dispose()


def child_environment(settings: Mapping[str, str]) -> dict[str, str]:
    """The environment of a worker or beat: ours without any inherited SHEETSYNC_*
    (a test session's own settings must never point a chaos process elsewhere)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    return {**inherited, **settings}


@contextmanager
def process_settings(settings: Mapping[str, str]) -> Iterator[None]:
    """Make ``settings`` this process's SHEETSYNC_* environment, and restore the old one
    (and every cache built on it) afterwards."""
    from sheetsync.crypto import reset_keyring
    from sheetsync.services import reset_services
    from sheetsync.settings import reset_settings

    saved = {k: v for k, v in os.environ.items() if k.startswith("SHEETSYNC_")}

    def reset() -> None:
        reset_settings()
        reset_keyring()
        reset_services()
        dispose_engine()

    for name in saved:
        del os.environ[name]
    os.environ.update(settings)
    reset()
    try:
        yield
    finally:
        for name in [k for k in os.environ if k.startswith("SHEETSYNC_")]:
            del os.environ[name]
        os.environ.update(saved)
        with suppress(Exception):
            reset()
