"""Flower for sheetsync, with every page that shows task data behind its auth.

``python -m sheetsync.celery.flower [FLOWER OPTIONS]`` is
``celery -A sheetsync.celery flower [FLOWER OPTIONS]`` with two changes (docker-compose.yml
runs it):

* ``/metrics`` asks for the same credentials as every other page. Flower checks them
  lazily: ``BaseHandler.get_current_user`` (flower/views/__init__.py, Flower 2.x)
  compares the ``Authorization: Basic`` header with ``--basic-auth``, but tornado calls it
  only when a handler reads ``current_user``, which ``@tornado.web.authenticated`` does.
  Every page and API handler carries that decorator; ``monitor.Metrics`` and
  ``monitor.Healthcheck`` (flower/views/monitor.py) do not, so ``/metrics`` (Prometheus
  counters and task runtimes labelled with task names, worker host names and event
  types) answered anyone, ``FLOWER_BASIC_AUTH`` or not. ``/healthcheck`` writes
  ``OK`` and nothing else: it stays open.
* It refuses to start without ``--basic-auth`` or ``--auth`` (``FLOWER_BASIC_AUTH``,
  ``FLOWER_AUTH``): without either, Flower serves its pages, every task's arguments
  included, to anyone who reaches its port. A basic-auth password must have at least
  32 characters: Flower does not slow down repeated wrong ones, so only length keeps
  guessing out of reach.
* It refuses to start with half a TLS setup: Flower given only one of ``--certfile``
  and ``--keyfile`` logs an error and serves plain HTTP. Both must load.
* Its Broker page reads the queues. Flower picks its Redis client by the scheme of
  ``Connection.as_uri()`` (flower/app.py, ``Flower.broker_uri_with_password``), and kombu
  writes the transport there, which for sheetsync is a class
  (``sheetsync.celery.transport:Transport``), so the page answered 404 "'redis' broker
  is not supported". Here it gets the broker URL itself (the first sentinel's, behind
  Sentinel); Flower adds ``broker_use_ssl`` and the transport options, so it speaks TLS
  to a ``rediss://`` broker as the workers do.

Flower comes with the ``[flower]`` extra; it is imported when used, so that without it
this says which ``pip install`` to run instead of failing on an import.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sheetsync import extras
from sheetsync.settings.checks import credential_problem, tls_files_problem
from sheetsync.text import mask_url

if TYPE_CHECKING:
    import tornado.web
    from flower.app import Flower

#: What the Celery CLI is told before the Flower options.
CELERY_ARGS = ("-A", "sheetsync.celery", "flower")


class UnsafeFlowerError(SystemExit):
    """Flower would start with no or a short password, or with half a TLS setup."""


def _require_user(handler: tornado.web.RequestHandler) -> None:
    import tornado.web

    # Reading current_user runs Flower's get_current_user: a missing or wrong Basic
    # header raises HTTPError(401) in it, and a missing OAuth session gives None.
    if not handler.current_user:
        raise tornado.web.HTTPError(401)


def check_auth_configured() -> None:
    """Exit with one line unless Flower's options name at least one way to log in, every
    basic-auth password is long enough, and TLS is all or nothing."""
    from tornado.options import options

    basic = [entry for entry in options.basic_auth or () if entry]
    malformed = [entry for entry in basic if not all(entry.partition(":")[::2])]
    if malformed:
        raise UnsafeFlowerError(
            "sheetsync flower: FLOWER_BASIC_AUTH (--basic-auth) must be user:password, "
            "both non-empty"
        )
    if not basic and not options.auth:
        raise UnsafeFlowerError(
            "sheetsync flower: set FLOWER_BASIC_AUTH=user:password (or --basic-auth, or "
            "--auth for OAuth): without it Flower shows every task to anyone"
        )
    for entry in basic:
        problem = credential_problem(entry.partition(":")[2])
        if problem:
            raise UnsafeFlowerError(
                "sheetsync flower: the password of FLOWER_BASIC_AUTH (--basic-auth; "
                f"FLOWER_PASSWORD in docker-compose.yml) {problem}"
            )
    tls_problem = tls_files_problem(options.certfile or None, options.keyfile or None)
    if tls_problem:
        raise UnsafeFlowerError(
            f"sheetsync flower: --certfile/--keyfile (FLOWER_CERTFILE, FLOWER_KEYFILE): "
            f"{tls_problem}"
        )


def _broker_url(app: Flower) -> str:
    # One URL: a Sentinel broker's is one sentinel:// URL per sentinel, ";"-separated.
    url: str = app.capp.conf.broker_url
    return url.split(";", maxsplit=1)[0]


def protect() -> None:
    """Put /metrics behind Flower's auth, make Flower refuse to start without one, and
    give its Broker page the broker's URL.

    Idempotent. Patches Flower's classes in this process, so call it before Flower
    builds its application.
    """
    import flower.command
    from flower.app import Flower
    from flower.views import monitor

    if getattr(monitor.Metrics, "_sheetsync_protected", False):
        return
    monitor.Metrics.prepare = _require_user
    monitor.Metrics._sheetsync_protected = True
    Flower.broker_uri_with_password = property(_broker_url)
    Flower.broker_uri = property(lambda app: mask_url(_broker_url(app)))

    # flower.command.flower calls extract_settings() once the environment, --conf and
    # the command line are all applied to tornado's options: check them there.
    extract_settings: Callable[[], None] = flower.command.extract_settings

    def checked_extract_settings() -> None:
        check_auth_configured()
        extract_settings()

    flower.command.extract_settings = checked_extract_settings


def main(argv: Sequence[str] | None = None) -> None:
    """``celery -A sheetsync.celery flower ARGV...`` with :func:`protect` applied.

    Exits the process, as the ``celery`` command does.
    """
    try:
        extras.require("flower", "sheetsync flower")
    except extras.MissingExtraError as exc:
        raise SystemExit(f"error: {exc}") from None
    from celery.bin.celery import celery

    protect()
    args = list(sys.argv[1:] if argv is None else argv)
    celery.main(args=[*CELERY_ARGS, *args], prog_name="celery", auto_envvar_prefix="CELERY")


if __name__ == "__main__":
    main()
