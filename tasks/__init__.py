"""The Celery app: ``celery -A tasks worker``. Thin tasks that call the library."""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task
from celery.signals import worker_process_init

import celeryconfig
from sheetsync import repair
from sheetsync.buffer import Dispatch
from sheetsync.dispatch import send_all, set_dispatcher
from sheetsync.errors import ConfigError
from sheetsync.flush import flush
from sheetsync.pipeline import get_pipeline, reset_pipeline
from sheetsync.settings import get_settings

log = logging.getLogger(__name__)

app = Celery("sheetsync")
app.config_from_object(celeryconfig)


class CeleryDispatcher:
    """Sends the library's tasks through this app."""

    def send_flush(self, dispatch: Dispatch) -> None:
        flush_buffer.apply_async(
            args=[dispatch.token],
            task_id=dispatch.token,
            queue=dispatch.queue,
            countdown=checked_countdown(dispatch.countdown_s),
        )

    def revoke(self, token: str) -> None:
        app.control.revoke(token)

    def send_replay(self, dead_letter_id: int, countdown_s: float = 0.0) -> None:
        replay_dead_letter.apply_async(
            args=[dead_letter_id], countdown=checked_countdown(countdown_s)
        )


def checked_countdown(countdown_s: float) -> float:
    """A countdown past the broker's visibility timeout would run twice: refuse it."""
    limit = get_settings().visibility_timeout_s
    if countdown_s >= limit:
        raise ConfigError(
            f"countdown {countdown_s:.0f}s is not below the visibility timeout {limit:.0f}s"
        )
    return max(0.0, countdown_s)


set_dispatcher(CeleryDispatcher())


@worker_process_init.connect
def _after_fork(**_: Any) -> None:
    # Connections opened by the parent must not be shared with forked children.
    reset_pipeline()


@app.task(bind=True, name="sheetsync.flush", max_retries=None)
def flush_buffer(self: Task, token: str) -> str:
    """Flush one buffer. The task id is the token (never reused)."""
    outcome = flush(get_pipeline(), token)
    if outcome.next is not None:
        send_all([outcome.next])
    if outcome.status == "retry":
        assert outcome.retry_in_s is not None
        raise self.retry(
            countdown=checked_countdown(outcome.retry_in_s), exc=outcome.error, max_retries=None
        )
    return (
        f"{outcome.status}: appended {outcome.appended}, parked {outcome.parked}, "
        f"failed {outcome.failed}; Sheets requests: {', '.join(outcome.requests) or 'none'}"
    )


@app.task(name="sheetsync.sweep")
def sweep() -> int:
    return len(repair.sweep(get_pipeline()))


@app.task(name="sheetsync.reconcile")
def reconcile() -> int:
    return repair.reconcile(get_pipeline()).answers


@app.task(name="sheetsync.dispatch_dead_letters")
def dispatch_dead_letters() -> int:
    from sheetsync import replay

    return replay.dispatch_due(get_pipeline())


@app.task(bind=True, name="sheetsync.replay_dead_letter")
def replay_dead_letter(self: Task, dead_letter_id: int) -> str:
    from sheetsync import replay

    result = replay.replay(get_pipeline(), dead_letter_id)
    if result.retry_in_s is not None:
        CeleryDispatcher().send_replay(dead_letter_id, result.retry_in_s)
    return result.summary
