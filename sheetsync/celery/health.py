"""Celery's signals that start and feed this process's heartbeat
(:class:`sheetsync.ops.heartbeats.Beater`).

A worker's heartbeat follows Celery's own (``heartbeat_sent``, every 2 s from the
consumer's event loop), so a worker whose loop is stuck stops looking alive. Beat has
no such signal; its thread beats while the process lives.
"""

from __future__ import annotations

import time
from typing import Any

from celery.signals import beat_init, heartbeat_sent, worker_ready, worker_shutdown

from sheetsync.ops import heartbeats

_beater = heartbeats.Beater()


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
