"""Sends the library's tasks through the Celery app, by task name.

The library finds this class by name (:data:`sheetsync.dispatch.DEFAULT_DISPATCHER`);
it imports only the app, never the task bodies, so there is no import cycle between
the library and the Celery app.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery

from sheetsync.celery.application import app as sheetsync_app
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

log = logging.getLogger(__name__)


def checked_countdown(countdown_s: float) -> float:
    """A countdown past the broker's visibility timeout would run twice: refuse it."""
    limit = get_settings().visibility_timeout_s
    if countdown_s >= limit:
        raise ConfigError(
            f"countdown {countdown_s:.0f}s is not below the visibility timeout {limit:.0f}s"
        )
    return max(0.0, countdown_s)


class CeleryDispatcher:
    """The :class:`sheetsync.dispatch.Dispatcher` of the Celery app (or of ``app``, an
    app configured the same way: a test's web app with a broker of its own)."""

    def __init__(self, app: Celery | None = None) -> None:
        self.app = app or sheetsync_app

    def send_flush(self, task: FlushTask) -> None:
        self.app.send_task(
            FLUSH_TASK,
            args=[task.token],
            task_id=task.token,
            queue=task.queue,
            countdown=checked_countdown(task.countdown_s),
        )

    def revoke(self, token: str) -> None:
        self.app.control.revoke(token)

    def waiting_queues(self) -> frozenset[str] | None:
        """Queues with messages no worker has taken yet (the Redis broker keeps each
        queue as a list of that name)."""
        try:
            with self.app.connection_for_read() as connection:
                client = connection.default_channel.client
                return frozenset(q for q in QUEUES if client.llen(q))
        except Exception as exc:  # the broker is down or not Redis: the sweeper assumes none
            log.info("queue depths unavailable: %s", type(exc).__name__)
            return None

    def send_replay(self, dead_letter_id: int, countdown_s: float = 0.0) -> None:
        self.app.send_task(
            REPLAY_TASK, args=[dead_letter_id], countdown=checked_countdown(countdown_s)
        )

    def send_notification(self, notification: dict[str, Any]) -> None:
        timeout_s = get_settings().owner_hook_timeout_s
        self.app.send_task(
            NOTIFY_TASK,
            args=[notification],
            queue=QUEUE_SCHEDULED,
            soft_time_limit=timeout_s + NOTIFY_TIME_LIMIT_MARGIN_S,
            time_limit=timeout_s + 2 * NOTIFY_TIME_LIMIT_MARGIN_S,
        )
