"""Redis HA: buffers, limiter and broker behind Redis Sentinel, and a failover mid-run.

A primary, a replica and three sentinels, all local ``redis-server`` processes. The
primary is SIGKILLed while answers flow; the replica (asynchronous: it may have lost the
last writes) becomes the primary. Workers, beat and the web app's emit follow it, and
every answer lands exactly once: what the replica lost, the reconciler pushes again, and
the durable intents keep it from being appended twice.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from support.paths import ROOT
from support.processes import stop_groups
from support.sentinel import all_know_the_replica
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.dev.local import free_port

SERVICE = "sheetsync-primary"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


@dataclass
class SentinelSet:
    primary_port: int
    replica_port: int
    sentinel_ports: list[int]
    processes: dict[str, subprocess.Popen[bytes]]

    def url(self, db: int) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/{db}"

    def primary_address(self) -> tuple[str, int] | None:
        for port in self.sentinel_ports:
            try:
                found = redis.Redis(port=port, socket_timeout=1).execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE
                )
            except redis.RedisError:
                continue
            if found:
                return found[0].decode(), int(found[1])
        return None

    def all_know_the_replica(self) -> bool:
        clients = [redis.Redis(port=port, socket_timeout=1) for port in self.sentinel_ports]
        return all_know_the_replica(clients, SERVICE, self.replica_port)

    def kill_primary(self) -> None:
        self.processes["primary"].send_signal(signal.SIGKILL)
        self.processes["primary"].wait(timeout=10)


def _redis_server(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            ["redis-server", *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    primary, replica = free_port(), free_port()
    # --dir: the replica's full sync writes an RDB file; it belongs in the test's directory,
    # not in whatever directory pytest runs from.
    common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    processes = {
        "primary": _redis_server(["--port", str(primary), *common], tmp_path / "primary.log"),
        "replica": _redis_server(
            ["--port", str(replica), *common, "--replicaof", "127.0.0.1", str(primary)],
            tmp_path / "replica.log",
        ),
    }
    ports = [free_port() for _ in range(3)]
    for n, port in enumerate(ports):
        config = tmp_path / f"sentinel{n}.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 4000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        processes[f"sentinel{n}"] = _redis_server(
            [str(config), "--sentinel"], tmp_path / f"sentinel{n}.log"
        )
    found = SentinelSet(primary, replica, ports, processes)
    try:
        wait_until(lambda: found.primary_address() == ("127.0.0.1", primary), timeout=20)
        wait_until(
            lambda: redis.Redis(port=replica).info("replication").get("master_link_status") == "up",
            timeout=20,
        )
        wait_until(found.all_know_the_replica, timeout=30, interval=0.25)
        yield found
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def test_a_failover_mid_run_loses_and_duplicates_nothing(world, pipeline_env, sentinels, tmp_path):
    env = pipeline_env(
        redis_url=sentinels.url(0),
        broker_url=sentinels.url(1),
        flush_delay_s=0.5,
        flush_threshold=50,
        sweep_interval_s=1,
        sweep_grace_s=1,
        reconcile_interval_s=1,
        reconcile_after_s=2,
        lease_s=5,
        google_timeout_s=2,
    )
    logs: list[Path] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = tmp_path / f"celery{len(logs)}.log"
        logs.append(log)
        with open(log, "wb") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "sheetsync.celery", *args],
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    processes = [
        start("worker", "-c", "2", "-n", f"s1-{os.getpid()}@%h", "--loglevel=INFO"),
        start("worker", "-c", "1", "-n", f"s2-{os.getpid()}@%h", "--loglevel=INFO"),
        start("beat", "--schedule", str(tmp_path / "beat-schedule"), "--loglevel=INFO"),
    ]
    try:
        form = world.form()
        sheets = [world.sheet(form, f"T{n}") for n in range(2)]
        before = world.answers(form, 150, prefix="before")
        during = world.answers(form, 60, prefix="during")
        after = world.answers(form, 60, prefix="after")
        for answer_id in before:
            emit_answer_submitted(answer_id)
        wait_until(lambda: all(world.ids_in(s) for s in sheets), timeout=60)

        sentinels.kill_primary()  # mid-run: some of `before` is still buffered
        for answer_id in during:  # the web app keeps taking answers through the failover
            emit_answer_submitted(answer_id)
            time.sleep(0.05)
        wait_until(
            lambda: sentinels.primary_address() == ("127.0.0.1", sentinels.replica_port),
            timeout=60,
        )
        for answer_id in after:
            emit_answer_submitted(answer_id)

        everything = before + during + after
        for sheet in sheets:
            wait_until(
                lambda sheet=sheet: sorted(world.ids_in(sheet)) == sorted(everything),
                timeout=120,
                interval=0.5,
            )
        assert all(p.poll() is None for p in processes), "a worker or beat process died"
        for sheet in sheets:
            assert len(world.ids_in(sheet)) == len(everything)  # exactly once
        assert world.ledger_counts() == {"COMPLETED": 2 * len(everything)}
    finally:
        stop_groups(processes)
