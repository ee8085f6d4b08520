"""Heartbeats of this worker or beat process, written into the buffer Redis.

A worker's heartbeat follows Celery's own (``heartbeat_sent``, every 2 s from the
consumer's event loop), so a worker whose loop is stuck stops looking alive. The Redis
write happens on a daemon thread, never in that loop: a slow Redis must not stall the
consumer. Beat has no such signal; its thread beats while the process lives.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import redis
from celery.signals import beat_init, heartbeat_sent, worker_ready, worker_shutdown

from sheetsync import redis_urls
from sheetsync.ops import heartbeats
from sheetsync.settings import get_settings

log = logging.getLogger(__name__)


class _Beater:
    """Writes one process's heartbeat every interval while ``alive()`` says so."""

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
        return time.monotonic() - self.last_loop_beat < heartbeats.DEFAULT_HEARTBEAT_TTL_S / 2

    def _run(self) -> None:
        client = redis_urls.client(
            get_settings().redis_url, socket_timeout=2, socket_connect_timeout=2
        )
        while not self._stop.is_set():
            if self._alive():
                try:
                    heartbeats.record(
                        client, self.name, role=self.role, queues=self.queues, pid=os.getpid()
                    )
                except redis.RedisError as exc:
                    log.debug("heartbeat not written: %s", type(exc).__name__)
            self._stop.wait(heartbeats.DEFAULT_HEARTBEAT_INTERVAL_S)


_beater = _Beater()


@worker_ready.connect
def _worker_ready(sender: Any = None, **_: Any) -> None:
    queues = tuple(sorted(queue.name for queue in sender.task_consumer.queues))
    _beater.start(str(sender.hostname), "worker", queues, follows_loop=True)


@heartbeat_sent.connect
def _loop_alive(**_: Any) -> None:
    _beater.last_loop_beat = time.monotonic()


@worker_shutdown.connect
def _worker_shutdown(**_: Any) -> None:
    _beater.stop()


@beat_init.connect
def _beat_init(**_: Any) -> None:
    import socket

    _beater.start(f"beat@{socket.gethostname()}", "beat", (), follows_loop=False)
