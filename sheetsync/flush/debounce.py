"""A run waits for a fuller batch while a burst is still arriving (docs/ARCHITECTURE.md,
"Batches and the debounce"): Redis only, so a held run touches neither the database nor
Google.

The batch goes when it is full, when its oldest id is FLUSH_DELAY_S old (the debounce
promise holds), or when arrivals pause for FLUSH_IDLE_S (the burst is over). A wait
longer than FLUSH_LINGER_S is a task rescheduled to look again every
:data:`DEFAULT_HOLD_RECHECK_S`; a shorter one is spent in :func:`linger`.
"""

from __future__ import annotations

import time

from sheetsync.errors import HoldForBatch
from sheetsync.flush import stopping
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services

#: How often a lingering run looks at the list again.
DEFAULT_LINGER_POLL_S = 0.05
#: How often a run held for a fuller batch looks again (so a burst that ends is sent
#: within about this long).
DEFAULT_HOLD_RECHECK_S = 0.5


def hold_for_a_fuller_batch(services: Services, key: BufferKey) -> None:
    """Raise :class:`HoldForBatch` while waiting could still fill the batch for longer
    than FLUSH_LINGER_S, instead of spending an append (and a rate-limit slot) on a
    fraction of a batch."""
    wait = batch_wait_s(services, key)
    if wait > services.settings.flush_linger_s:
        raise HoldForBatch(
            "waiting for a fuller batch", retry_after_s=min(wait, DEFAULT_HOLD_RECHECK_S)
        )


def batch_wait_s(services: Services, key: BufferKey) -> float:
    """How long waiting could still fill the batch (0: send what is there now)."""
    settings = services.settings
    seen = services.store.arrivals(key)
    if not seen.length or seen.length >= settings.batch_size:
        return 0.0
    debounce_left = settings.flush_delay_s - seen.oldest_age_s
    if debounce_left <= 0 or seen.newest_age_s >= settings.flush_idle_s:
        return 0.0
    rate = seen.length / max(seen.oldest_age_s, 0.001)  # ids per second so far
    return min((settings.batch_size - seen.length) / rate, debounce_left)


def linger(services: Services, key: BufferKey) -> None:
    """Wait in-process (at most FLUSH_LINGER_S) while a fuller batch is on its way:
    until it is full, due, arrivals pause for FLUSH_IDLE_S, or the worker is stopping."""
    settings = services.settings
    deadline = time.monotonic() + min(batch_wait_s(services, key), settings.flush_linger_s)
    length = services.store.buffer_length(key)
    grown_at = time.monotonic()
    while length < settings.batch_size and time.monotonic() < deadline:
        if stopping.requested():
            return
        time.sleep(DEFAULT_LINGER_POLL_S)
        grown = services.store.buffer_length(key)
        if grown > length:
            length, grown_at = grown, time.monotonic()
        elif time.monotonic() - grown_at >= settings.flush_idle_s:
            return
