"""``python -m chaos.skewed ARGS``: ``celery ARGS`` for the worker whose clock is off.

It runs under ``faketime --exclude-monotonic``: the wall clock is minutes off, the
monotonic clock is the host's, as on a real host whose NTP is broken. libfaketime 0.9.10
has one defect there that no real host has: it rewrites the absolute CLOCK_MONOTONIC
deadline of ``clock_nanosleep``, which Python's ``time.sleep`` uses, into an invalid one,
so every ``time.sleep`` raises ``OSError: [Errno 22]``. (Faking the monotonic clock too
is worse: ``threading`` waits then hang for the offset.) This launcher makes
``time.sleep`` wait in ``select`` instead, before Celery or sheetsync is imported; the
pool processes inherit it. Nothing else changes.
"""

from __future__ import annotations

import select
import time
from typing import SupportsIndex


def _sleep(seconds: float | SupportsIndex) -> None:
    delay = float(seconds)
    if delay < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], delay)


time.sleep = _sleep

if __name__ == "__main__":
    from celery.__main__ import main

    main()
