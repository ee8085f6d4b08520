"""Push answer ids to buffers and send the flush tasks that makes due.

Used by the web app's emit, the reconciler and dead-letter replays alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis
from kombu.exceptions import OperationalError as BrokerError

from sheetsync.buffers.store import BufferStore
from sheetsync.dispatch import send_all
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
    try:
        send_all(tasks)
    except (BrokerError, redis.RedisError, OSError) as exc:
        log.warning("task send failed (%s); the sweeper re-sends it", type(exc).__name__)
    return True
