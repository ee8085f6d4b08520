"""bench_capacity.py's parts on Redis alone: emits a second from client processes
against one redis-server (1.), and Redis memory per waiting buffer and per id (2.). The
module docstring of bench_capacity.py says how each is measured."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

import redis

from sheetsync import crypto
from sheetsync.redis_keys import BufferKey

QUEUE = "sheetsync_default"
#: Buffers each emit client pushes to, in turn.
CLIENT_BUFFERS = 50


def configure_redis_only(redis_url: str) -> None:
    """Settings for parts 1 and 2: nothing falls due while the bench pushes."""
    os.environ.update(
        {
            "SHEETSYNC_REDIS_URL": redis_url,
            "SHEETSYNC_BROKER_URL": redis_url.rpartition("/")[0] + "/1",
            "SHEETSYNC_DATABASE_URL": "sqlite://",
            "SHEETSYNC_PII_KEYS": os.environ.setdefault("BENCH_PII_KEY", crypto.generate_key()),
            "SHEETSYNC_FLUSH_DELAY_S": "1800",
            "SHEETSYNC_FLUSH_THRESHOLD": str(10**9),
        }
    )
    from sheetsync.celery.application import reconfigure
    from sheetsync.services import reset_services
    from sheetsync.settings import reset_settings

    reset_settings()
    reset_services()
    reconfigure()


def redis_cpu_s(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def machine_busy_s() -> float:
    """CPU seconds every core spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


# -- 1. emits a second ----------------------------------------------------------------------


def emit_client(index: int, commands: Any, results: Any) -> None:
    """A spawned client: warms its buffers, then runs each (kind, start, seconds) it is
    given, reporting (calls, its CPU seconds)."""
    from sheetsync.buffers.push import push
    from sheetsync.services import get_services

    store = get_services().store
    client = redis.Redis.from_url(os.environ["SHEETSYNC_REDIS_URL"])
    targets = [
        [(BufferKey(f"owner{index}", f"form{index}x{n}", f"sheet{index}x{n}", 0), QUEUE)]
        for n in range(CLIENT_BUFFERS)
    ]
    for target in targets:  # the jobs exist: every later push joins one, as in steady state
        push(store, target, ["warm"])
    results.put(("ready", 0, 0.0))
    calls = 0
    for kind, start, seconds in iter(commands.get, None):
        while time.time() < start:
            time.sleep(0.001)
        cpu, end, done = time.process_time(), start + seconds, 0
        while time.time() < end:
            for _ in range(20):
                calls += 1
                if kind == "emit":
                    push(store, targets[calls % CLIENT_BUFFERS], [f"c{index}a{calls}"])
                else:
                    client.rpush(f"bench:rpush:{index}", f"c{index}a{calls}")
            done += 20
        results.put((kind, done, time.process_time() - cpu))


def bench_emits(redis_url: str, counts: list[int], seconds: float) -> tuple[float, float]:
    """The best emits/s measured, and redis-server's CPU seconds per emit."""
    configure_redis_only(redis_url)
    client = redis.Redis.from_url(redis_url)
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    queues: list[Any] = [context.Queue() for _ in range(max(counts))]
    clients: list[SpawnProcess] = [
        context.Process(target=emit_client, args=(n, queues[n], results), daemon=True)
        for n in range(max(counts))
    ]
    for process in clients:
        process.start()
    for _ in clients:
        results.get(timeout=120)
    print(f"1. emits a second, one redis-server, {seconds:g} s per step:")
    best, busiest = 0.0, 0.0
    totals = {kind: [0, 0.0, 0.0] for kind in ("rpush", "emit")}  # calls, Redis, clients CPU
    client.config_resetstat()
    try:
        for count in counts:
            for kind in ("rpush", "emit"):
                start = time.time() + 0.3
                for queue in queues[:count]:
                    queue.put((kind, start, seconds))
                time.sleep(max(0.0, start - time.time()))
                before, machine = redis_cpu_s(client), machine_busy_s()
                time.sleep(seconds)
                redis_s = redis_cpu_s(client) - before
                machine = machine_busy_s() - machine
                got = [results.get(timeout=60) for _ in range(count)]
                calls, clients_s = sum(done for _, done, _ in got), sum(cpu for _, _, cpu in got)
                for at, value in enumerate((calls, redis_s, clients_s)):
                    totals[kind][at] += value
                if kind == "emit":
                    best, busiest = max(best, calls / seconds), max(busiest, redis_s / seconds)
                name = "emit (enqueue script)" if kind == "emit" else "baseline, RPUSH"
                print(
                    f"  {count} client{'s' if count > 1 else ' '}  {name:22} "
                    f"{calls / seconds:9,.0f}/s  redis-server {redis_s / seconds:4.0%} of a core, "
                    f"clients {clients_s / seconds:4.0%}, the machine {machine / seconds:4.0%} of "
                    f"{os.cpu_count()} cores"
                )
    finally:
        for queue in queues:
            queue.put(None)
        for process in clients:
            process.join(10)
    stats = client.info("commandstats")
    per_call = {
        kind: (redis_s / calls, clients_s / calls)
        for kind, (calls, redis_s, clients_s) in totals.items()
    }
    for kind, command in (("emit", "evalsha"), ("rpush", "rpush")):
        redis_us, clients_us = (1e6 * value for value in per_call[kind])
        inside = stats[f"cmdstat_{command}"]["usec_per_call"]
        print(
            f"  per {kind}: redis-server {redis_us:.1f} µs CPU ({inside:.1f} µs inside "
            f"{command.upper()}, INFO commandstats), the client {clients_us:.0f} µs CPU"
        )
    ceiling = 1 / per_call["emit"][0]
    limit = (
        "redis-server was the limit"
        if busiest >= 0.9
        else f"the clients and the machine were the limit, not Redis ({busiest:.0%} of a core)"
    )
    print(
        f"  best {best:,.0f} emits/s: {limit}; at a whole core, {ceiling:,.0f} emits/s "
        f"(1 / redis-server's CPU per emit)"
    )
    return best, per_call["emit"][0]


# -- 2. memory ------------------------------------------------------------------------------


def bench_memory(redis_url: str, buffers: int, ids: int, id_chars: int) -> None:
    from sheetsync.buffers.push import send_tasks
    from sheetsync.services import get_services

    configure_redis_only(redis_url)
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    store = get_services().store

    def used() -> int:
        return int(client.info("memory")["used_memory"])

    def answer_id() -> str:
        return (uuid.uuid4().hex * 4)[:id_chars]

    def enqueue_each(pairs: list[tuple[BufferKey, str]]) -> list[Any]:
        """One enqueue call per (buffer, id), as one emit each; pipelined by the thousand."""
        tasks = []
        for at in range(0, len(pairs), 1000):
            calls = [store._enqueue([_target(key)], [i]) for key, i in pairs[at : at + 1000]]
            tasks += [task for found in store.scripts.run_many(calls) for task in found]
        return tasks

    keys = [
        BufferKey(f"owner{n % 97}", f"form{n}", f"sheet{uuid.uuid4().hex}", 0)
        for n in range(buffers)
    ]
    empty = used()
    tasks = enqueue_each([(key, answer_id()) for key in keys])
    with_buffers = used()
    send_tasks(store, tasks)
    with_tasks = used()
    enqueue_each([(keys[n % buffers], answer_id()) for n in range(ids)])
    with_ids = used()
    per_buffer = (with_buffers - empty) / buffers
    per_task = (with_tasks - with_buffers) / buffers
    per_id = (with_ids - with_tasks) / ids
    print(
        f"2. Redis memory (used_memory), ids of {id_chars} characters:\n"
        f"  {buffers:,} buffers of one id each, through the enqueue script: "
        f"+{(with_buffers - empty) / 2**20:.1f} MiB = {per_buffer:,.0f} bytes per buffer\n"
        f"  their {len(tasks):,} flush tasks in the broker (same server): "
        f"+{(with_tasks - with_buffers) / 2**20:.1f} MiB = {per_task:,.0f} bytes per buffer\n"
        f"  {ids:,} more ids, one enqueue each, {ids / buffers:g} per buffer: "
        f"+{(with_ids - with_tasks) / 2**20:.1f} MiB = {per_id:,.0f} bytes per id "
        f"(baseline: the id itself, {id_chars} bytes)"
    )
    client.flushall()


def _target(key: BufferKey) -> Any:
    from sheetsync.buffers.scripts import EnqueueTarget

    return EnqueueTarget.of(key, QUEUE)
