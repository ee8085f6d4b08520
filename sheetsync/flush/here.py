"""Run a buffer's flushes in this process, with the code the workers run: what
``sheetsync dlq replay --now`` does once a replay has handed an entry's ids back to their
buffer (:func:`sheetsync.deadletters.replay.replay`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sheetsync.buffers.push import send_tasks
from sheetsync.dispatch import QUEUE_DEFAULT, FlushTask, get_dispatcher
from sheetsync.flush.entry import flush
from sheetsync.flush.outcomes import Tally
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services

log = logging.getLogger(__name__)

#: How long ``flush_here`` waits for a worker that holds the buffer before looking again.
DEFAULT_WAIT_FOR_WORKER_S = 0.25
#: The longest ``flush_here`` sleeps for a rate-limit slot before trying again.
DEFAULT_LONGEST_NAP_S = 5.0


def flush_here(
    services: Services, key: BufferKey, done: Callable[[], bool], *, on_progress: Callable[[], None]
) -> Tally:
    """Run the buffer's flushes in this process until ``done()``, with the code the
    workers run. A run a worker already holds is left to it: this waits and watches.
    Whatever task the buffer waits for when this stops is handed to the workers.

    Returns what the runs in this process did, summed (a worker's runs are not in it)."""
    total = Tally()
    unsent: FlushTask | None = None
    try:
        while not done():
            adopted = services.store.adopt(key, QUEUE_DEFAULT)
            if adopted is None:
                time.sleep(DEFAULT_WAIT_FOR_WORKER_S)
                on_progress()
                continue
            if adopted.superseded:
                _revoke(adopted.superseded)
            current: FlushTask | None = adopted
            while current is not None:
                unsent = current
                outcome = flush(services, current.token)
                total.appended += outcome.tally.appended
                total.parked += outcome.tally.parked
                total.failed += outcome.tally.failed
                total.requests += outcome.tally.requests
                on_progress()
                unsent = outcome.next
                if outcome.status == "retry" and outcome.retry_in_s is not None:
                    # The job waits for this same token again, after the backoff.
                    unsent = FlushTask(current.token, current.queue, outcome.retry_in_s)
                if done() or unsent is None:
                    break
                tally = outcome.tally
                if not (tally.appended or tally.failed or tally.parked):
                    time.sleep(min(unsent.countdown_s, DEFAULT_LONGEST_NAP_S))
                current = FlushTask(unsent.token, unsent.queue, 0.0)
    finally:
        if unsent is not None:
            send_tasks(services.store, [unsent])  # the rest goes on in the workers
    return total


def _revoke(token: str) -> None:
    try:
        get_dispatcher().revoke(token)
    except Exception as exc:
        log.info("revoke of %s failed: %s", token, type(exc).__name__)
