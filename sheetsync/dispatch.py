"""How the library hands work to the task queue without importing Celery.

The library sends through a :class:`Dispatcher`. Unless one was registered with
:func:`set_dispatcher`, the first send builds :data:`DEFAULT_DISPATCHER`, found by its
name: the library never imports the Celery app, so the two have no import cycle.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any, Protocol

from sheetsync.errors import ConfigError
from sheetsync.models import Plan

log = logging.getLogger(__name__)

#: Queues (docs/ARCHITECTURE.md, "Queues"). Paying plans' flushes never wait behind
#: free ones.
QUEUE_PRIORITY = "sheetsync_priority"
QUEUE_DEFAULT = "sheetsync_default"
#: Dead-letter replays, the sweeper and the reconciler.
QUEUE_SCHEDULED = "sheetsync_scheduled"
QUEUES = (QUEUE_PRIORITY, QUEUE_DEFAULT, QUEUE_SCHEDULED)

#: The tasks the library sends, by name (sheetsync.celery.tasks registers them).
FLUSH_TASK = "sheetsync.flush.run"
REPLAY_TASK = "sheetsync.replay_dead_letter"
NOTIFY_TASK = "sheetsync.notify_owner"
#: Seconds a notification task may run beyond the hook's timeout before the prefork
#: pool kills it (a callable hook that hangs).
NOTIFY_TIME_LIMIT_MARGIN_S = 5.0

_PRIORITY_PLANS = frozenset({Plan.PRO, Plan.PRO_PLUS, Plan.ENTERPRISE})


@dataclass(frozen=True, slots=True)
class FlushTask:
    """A flush task to send: Celery task id ``token``, on ``queue``, after ``countdown_s``.

    ``superseded`` is the token it replaces (revoked as an optimisation: a superseded task
    that runs anyway finds a newer token and exits).
    """

    token: str
    queue: str
    countdown_s: float
    superseded: str | None = None


def is_priority_plan(plan: Plan | str | None) -> bool:
    """Whether an owner's plan pays for priority (its queue, and its weight at Google's
    quota); FREE and unknown plans do not."""
    try:
        return plan is not None and Plan(plan) in _PRIORITY_PLANS
    except ValueError:
        return False


def queue_for_plan(plan: Plan | str | None) -> str:
    """The flush queue of an owner's plan; FREE and unknown plans share the default."""
    return QUEUE_PRIORITY if is_priority_plan(plan) else QUEUE_DEFAULT


class Dispatcher(Protocol):
    def send_flush(self, task: FlushTask) -> None:
        """Send the flush task ``task.token`` to ``task.queue`` after its countdown."""

    def revoke(self, token: str) -> None:
        """Best effort: tell workers to drop a superseded task."""

    def send_replay(self, dead_letter_id: int, countdown_s: float = 0.0) -> None:
        """Send the replay task of one dead letter."""

    def send_notification(self, notification: dict[str, Any]) -> None:
        """Send the task that delivers one owner notification (:mod:`sheetsync.notify`)."""

    def waiting_queues(self) -> frozenset[str] | None:
        """The queues whose messages are waiting for a worker (a backlog), or None when
        the broker cannot say."""


#: The dispatcher used unless another is registered: the Celery app's; where Celery is
#: not installed (the web app's slim install), one that sends with kombu alone.
DEFAULT_DISPATCHER = "sheetsync.celery.dispatcher:CeleryDispatcher"
WITHOUT_CELERY = "sheetsync.task_messages:KombuDispatcher"

_dispatcher: Dispatcher | None = None


def set_dispatcher(dispatcher: Dispatcher | None) -> None:
    global _dispatcher  # noqa: PLW0603 (a process-wide registration)
    _dispatcher = dispatcher


def get_dispatcher() -> Dispatcher:
    """The registered dispatcher, else :data:`DEFAULT_DISPATCHER` (built once), or
    :data:`WITHOUT_CELERY` when Celery is not installed."""
    global _dispatcher  # noqa: PLW0603 (a process-wide registration)
    if _dispatcher is None:
        name = DEFAULT_DISPATCHER if find_spec("celery") is not None else WITHOUT_CELERY
        module_name, _, class_name = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), class_name)
        except ImportError as exc:
            raise ConfigError(
                f"no task dispatcher: {name} could not be imported ({exc}); "
                "install Celery or call sheetsync.dispatch.set_dispatcher"
            ) from None
        _dispatcher = factory()
    return _dispatcher


def send_all(tasks: list[FlushTask]) -> None:
    """Send new tasks and revoke the ones they replace (revoke is only an optimisation:
    a superseded task that still runs finds a newer token and exits)."""
    if not tasks:
        return
    dispatcher = get_dispatcher()
    for task in tasks:
        dispatcher.send_flush(task)
        if task.superseded:
            try:
                dispatcher.revoke(task.superseded)
            except Exception as exc:
                log.info("revoke of %s failed: %s", task.superseded, type(exc).__name__)
