"""Which worker and beat processes are alive, and which queues they consume.

Every Celery worker and beat process of sheetsync writes a heartbeat into the buffer
Redis every few seconds (:class:`Beater`, started by :mod:`sheetsync.celery.health`).
``sheetsync status`` reads them to name a queue that no live worker consumes, and
``sheetsync health`` answers a container's healthcheck from them. Times are the Redis
server's, so hosts with skewed clocks agree.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import redis

from sheetsync import redis_urls
from sheetsync.lua.contract import Arg, Key, Script, Scripts
from sheetsync.redis_keys import HEARTBEATS, heartbeat_key
from sheetsync.settings import get_settings

log = logging.getLogger(__name__)

#: How often a process writes its heartbeat.
DEFAULT_HEARTBEAT_INTERVAL_S = 5.0
#: A heartbeat older than this means the process is gone (or stuck).
DEFAULT_HEARTBEAT_TTL_S = 30.0


@dataclass(frozen=True, slots=True)
class Heartbeat:
    name: str
    role: str
    queues: tuple[str, ...]
    pid: int
    age_s: float


@dataclass(slots=True, kw_only=True)
class RecordHeartbeat(Script[int]):
    """A process is alive (``lua/heartbeat.lua``); the Redis time (ms) recorded."""

    SCRIPT: ClassVar[str] = "heartbeat"
    index: Key
    details: Key
    name: Arg[str]
    #: worker | beat
    role: Arg[str]
    #: The queues it consumes, comma-separated.
    queues: Arg[str]
    pid: Arg[int]
    ttl_s: Arg[float]

    def decode(self, reply: Any) -> int:
        return int(reply)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def record(
    client: redis.Redis,
    name: str,
    *,
    role: str,
    queues: tuple[str, ...] = (),
    pid: int,
    ttl_s: float = DEFAULT_HEARTBEAT_TTL_S,
) -> None:
    """Say that process ``name`` is alive now."""
    Scripts(client).run(
        RecordHeartbeat(
            index=HEARTBEATS,
            details=heartbeat_key(name),
            name=name,
            role=role,
            queues=",".join(queues),
            pid=pid,
            ttl_s=ttl_s,
        )
    )


def live(client: redis.Redis, *, max_age_s: float = DEFAULT_HEARTBEAT_TTL_S) -> list[Heartbeat]:
    """The processes whose last heartbeat is younger than ``max_age_s``, newest first."""
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    entries: list[tuple[Any, float]] = list(
        client.zrevrangebyscore(HEARTBEATS, "+inf", now_ms - max_age_s * 1000, withscores=True)  # type: ignore[arg-type]
    )
    if not entries:
        return []
    pipe = client.pipeline(transaction=False)
    for name, _ in entries:
        pipe.hmget(heartbeat_key(_text(name)), "role", "queues", "pid")
    found: list[Heartbeat] = []
    for (name, seen), (role, queues, pid) in zip(entries, pipe.execute(), strict=True):
        if role is None:
            continue  # its details expired between the two reads
        found.append(
            Heartbeat(
                name=_text(name),
                role=_text(role),
                queues=tuple(q for q in _text(queues).split(",") if q),
                pid=int(pid_text) if (pid_text := _text(pid)).isdigit() else 0,
                age_s=round(max(0.0, now_ms - float(seen)) / 1000, 3),
            )
        )
    return found


def consumed_queues(beats: list[Heartbeat]) -> set[str]:
    """Every queue at least one live worker consumes."""
    return {queue for beat in beats if beat.role == "worker" for queue in beat.queues}


class Beater:
    """Writes one process's heartbeat every interval while it is alive: always for beat,
    for a worker while its consumer loop beats too (``follows_loop``). The Redis write
    happens on a daemon thread, never in that loop: a slow Redis must not stall it."""

    def __init__(self) -> None:
        self.name = ""
        self.role = ""
        self.queues: tuple[str, ...] = ()
        self.last_loop_beat = time.monotonic()
        self.follows_loop = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, name: str, role: str, queues: tuple[str, ...], *, follows_loop: bool) -> None:
        self.name, self.role, self.queues = name, role, queues
        self.follows_loop = follows_loop
        self.last_loop_beat = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sheetsync-heartbeat")
            self._thread.daemon = True
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _alive(self) -> bool:
        if not self.follows_loop:
            return True
        return time.monotonic() - self.last_loop_beat < DEFAULT_HEARTBEAT_TTL_S / 2

    def _run(self) -> None:
        client = redis_urls.client(
            get_settings().redis_url, socket_timeout=2, socket_connect_timeout=2
        )
        while not self._stop.is_set():
            if self._alive():
                try:
                    record(client, self.name, role=self.role, queues=self.queues, pid=os.getpid())
                except redis.RedisError as exc:
                    log.debug("heartbeat not written: %s", type(exc).__name__)
            self._stop.wait(DEFAULT_HEARTBEAT_INTERVAL_S)
