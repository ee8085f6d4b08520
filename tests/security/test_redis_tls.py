"""TLS to Redis, everywhere: the whole stack against a Redis that speaks TLS only.

The Redis here has no plain port (``--port 0``), asks for a password, and refuses a
client without a certificate of the test's throwaway CA (``--tls-auth-clients yes``).
A process that spoke plain text could not work at all, and its bytes on the TLS port
would leave ``SSL routines::wrong version number`` in the server's log: each test
also asserts that log has no TLS error, so a plain-text attempt from any process (even
one retried until TLS won) fails the test.

Issue 22: with ``rediss://`` the buffers spoke TLS and the Celery broker did not (sheetsync
names its own kombu transport, so kombu's ``rediss`` handling never ran), and
``rediss+sentinel://`` became a plain ``sentinel://``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from support.cli import SCRIPT
from support.console import running_console
from support.flower import running_flower
from support.paths import ROOT
from support.processes import WorkerProcesses
from support.scrape import metrics_endpoint
from support.tls import Pki, TlsRedis, client_query, make_ca, start_tls_redis, tls_client
from support.waiting import wait_until
from support.world import World

from sheetsync import emit_answer_submitted
from sheetsync.dev.local import free_port
from sheetsync.dispatch import QUEUES
from sheetsync.metrics.names import ROWS_APPENDED
from sheetsync.services import Services, get_services

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

PASSWORD = "tls-only-redis-password"
CONSOLE_TOKEN = "tls-test-console-token-0123456789abcdef"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_ca(tmp_path / "pki")


@dataclass(frozen=True)
class TlsSetup:
    server: TlsRedis
    #: The URL query of sheetsync's URLs: the TLS options this setup needs.
    query: str


@pytest.fixture(params=["trusted-ca", "private-ca-and-client-cert"])
def tls_setup(
    request: pytest.FixtureRequest, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TlsSetup]:
    """The two ways a TLS Redis is met: a managed Redis whose certificate a CA the hosts
    already trust signed (here OpenSSL's ``SSL_CERT_FILE`` makes the test CA one of them),
    reached with a bare ``rediss://`` URL; and a private CA that also asks every client for
    a certificate, which the URL's query names."""
    client_certs = request.param == "private-ca-and-client-cert"
    if not client_certs:
        monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca_cert))  # this process and children
    server = start_tls_redis(
        pki, free_port(), tmp_path, client_certs=client_certs, extra=["--requirepass", PASSWORD]
    )
    try:
        server.wait_ready(tls_client(pki, server.port, password=PASSWORD))
        yield TlsSetup(server, client_query(pki) if client_certs else "")
    finally:
        server.stop()


@pytest.fixture
def tls_redis(pki: Pki, tmp_path: Path) -> Iterator[TlsRedis]:
    """A TLS-only Redis that wants a client certificate of the test CA."""
    server = start_tls_redis(
        pki, free_port(), tmp_path, client_certs=True, extra=["--requirepass", PASSWORD]
    )
    try:
        server.wait_ready(tls_client(pki, server.port, password=PASSWORD))
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls_env(pipeline_env: Callable[..., dict[str, str]], tls_setup: TlsSetup) -> dict[str, str]:
    """The test's environment with buffers and broker on the TLS-only Redis."""
    return pipeline_env(
        redis_url=tls_setup.server.url(0, tls_setup.query, PASSWORD),
        broker_url=tls_setup.server.url(1, tls_setup.query, PASSWORD),
        sweep_interval_s=1,
    )


@pytest.fixture
def pipeline(tls_env: dict[str, str]) -> Services:
    """The pipeline of this process (the web app's emit), on the TLS-only Redis."""
    return get_services()


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(SCRIPT), "status", "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_whole_stack_runs_on_a_tls_only_redis(
    world: World,
    tls_env: dict[str, str],
    worker_processes: Callable[..., WorkerProcesses],
    tls_setup: TlsSetup,
    tmp_path: Path,
) -> None:
    workers = worker_processes()
    workers.start(1, concurrency=2)
    beat = _start(
        [sys.executable, "-m", "celery", "-A", "sheetsync.celery", "beat", "--loglevel=INFO",
         "--schedule", str(tmp_path / "beat-schedule")],
        tls_env,
        tmp_path / "beat.log",
    )  # fmt: skip
    try:
        with running_flower(tls_env, tmp_path) as flower:
            # The web app's emit (this process), the workers' flushes: buffers, limiter, broker.
            form = world.form()
            sheet = world.sheet(form)
            ids = world.answers(form, 30)
            for answer_id in ids:
                emit_answer_submitted(answer_id)
            wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(ids), timeout=60)
            # The ledger is marked after the append lands: wait for it, don't race it.
            wait_until(lambda: world.ledger_counts() == {"COMPLETED": len(ids)}, timeout=30)

            # Beat sends its periodic tasks through the broker, and a worker runs them.
            wait_until(lambda: "Task sheetsync.sweep[" in workers.logs(), timeout=30)

            # The CLI reads the heartbeats both wrote to Redis, and the limiter's window.
            def both_alive() -> dict[str, Any] | None:
                report = _status(tls_env)
                roles = {process["role"] for process in report["workers"]["live"]}
                return report if roles == {"worker", "beat"} else None

            report = wait_until(both_alive, timeout=30, interval=0.5)
            assert report["redis_url"].startswith("rediss://:***@127.0.0.1:")
            assert report["limiter"]["project"]["used"] >= 1

            # The console: a page read from Redis, no "could not read" banner.
            with running_console(tls_env, token=CONSOLE_TOKEN) as console:
                page = console.request("/")
                assert page.status == 200
                assert "Could not read everything" not in page.body
                alive = re.search(r"Workers alive</div>\s*<div class=\"value\">(\d+)<", page.body)
                assert alive is not None and int(alive.group(1)) == 2, page.body

            # The exporter: Redis is up, and the flushes it counted are there.
            with metrics_endpoint({**os.environ, **tls_env}, tmp_path) as scraper:
                samples = scraper.samples()
                assert samples[("sheetsync_source_up", frozenset({("source", "redis")}))] == 1
                appended = f"{ROWS_APPENDED}_total"
                assert sum(v for (name, _), v in samples.items() if name == appended) >= len(ids)

            # Flower: its events (the workers it lists) and its Broker page (from Redis).
            wait_until(lambda: flower.broker_lists(QUEUES), timeout=30, interval=0.5)
            assert "Unable to get queues" not in flower.log.read_text()
    finally:
        _stop(beat)
        workers.stop()
    assert tls_setup.server.tls_errors() == []
    assert beat.returncode == 0 and "error" not in (tmp_path / "beat.log").read_text().lower()


def test_a_plain_text_client_fails_and_leaves_its_mark_in_the_log(
    tls_redis: TlsRedis, pki: Pki
) -> None:
    """The detector the other tests rely on: plain text to the TLS port is refused, and
    the server logs it."""
    plain = redis.Redis(host="127.0.0.1", port=tls_redis.port, password=PASSWORD)
    with pytest.raises(redis.ConnectionError):
        plain.ping()
    assert tls_client(pki, tls_redis.port, password=PASSWORD).ping()
    assert any("wrong version number" in line for line in tls_redis.tls_errors())
