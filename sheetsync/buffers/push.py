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
from sheetsync.keys import BufferKey

log = logging.getLogger(__name__)


def push(store: BufferStore, targets: Sequence[tuple[BufferKey, str]], ids: Sequence[str]) -> bool:
    """Push ids to buffers and send whatever tasks that makes due; never raises on an
    unreachable Redis or broker (the reconciler and the sweeper repair both).

    Returns whether the ids reached Redis.
    """
    try:
        tasks = store.push(targets, ids)
    except redis.RedisError as exc:
        log.warning("push of %d ids skipped, Redis unavailable: %s", len(ids), type(exc).__name__)
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
        log.warning("task send failed (%s); the sweeper re-sends it", type(exc).__name__)
        return
    try:
        store.mark_sent(tasks)
    except redis.RedisError as exc:
        log.info("could not mark %d tasks sent: %s", len(tasks), type(exc).__name__)
