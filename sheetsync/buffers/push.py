"""Push answer ids to buffers and send the flush tasks that makes due.

Used by the web app's emit, the reconciler and dead-letter replays alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis
from kombu.exceptions import OperationalError as BrokerError

from sheetsync.buffers.store import BufferStore
from sheetsync.dispatch import FlushTask, send_all
from sheetsync.redis_keys import BufferKey
from sheetsync.text import duration, mask_url

log = logging.getLogger(__name__)


def push(store: BufferStore, targets: Sequence[tuple[BufferKey, str]], ids: Sequence[str]) -> bool:
    """Push ids to buffers and send whatever tasks that makes due; never raises on an
    unreachable Redis or broker (the reconciler and the sweeper repair both).

    Returns whether the ids reached Redis.
    """
    try:
        tasks = store.push(targets, ids)
    except redis.RedisError as exc:
        settings = store.settings
        log.warning(
            "push of %d ids skipped: Redis at %s unavailable (%s); they stay ENQUEUED in "
            "the database, and beat's reconciler pushes them within about %s "
            "(SHEETSYNC_RECONCILE_AFTER_S + SHEETSYNC_RECONCILE_INTERVAL_S) once Redis is back",
            len(ids),
            mask_url(settings.redis_url),
            type(exc).__name__,
            duration(settings.reconcile_after_s + settings.reconcile_interval_s),
        )
        return False
    send_tasks(store, tasks)
    return True


def send_tasks(store: BufferStore, tasks: Sequence[FlushTask]) -> None:
    """Send flush tasks, then mark their jobs sent (the sweeper then gives a busy queue
    a long grace). Never raises on an unreachable broker or Redis: a task not marked
    sent is sent again by the sweeper after the short grace."""
    if not tasks:
        return
    try:
        send_all(list(tasks))
    except (BrokerError, redis.RedisError, OSError) as exc:
        settings = store.settings
        log.warning(
            "%d flush tasks not sent: the Celery broker at %s unavailable (%s); the ids are "
            "buffered, and beat's sweeper sends their tasks within about %s "
            "(SHEETSYNC_SWEEP_GRACE_S + SHEETSYNC_SWEEP_INTERVAL_S) once it is back",
            len(tasks),
            mask_url(settings.celery_broker_url),
            type(exc).__name__,
            duration(settings.sweep_grace_s + settings.sweep_interval_s),
        )
        return
    try:
        store.mark_sent(tasks)
    except redis.RedisError as exc:
        log.info("could not mark %d tasks sent: %s", len(tasks), type(exc).__name__)
