"""The flush task's entry point: claim the buffer, run it, end it (by the failure table
when it raised), and report the run. The task (:mod:`sheetsync.celery.tasks`) and a
replay driven in the operator's process (``dlq replay --now``) both call :func:`flush`.
"""

from __future__ import annotations

import logging
import time

from sheetsync.errors import RateLimited
from sheetsync.flush.failures import end_with
from sheetsync.flush.outcomes import Outcome, report_run
from sheetsync.flush.run import FlushRun
from sheetsync.redis_keys import token_buffer
from sheetsync.services import Services

log = logging.getLogger(__name__)


def flush(services: Services, token: str) -> Outcome:
    """Run the flush task whose id is ``token``; count and log how it went (one
    structured ``flush.run`` event, and the run's metrics published in one round trip)."""
    started = time.monotonic()
    outcome: Outcome | None = None
    try:
        outcome = _flush(services, token)
        return outcome
    finally:
        report_run(services.redis, token, outcome, time.monotonic() - started)


def _flush(services: Services, token: str) -> Outcome:
    key = token_buffer(token)
    lease = services.store.claim(key, token)
    if lease is None:
        job = services.store.job_state(key)
        log.info(
            "flush %s is a no-op: the buffer's job is %s (token %s)",
            token,
            job.get("state", "gone"),
            job.get("token", "-"),
        )
        return Outcome("superseded")
    run = FlushRun(services, key, lease)
    try:
        run.drain()
    except Exception as exc:
        outcome = end_with(run, exc)
        waits_for_a_slot = isinstance(exc, RateLimited)
    else:
        outcome = run.finish()
        waits_for_a_slot = False
    if not waits_for_a_slot:
        run.leave_rate_queues()
    run.replays.complete(services.sessions, token)
    return outcome
