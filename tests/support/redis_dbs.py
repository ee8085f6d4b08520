"""The Redis the tests use: a ``redis-server`` of this test process's own.

Every pytest process (the one process of a serial run, or each pytest-xdist worker)
starts its own throwaway ``redis-server`` on a free port the first time a test asks for
Redis, and stops it when the process exits. Parallel workers therefore never share a
database, and no test touches a Redis someone else runs (the demo's test checks, on
purpose, that the one on 127.0.0.1:6379 is left alone).

The server never outlives this process: ``atexit`` stops it when the process ends
normally, and the kernel kills it when the process is killed (SIGKILL, SIGTERM, a crashed
xdist worker: ``support.lifetime``), when ``atexit`` never runs.

The databases of that server, each flushed by the fixture that hands it out:
    15  the pipeline's buffers (``redis_url``); 14, the one below, is its broker;
    13  the CLI tests' (``cli_env``);
    12  the demo tests' (``demo_redis_url``).

``uses`` and ``started`` count what this process asked for, for the unit tier's guard
(``support.tiers``): a test in that tier must not touch Redis.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess

from sheetsync.dev.local import (
    LocalRedis,
    LocalStackError,
    RedisNotInstalledError,
    free_port,
    redis_answers,
    wait_until,
)
from support.lifetime import dies_with_this_process

PIPELINE_DB = 15
CLI_DB = 13
DEMO_DB = 12
HOST = "127.0.0.1"
#: A free port may be taken by another process between the check and redis-server's bind.
_START_TRIES = 5
_START_TIMEOUT_S = 20.0

#: The pids of the redis-servers this process started (one, unless a start failed), and
#: one entry per Redis URL it handed out.
started: list[int] = []
uses: list[int] = []


def _start() -> LocalRedis:
    """A ``redis-server`` child with no persistence, killed with this process."""
    path = shutil.which("redis-server")
    if path is None:
        raise RedisNotInstalledError("redis-server is not on PATH")
    port = free_port(HOST)
    command = [path, "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        dies_with_this_process([*command, "--daemonize", "no", "--loglevel", "warning"]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started.append(process.pid)
    server = LocalRedis(f"redis://{HOST}:{port}/0", process)
    if not wait_until(
        lambda: process.poll() is not None or redis_answers(server.url), _START_TIMEOUT_S
    ):
        server.stop()
        raise LocalStackError(f"redis-server on port {port} did not answer in {_START_TIMEOUT_S} s")
    if process.poll() is not None:
        raise LocalStackError(f"redis-server on port {port} exited with {process.returncode}")
    return server


@functools.cache
def _server() -> LocalRedis:
    for attempt in range(_START_TRIES):
        try:
            server = _start()
        except RedisNotInstalledError:
            raise
        except LocalStackError:
            if attempt == _START_TRIES - 1:
                raise
            continue
        owner = os.getpid()
        # A child forked from this process (a test of fork safety) inherits the handler:
        # only the process that started the server stops it.
        atexit.register(lambda: os.getpid() == owner and server.stop())
        return server
    raise AssertionError("unreachable")


def redis_db_url(db: int) -> str:
    """``redis://127.0.0.1:<port>/<db>`` on this process's own redis-server."""
    uses.append(db)
    base, _, _ = _server().url.rpartition("/")
    return f"{base}/{db}"


def server_pid() -> int | None:
    """The pid of this process's redis-server, once started."""
    process = _server().process
    return process.pid if process is not None else None


def pipeline_redis_url() -> str:
    """The buffers' database of the pipeline tests; the broker uses the one below it."""
    return redis_db_url(PIPELINE_DB)


def broker_url_for(url: str) -> str:
    """The broker database next to a buffer database: ``.../15`` gives ``.../14``."""
    base, _, db = url.rpartition("/")
    return f"{base}/{max(int(db or 0) - 1, 0)}"
