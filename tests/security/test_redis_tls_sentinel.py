"""``rediss+sentinel://``: TLS to the sentinels and to the primary, through a failover.

A primary, a replica and three sentinels, every one listening on a TLS port only and
asking each client for a certificate of the test's CA; replication and the sentinels'
own links are TLS too (``tls-replication yes``). Workers, beat, the web app's emit, the
CLI and Flower's Broker page run against them; the primary is killed mid-run and everything follows
the replica. No server may log a TLS error: a plain-text attempt from any process (to a
sentinel or to a Redis) fails the test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from support.cli import SCRIPT
from support.flower import running_flower
from support.paths import ROOT
from support.processes import WorkerProcesses
from support.sentinel import all_know_the_replica
from support.tls import (
    Pki,
    TlsRedis,
    client_query,
    make_ca,
    start_tls_redis,
    start_tls_sentinel,
    tls_client,
)
from support.waiting import wait_until
from support.world import World

from sheetsync import emit_answer_submitted
from sheetsync.dev.local import free_port
from sheetsync.dispatch import QUEUES
from sheetsync.services import Services, get_services

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

SERVICE = "sheetsync-tls-primary"
PASSWORD = "tls-sentinel-test-password"


@dataclass
class TlsSentinels:
    pki: Pki
    primary: TlsRedis
    replica: TlsRedis
    sentinels: list[TlsRedis]

    def url(self, db: int) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"rediss+sentinel://:{PASSWORD}@{hosts}/{SERVICE}/{db}?{client_query(self.pki)}"

    def primary_address(self) -> tuple[str, int] | None:
        for sentinel in self.sentinels:
            try:
                found = tls_client(self.pki, sentinel.port).execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE
                )
            except redis.RedisError:
                continue
            if found:
                return found[0].decode(), int(found[1])
        return None

    def servers(self) -> list[TlsRedis]:
        return [self.primary, self.replica, *self.sentinels]

    def tls_errors(self) -> dict[str, list[str]]:
        found = {server.log.name: server.tls_errors() for server in self.servers()}
        return {name: lines for name, lines in found.items() if lines}


@pytest.fixture
def tls_sentinels(tmp_path: Path) -> Iterator[TlsSentinels]:
    pki = make_ca(tmp_path / "pki")
    auth = ["--requirepass", PASSWORD, "--masterauth", PASSWORD, "--tls-replication", "yes"]
    primary_port = free_port()
    primary = start_tls_redis(pki, primary_port, tmp_path, client_certs=True, extra=auth)
    replica = start_tls_redis(
        pki,
        free_port(),
        tmp_path,
        client_certs=True,
        extra=[*auth, "--replicaof", "127.0.0.1", str(primary_port)],
    )
    sentinels = [
        start_tls_sentinel(
            pki,
            free_port(),
            tmp_path,
            service=SERVICE,
            primary_port=primary_port,
            password=PASSWORD,
        )
        for _ in range(3)
    ]
    found = TlsSentinels(pki, primary, replica, sentinels)
    try:
        replica_client = tls_client(pki, replica.port, password=PASSWORD)
        replica.wait_ready(replica_client)
        wait_until(
            lambda: replica_client.info("replication").get("master_link_status") == "up",
            timeout=20,
        )
        wait_until(lambda: found.primary_address() == ("127.0.0.1", primary_port), timeout=20)
        clients = [tls_client(pki, s.port) for s in sentinels]
        wait_until(
            lambda: all_know_the_replica(clients, SERVICE, replica.port), timeout=30, interval=0.25
        )
        yield found
    finally:
        for server in found.servers():
            server.stop()


@pytest.fixture
def pipeline(pipeline_env: Callable[..., dict[str, str]], tls_sentinels: TlsSentinels) -> Services:
    pipeline_env(
        redis_url=tls_sentinels.url(0),
        broker_url=tls_sentinels.url(1),
        flush_delay_s=0.5,
        sweep_interval_s=1,
        sweep_grace_s=1,
        reconcile_interval_s=1,
        reconcile_after_s=2,
        lease_s=5,
        google_timeout_s=2,
    )
    return get_services()


def test_tls_sentinels_carry_the_pipeline_through_a_failover(
    world: World,
    pipeline: Services,
    worker_processes: Callable[..., WorkerProcesses],
    tls_sentinels: TlsSentinels,
    tmp_path: Path,
) -> None:
    workers = worker_processes()
    workers.start(1, concurrency=2)
    with open(tmp_path / "beat.log", "wb") as out:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "sheetsync.celery", "beat",
             "--schedule", str(tmp_path / "beat-schedule"), "--loglevel=INFO"],
            cwd=ROOT,
            env={**os.environ, **workers.env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        form = world.form()
        sheet = world.sheet(form)
        before = world.answers(form, 40, prefix="before")
        after = world.answers(form, 40, prefix="after")
        for answer_id in before:
            emit_answer_submitted(answer_id)
        wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(before), timeout=60)

        status = subprocess.run(
            [str(SCRIPT), "status"],
            env={**os.environ, **workers.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in tls_sentinels.sentinels)
        assert f"rediss+sentinel://:***@{hosts}/{SERVICE}/0?" in status.stdout

        with running_flower(workers.env, tmp_path) as flower:  # its Broker page, via Sentinel
            wait_until(lambda: flower.broker_lists(QUEUES), timeout=30, interval=0.5)

        tls_sentinels.primary.stop()
        wait_until(
            lambda: tls_sentinels.primary_address() == ("127.0.0.1", tls_sentinels.replica.port),
            timeout=60,
        )
        for answer_id in after:
            emit_answer_submitted(answer_id)
        everything = sorted(before + after)
        wait_until(lambda: sorted(world.ids_in(sheet)) == everything, timeout=120, interval=0.5)
        assert len(world.ids_in(sheet)) == len(everything)  # exactly once
        wait_until(lambda: world.ledger_counts() == {"COMPLETED": len(everything)}, timeout=30)
        assert "Task sheetsync.sweep[" in workers.logs()  # sent by beat, through the broker
        assert all(p.poll() is None for p in [*workers.procs, beat]), "a worker or beat died"
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(timeout=30)
        workers.stop()
    assert tls_sentinels.tls_errors() == {}
