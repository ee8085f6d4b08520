"""The Celery app: ``celery -A sheetsync.celery worker`` (or beat, or flower).

It reads its configuration from the ``SHEETSYNC_*`` settings. Run by the ``celery``
command, a bad setting prints one line and exits 1 instead of a traceback, and so does a
worker or beat whose start-up check fails (:mod:`sheetsync.startup`: no PII keys, no
database or not its schema, Redis or the broker unreachable...).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, NoReturn

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    beat_init,
    worker_init,
    worker_process_init,
    worker_ready,
)

from sheetsync import logs, startup
from sheetsync.celery.config import config_for
from sheetsync.errors import ConfigError
from sheetsync.services import reset_services
from sheetsync.settings import Settings, get_settings

#: The module that defines the tasks; workers import it at start.
TASKS_MODULE = "sheetsync.celery.tasks"


def _settings() -> Settings:
    try:
        return get_settings()
    except ConfigError as exc:
        if "celery.bin.celery" not in sys.modules:
            raise  # imported by an application: its caller decides
        # Run by the `celery` command, whose loader would print the whole traceback.
        _exit_with(exc)


def _exit_with(exc: ConfigError) -> NoReturn:
    # The process's own stderr: beat has redirected sys.stderr into its logger by now.
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"error: {' '.join(str(exc).split())}\n")
    stream.flush()
    raise SystemExit(1) from None


app = Celery("sheetsync", include=[TASKS_MODULE])
app.conf.update(config_for(_settings()))


def reconfigure() -> None:
    """Apply the current settings to the app (after the environment changed), and drop
    its broker connections and producers: they were made for the old broker URL, and a
    send through them would still go there."""
    app.conf.update(config_for(get_settings()))
    # What Celery's own after-fork cleanup resets (Celery._after_fork), without its
    # signal; not closed, as a sender may still hold them for its last send.
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@worker_init.connect
def _check_worker(sender: Any = None, **_: Any) -> None:
    """A real worker (``celery worker``, ``app.worker_main``) checks what it needs before
    it consumes, and exits 1 with one line if something is missing. The in-process
    workers of the tests (``celery.contrib.testing``'s, not a ``celery.apps.worker.Worker``)
    skip it: their fixtures build a checked environment, some on purpose one a real
    worker would refuse, and hundreds of them start in one test session."""
    from celery.apps.worker import Worker

    if not isinstance(sender, Worker):
        return
    try:
        startup.check_process("worker")
    except ConfigError as exc:
        _exit_with(exc)


@beat_init.connect
def _check_beat(**_: Any) -> None:
    try:
        startup.check_process("beat")
    except ConfigError as exc:
        _exit_with(exc)


@worker_init.connect
def _prefork_pool_with_fix(sender: Any = None, **_: Any) -> None:
    # `-P prefork` (or the default) gets the prefork pool with the fix in
    # sheetsync.celery.pool. worker_init runs before the pool class is resolved.
    from celery.concurrency import get_implementation
    from celery.concurrency.prefork import TaskPool as CeleryPrefork

    from sheetsync.celery.pool import TaskPool

    if sender is not None and get_implementation(sender.pool_cls) is CeleryPrefork:
        sender.pool_cls = TaskPool


@worker_init.connect
def _build_the_sheets_client(**_: Any) -> None:
    # Before the pool forks: each pool process would otherwise build it on its first
    # flush (a quarter of a second of CPU, measured), after every worker (re)start.
    from sheetsync.sheets.client import build_resources

    build_resources(get_settings())


@worker_ready.connect
def _warn_if_redis_may_evict(**_: Any) -> None:
    from sheetsync import redis_urls
    from sheetsync.services import get_services

    warning = redis_urls.eviction_warning(get_services().redis)
    if warning:
        logging.getLogger(__name__).warning("%s", warning)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _log_format(logger: logging.Logger | None = None, **_: Any) -> None:
    # Celery has added its handlers (it leaves the root's alone when it has some: the
    # root logger is not hijacked); SHEETSYNC_LOG_FORMAT=json gives them the JSON lines.
    if logger is not None:
        logs.apply(logs.configured_format(), logger.handlers)


@worker_process_init.connect
def _after_fork(**_: Any) -> None:
    # Connections opened by the parent must not be shared with forked children.
    reset_services()


# Signal handlers only: heartbeats for `sheetsync status` and `sheetsync health`; a
# SIGTERM that ends every run after its current batch.
from sheetsync.celery import health, shutdown  # noqa: E402,F401
