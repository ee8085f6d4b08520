"""Fixtures for pipeline tests: real Redis, the emulator, real Celery workers.

    ``redis_url``        a Redis DB for buffers (``SHEETSYNC_TEST_REDIS_URL``, default
                         db 15 on 127.0.0.1), emptied before and after each test; the
                         broker uses the next-lower DB, emptied likewise.
    ``emulator``         one Sheets API emulator for the session; ``admin`` resets it.
    ``pipeline_env``     SHEETSYNC_* variables for a test: short delays (never the
                         production 10 s), the emulator's endpoints, these Redis DBs and
                         the test's database. ``configure(**overrides)`` changes them.
    ``worker``           an in-process Celery worker (``start_worker``, solo pool).
    ``worker_processes`` a factory of real ``celery -A tasks worker`` processes.
    ``world``            seeds owners, forms, sheets (in the emulator) and answers.

The database defaults to SQLite here; a test parametrizes ``db_url`` indirectly with
``"postgres"`` to run on PostgreSQL too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from sqlalchemy import Engine
from world import World

from sheetsync.crypto import reset_keyring
from sheetsync.dispatch import QUEUES
from sheetsync.emulator import EmulatorServer
from sheetsync.emulator.admin import EmulatorAdmin
from sheetsync.pipeline import Pipeline, get_pipeline, reset_pipeline
from sheetsync.settings import reset_settings

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/15"

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


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy; fail the test at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if getattr(request, "param", "sqlite") == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return sqlite_url


@pytest.fixture
def redis_url() -> Iterator[str]:
    url = os.environ.get("SHEETSYNC_TEST_REDIS_URL", DEFAULT_TEST_REDIS_URL)
    client = redis.Redis.from_url(url)
    broker = redis.Redis.from_url(broker_url_for(url))
    client.flushdb()
    broker.flushdb()
    yield url
    client.flushdb()
    broker.flushdb()
    client.close()
    broker.close()


def broker_url_for(url: str) -> str:
    base, _, db = url.rpartition("/")
    return f"{base}/{max(int(db or 0) - 1, 0)}"


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
    }
    env.update({f"SHEETSYNC_{k}": v for k, v in TEST_SETTINGS.items()})

    def configure(**overrides: Any) -> dict[str, str]:
        env.update({f"SHEETSYNC_{k.upper()}": str(v) for k, v in overrides.items()})
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        reset_settings()
        reset_keyring()
        reset_pipeline()
        from sheetsync.celery.application import reconfigure

        reconfigure()
        return dict(env)

    configure()
    yield configure
    reset_pipeline()


@pytest.fixture
def pipeline(pipeline_env: Callable[..., dict[str, str]]) -> Pipeline:
    return get_pipeline()


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


class WorkerProcesses:
    """Real ``celery -A sheetsync.celery worker`` processes with the test's environment."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, count: int = 1, *, queues: tuple[str, ...] = QUEUES, concurrency: int = 1
    ) -> list[subprocess.Popen[bytes]]:
        started = []
        for _ in range(count):
            n = len(self.procs)
            log = open(self.log_dir / f"worker{n}.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "sheetsync.celery",
                    "worker",
                    "-P",
                    "prefork",
                    "-c",
                    str(concurrency),
                    "-Q",
                    ",".join(queues),
                    "-n",
                    f"test{n}-{os.getpid()}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--loglevel=INFO",
                ],
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.procs.append(proc)
            started.append(proc)
        return started

    def kill_children(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the pool processes of one worker (the task runs in a child)."""
        out = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=False
        )
        for pid in out.stdout.split():
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)

    def stop(self) -> None:
        for proc in self.procs:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*.log")))


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
def world(pipeline: Pipeline, admin: EmulatorAdmin) -> World:
    return World(pipeline, admin)


class AlertSink:
    """A Slack-compatible webhook that records what it receives."""

    def __init__(self) -> None:
        import http.server
        import json
        import threading

        received: list[dict[str, Any]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def texts(self) -> list[str]:
        return [str(body.get("text", "")) for body in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def alerts(pipeline_env: Callable[..., dict[str, str]]) -> Iterator[AlertSink]:
    sink = AlertSink()
    pipeline_env(alert_webhook_url=sink.url)
    yield sink
    sink.close()
