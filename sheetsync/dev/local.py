"""Run a local stack: free ports, Redis (a redis-server child, or for the benchmarks the
one already answering), Celery worker process groups, and polling until something is true.

Used by ``sheetsync demo`` and the benchmarks. Every child runs in its own session
(process group): Ctrl-C in the terminal reaches only the parent, which then stops the
children in order; stopping a worker stops its pool processes with it (SIGTERM, then
SIGKILL after a timeout).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar
from urllib.parse import urlsplit

import redis

from sheetsync.errors import SheetSyncError

T = TypeVar("T")

#: How long a child gets to start (Redis answering, a worker "ready.").
DEFAULT_START_TIMEOUT_S = 20.0
#: How long a child gets to stop after SIGTERM before it is killed.
DEFAULT_STOP_TIMEOUT_S = 10.0
#: How often :func:`wait_until` asks.
DEFAULT_POLL_INTERVAL_S = 0.05
#: What to do when there is no Redis at all.
REDIS_INSTALL_HINT = (
    "install one (apt-get install redis-server, or brew install redis) "
    "or point SHEETSYNC_REDIS_URL at a running Redis"
)
#: The line a Celery worker logs once it consumes.
WORKER_READY_MARKER = b" ready."


class LocalStackError(SheetSyncError):
    """A local child process could not be started."""


class RedisNotInstalledError(LocalStackError):
    """A redis-server child is needed and ``redis-server`` is not on PATH."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float,
    *,
    interval_s: float = DEFAULT_POLL_INTERVAL_S,
) -> T | None:
    """Poll ``predicate`` until it returns something truthy (returned); None at timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval_s)


def stop_process_group(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the child's process group, then SIGKILL it if still there after ``timeout_s``.

    The child must have been started with ``start_new_session=True`` (its pid is the
    group id). Safe to call twice, and on a child that already exited.
    """
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout_s)
    # The leader may be gone while its children (pool processes) linger: kill the group.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# -- Redis ----------------------------------------------------------------------------------


def redis_answers(url: str, timeout_s: float = 1.0) -> bool:
    """Whether a Redis answers PING at ``url`` (False for a URL that is not Redis's)."""
    try:
        client = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
    except ValueError:
        return False
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


@dataclass
class LocalRedis:
    """A Redis to use: ``process`` is the redis-server child we started, or None when
    another Redis already answered at ``url`` (then :meth:`stop` leaves it alone)."""

    url: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def started_here(self) -> bool:
        return self.process is not None

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        if self.process is not None:
            stop_process_group(self.process, timeout_s)


def start_redis_server(
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    db: int = 0,
    executable: str = "redis-server",
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
) -> LocalRedis:
    """Start a throwaway ``redis-server`` child (no persistence) and wait until it answers.

    Raises :class:`RedisNotInstalledError` when ``executable`` is not on PATH.
    """
    path = shutil.which(executable)
    if path is None:
        raise RedisNotInstalledError(f"{executable} is not on PATH")
    port = port or free_port(host)
    command = [path, "--bind", host, "--port", str(port), "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [*command, "--daemonize", "no", "--loglevel", "warning"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    server = LocalRedis(f"redis://{host}:{port}/{db}", process)
    if not wait_until(lambda: process.poll() is not None or redis_answers(server.url), timeout_s):
        server.stop()
        raise LocalStackError(f"redis-server on port {port} did not answer within {timeout_s} s")
    if process.poll() is not None:
        raise LocalStackError(f"redis-server on port {port} exited with {process.returncode}")
    return server


def ensure_redis(url: str, *, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> LocalRedis:
    """The Redis at ``url`` if it answers, else a new redis-server child on a free port
    (same database number)."""
    if redis_answers(url):
        return LocalRedis(url)
    parts = urlsplit(url)
    db = int(parts.path.strip("/")) if parts.path.strip("/").isdigit() else 0
    try:
        return start_redis_server(db=db, timeout_s=timeout_s)
    except RedisNotInstalledError:
        where = f"{parts.hostname}:{parts.port or 6379}"
        raise RedisNotInstalledError(
            f"no Redis answers at {where} and redis-server is not on PATH"
        ) from None


# -- Celery workers -------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """A ``celery worker`` process group whose log goes to ``log_path``."""

    process: subprocess.Popen[bytes]
    log_path: Path
    name: str

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self) -> bool:
        """Whether the worker logged that it consumes (and still runs)."""
        if not self.alive:
            return False
        try:
            return WORKER_READY_MARKER in self.log_path.read_bytes()
        except OSError:
            return False

    def wait_ready(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> bool:
        """Wait until it is ready; False when it exited or did not get there in time."""
        return bool(wait_until(lambda: self.ready() or not self.alive, timeout_s)) and self.alive

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Warm shutdown (SIGTERM to the group), SIGKILL after ``timeout_s``."""
        stop_process_group(self.process, timeout_s)


def start_celery_worker(
    *,
    env: Mapping[str, str],
    queues: Sequence[str],
    log_path: Path,
    concurrency: int = 1,
    app: str = "sheetsync.celery",
    name: str | None = None,
    pool: str = "prefork",
    loglevel: str = "INFO",
    extra_args: Sequence[str] = (),
    cwd: Path | None = None,
) -> WorkerProcess:
    """Start ``python -m celery -A <app> worker`` in its own process group.

    ``env`` is added to this process's environment. The log (stdout and stderr) goes to
    ``log_path``, which is created or truncated. Returns at once: call
    :meth:`WorkerProcess.wait_ready`.
    """
    name = name or f"worker-{os.getpid()}-{time.monotonic_ns() % 1_000_000}@%h"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app,
        "worker",
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-Q",
        ",".join(queues),
        "-n",
        name,
        "--without-gossip",
        "--without-mingle",
        f"--loglevel={loglevel}",
        *extra_args,
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log: IO[bytes]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return WorkerProcess(process, log_path, name)
