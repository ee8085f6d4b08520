"""The tasks: thin wrappers that call the library."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from sheetsync.buffers.push import send_tasks
from sheetsync.celery.application import app
from sheetsync.celery.dispatcher import checked_countdown
from sheetsync.dispatch import FLUSH_TASK, NOTIFY_TASK, REPLAY_TASK
from sheetsync.errors import ConfigError
from sheetsync.flush.entry import flush
from sheetsync.recovery import repair
from sheetsync.services import get_services
from sheetsync.settings import get_settings

log = logging.getLogger(__name__)


@app.task(bind=True, name=FLUSH_TASK, max_retries=None)
def flush_buffer(self: Task, token: str) -> str:
    """Flush one buffer. The task id is the token (never reused)."""
    services = get_services()
    outcome = flush(services, token)
    if outcome.next is not None:
        send_tasks(services.store, [outcome.next])
    if outcome.status == "retry":
        assert outcome.retry_in_s is not None
        raise self.retry(
            countdown=checked_countdown(outcome.retry_in_s), exc=outcome.error, max_retries=None
        )
    return outcome.summary


@app.task(name="sheetsync.sweep")
def sweep() -> int:
    return len(repair.sweep(get_services()))


@app.task(name="sheetsync.reconcile")
def reconcile() -> int:
    return repair.reconcile(get_services()).answers


@app.task(name="sheetsync.dispatch_dead_letters")
def dispatch_dead_letters() -> int:
    from sheetsync.deadletters import replay

    return replay.dispatch_due(get_services())


@app.task(name=REPLAY_TASK)
def replay_dead_letter(dead_letter_id: int) -> str:
    from sheetsync.deadletters import replay

    return replay.replay(get_services(), dead_letter_id).summary


@app.task(bind=True, name=NOTIFY_TASK, max_retries=None)
def notify_owner(self: Task, notification: dict[str, Any]) -> str:
    """Deliver one owner notification: a few tries with backoff, then give up and
    release its once-an-hour claim (:mod:`sheetsync.notify`)."""
    from sheetsync import notify

    settings = get_settings()
    try:
        found = notify.Notification.from_json(notification)
    except notify.UnknownTopicError as exc:
        log.error("%s", exc)
        return "refused: unknown topic"
    try:
        notify.deliver(found, settings=settings)
    except (notify.HookError, ConfigError, SoftTimeLimitExceeded) as exc:
        tries = self.request.retries + 1
        if tries >= settings.owner_hook_tries:
            notify.delivery_failed(get_services().redis, found)
            return f"{found.topic} for {found.owner}: {tries} tries failed"
        delay = notify.retry_delay_s(tries, settings)
        raise self.retry(countdown=checked_countdown(delay), exc=exc) from None
    return f"{found.topic} for {found.owner}: delivered"
