"""The web app's dispatcher without Celery: sheetsync's tasks sent with kombu alone.

A web app on the slim install (no ``[worker]`` extra) has kombu, Celery's own messaging
library, but not Celery. This dispatcher writes the messages Celery's ``send_task``
writes, in Celery's task message protocol version 2 (its documented wire format:
headers, properties and a ``[args, kwargs, embed]`` body), to the same exchanges and
routing keys the Celery app declares (``sheetsync.celery.config``), so any sheetsync
worker runs them. :func:`sheetsync.dispatch.get_dispatcher` uses it when Celery cannot
be imported.

What it leaves out, being optimisations or monitoring: ``revoke`` (a superseded flush
task that runs anyway finds a newer token and exits) and Celery's "task-sent" event
(Flower shows the task once a worker receives it).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.transport import redis as kombu_redis

from sheetsync import redis_urls
from sheetsync.dispatch import (
    FLUSH_TASK,
    NOTIFY_TASK,
    NOTIFY_TIME_LIMIT_MARGIN_S,
    QUEUE_SCHEDULED,
    QUEUES,
    REPLAY_TASK,
    FlushTask,
)
from sheetsync.errors import ConfigError
from sheetsync.settings import get_settings

#: The broker's socket: a web app's push waits this long at most for Redis.
SOCKET_OPTIONS = {"socket_connect_timeout": 2.0, "socket_timeout": 5.0}


def task_message(
    name: str,
    task_id: str,
    args: list[Any],
    *,
    countdown_s: float = 0.0,
    time_limits: tuple[float | None, float | None] = (None, None),
) -> tuple[list[Any], dict[str, Any]]:
    """The body and headers of one task message (Celery's protocol version 2)."""
    eta = None
    if countdown_s > 0:
        eta = (datetime.now(UTC) + timedelta(seconds=countdown_s)).isoformat()
    headers = {
        "lang": "py",
        "task": name,
        "id": task_id,
        "shadow": None,
        "eta": eta,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": list(time_limits),
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": repr(args),
        "kwargsrepr": "{}",
        "origin": f"{os.getpid()}@{socket.gethostname()}",
        "ignore_result": True,
    }
    embed = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    return [args, {}, embed], headers


class KombuDispatcher:
    """A :class:`sheetsync.dispatch.Dispatcher` that needs kombu only (see the module)."""

    def __init__(self, broker_url: str | None = None) -> None:
        settings = get_settings()
        url = broker_url or settings.celery_broker_url
        self._sentinel = redis_urls.is_sentinel(url)
        self._broker = redis_urls.kombu_broker(url)
        self._visibility_timeout_s = settings.visibility_timeout_s
        self._queues = {name: Queue(name, Exchange(name), routing_key=name) for name in QUEUES}
        self._transport_options = {
            "visibility_timeout": self._visibility_timeout_s,
            **self._broker.transport_options,
        }
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._pid = 0

    def _producer(self) -> Any:
        """A producer on this process's connection (held under ``_lock``), made on first
        use and anew in a forked child, which must not share its parent's socket."""
        if self._connection is None or self._pid != os.getpid():
            # The transport class is named, so kombu's own rediss handling (which turns
            # certificate checks off) never runs: TLS is as the URL's query says.
            transport = kombu_redis.SentinelTransport if self._sentinel else kombu_redis.Transport
            self._connection = Connection(
                self._broker.url,
                transport=transport,
                ssl=self._broker.use_ssl,
                transport_options={**SOCKET_OPTIONS, **self._transport_options},
            )
            self._pid = os.getpid()
        return self._connection.Producer()

    def _send(self, queue: str, name: str, task_id: str, args: list[Any], **options: Any) -> None:
        countdown_s = float(options.pop("countdown_s", 0.0))
        if countdown_s >= self._visibility_timeout_s:
            raise ConfigError(
                f"countdown {countdown_s:.0f}s is not below the visibility timeout "
                f"{self._visibility_timeout_s:.0f}s"
            )
        body, headers = task_message(name, task_id, args, countdown_s=countdown_s, **options)
        target = self._queues[queue]
        with self._lock:  # one socket: one message on it at a time
            self._producer().publish(
                body,
                exchange=target.exchange,
                routing_key=target.routing_key,
                declare=[target],
                serializer="json",
                headers=headers,
                correlation_id=task_id,
                delivery_mode=2,
                retry=True,
                retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
            )

    def send_flush(self, task: FlushTask) -> None:
        self._send(task.queue, FLUSH_TASK, task.token, [task.token], countdown_s=task.countdown_s)

    def revoke(self, token: str) -> None:
        """Not sent: see the module."""

    def send_replay(self, dead_letter_id: int, countdown_s: float = 0.0) -> None:
        task_id = str(uuid.uuid4())
        self._send(QUEUE_SCHEDULED, REPLAY_TASK, task_id, [dead_letter_id], countdown_s=countdown_s)

    def send_notification(self, notification: dict[str, Any]) -> None:
        timeout_s = get_settings().owner_hook_timeout_s
        limits = (
            timeout_s + 2 * NOTIFY_TIME_LIMIT_MARGIN_S,
            timeout_s + NOTIFY_TIME_LIMIT_MARGIN_S,
        )
        self._send(
            QUEUE_SCHEDULED, NOTIFY_TASK, str(uuid.uuid4()), [notification], time_limits=limits
        )

    def waiting_queues(self) -> frozenset[str] | None:
        """Not known here (a worker's question, not the web app's)."""
        return None
