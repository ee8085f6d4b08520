"""The worker's prefork pool survives being registered again with a process it already
untracked (a pool process died, then the broker reconnected)."""

from __future__ import annotations

import pytest
from celery.concurrency.asynpool import AsynPool as CeleryAsynPool
from kombu.asynchronous import Hub

from sheetsync.celery.pool import AsynPool


def register_after_a_process_exited(pool_class: type[CeleryAsynPool]) -> None:
    pool = pool_class(processes=2, threads=False)
    hub = Hub()
    try:
        pool.register_with_event_loop(hub)
        dead = pool._pool[0]
        pool._untrack_child_process(dead, hub)  # what its exit event does
        pool.register_with_event_loop(hub)  # what the consumer does on reconnect
    finally:
        pool.terminate()
        hub.close()


def test_celerys_own_pool_crashes_on_an_untracked_process() -> None:
    with pytest.raises(ValueError, match="file descriptor is None"):
        register_after_a_process_exited(CeleryAsynPool)


def test_our_pool_skips_it() -> None:
    register_after_a_process_exited(AsynPool)


@pytest.mark.parametrize("pool_option", [[], ["-P", "prefork"]])
def test_workers_use_it_for_prefork(tmp_path, pool_option, engine, pii_keys) -> None:
    """A plain worker and one asked for `-P prefork` both run sheetsync's pool (the
    banner names the pool's module). (``engine`` and ``pii_keys`` give it what its
    start-up check asks for: a database at head and keys.)"""
    import os
    import subprocess
    import sys

    from support.paths import ROOT
    from support.waiting import wait_until

    from sheetsync.dev.local import free_port, start_redis_server

    server = start_redis_server(port=free_port())
    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "SHEETSYNC_REDIS_URL": server.url,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "pool-tests",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
    }
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "sheetsync.celery",
                "worker",
                "-c",
                "1",
                *pool_option,
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: b"concurrency:" in log.read_bytes(), timeout=30)
        assert b"concurrency: 1 (pool)" in log.read_bytes(), log.read_text()[-2000:]
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        server.stop()
