"""The Redis the tests use: a ``redis-server`` of this test process's own.

Every pytest process (the one process of a serial run, or each pytest-xdist worker)
starts its own throwaway ``redis-server`` on a free port the first time a test asks for
Redis, and stops it when the process exits. Parallel workers therefore never share a
database, and no test touches a Redis someone else runs (the demo's test checks, on
purpose, that the one on 127.0.0.1:6379 is left alone).

The databases of that server, each flushed by the fixture that hands it out:
    15  the pipeline's buffers (``redis_url``); 14, the one below, is its broker;
    13  the CLI tests' (``cli_env``);
    12  the demo tests' (``demo_redis_url``).
"""

from __future__ import annotations

import atexit
import functools

from sheetsync.dev.local import LocalRedis, LocalStackError, start_redis_server

PIPELINE_DB = 15
CLI_DB = 13
DEMO_DB = 12
#: A free port may be taken by another process between the check and redis-server's bind.
_START_TRIES = 5


@functools.cache
def _server() -> LocalRedis:
    for attempt in range(_START_TRIES):
        try:
            server = start_redis_server()
        except LocalStackError:
            if attempt == _START_TRIES - 1:
                raise
            continue
        atexit.register(server.stop)
        return server
    raise AssertionError("unreachable")


def redis_db_url(db: int) -> str:
    """``redis://127.0.0.1:<port>/<db>`` on this process's own redis-server."""
    base, _, _ = _server().url.rpartition("/")
    return f"{base}/{db}"


def pipeline_redis_url() -> str:
    """The buffers' database of the pipeline tests; the broker uses the one below it."""
    return redis_db_url(PIPELINE_DB)


def broker_url_for(url: str) -> str:
    """The broker database next to a buffer database: ``.../15`` gives ``.../14``."""
    base, _, db = url.rpartition("/")
    return f"{base}/{max(int(db or 0) - 1, 0)}"
