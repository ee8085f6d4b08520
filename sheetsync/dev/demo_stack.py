"""The stack both demos stand on (``sheetsync demo`` and ``make demo-web``): a Redis,
a fresh SQLite database in ``.demo/``, the Sheets API emulator in this process, the
demo's SHEETSYNC_* environment, one real Celery worker with beat inside it (``-B``), and
the seeded demo forms.

:func:`start_stack` registers every stop on the caller's ``ExitStack``, in an order that
stops the worker before the Redis it writes to is tidied or stopped.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from rich.console import Console

from sheets_emulator import EmulatorAdmin, EmulatorError, EmulatorServer
from sheetsync.crypto import generate_key, reset_keyring
from sheetsync.db import upgrade
from sheetsync.dev.demo_data import DEMO_FORMS, DemoSeed, demo_owners, seed_demo
from sheetsync.dev.demo_redis import DemoRedis, open_demo_redis
from sheetsync.dev.demo_report import shown
from sheetsync.dev.local import (
    REDIS_INSTALL_HINT,
    RedisNotInstalledError,
    WorkerProcess,
    start_celery_worker,
)
from sheetsync.dispatch import QUEUES
from sheetsync.errors import SheetSyncError
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services, get_services, reset_services
from sheetsync.settings import reset_settings

#: Where the demos keep their database and the worker's log (under the current directory).
DEMO_DIR = ".demo"
#: Pool processes of the one worker, which consumes every queue.
DEMO_WORKER_CONCURRENCY = 2
WORKER_START_TIMEOUT_S = 30.0
#: Where the worker's beat (-B) keeps its schedule, under the demo's directory.
BEAT_SCHEDULE = "beat-schedule"
#: The caller's SHEETSYNC_* variables the demos keep. The others are left out, so a demo
#: never touches a real database, Google project or alert webhook.
INHERITED_VARIABLES = frozenset(
    {"SHEETSYNC_REDIS_URL", "SHEETSYNC_BROKER_URL", "SHEETSYNC_CLI_TRACEBACK"}
)


class DemoError(SheetSyncError):
    """A step of a demo failed; the message is the line to print."""


class SigtermInterrupt(KeyboardInterrupt):
    """SIGTERM arrived: stop as on Ctrl-C."""


@dataclass
class DemoStack:
    """What :func:`start_stack` started; all of it stops with the caller's ExitStack."""

    workdir: Path
    database_url: str
    database_path: Path
    emulator: EmulatorServer
    admin: EmulatorAdmin
    #: The SHEETSYNC_* variables this process and the worker run with.
    env: dict[str, str]
    worker: WorkerProcess
    services: Services
    seeded: DemoSeed


def start_stack(
    console: Console,
    cleanup: ExitStack,
    workdir: Path,
    *,
    flush_delay_s: float,
    answers: bool = True,
    extra_env: Mapping[str, str] | None = None,
    extra_path: Path | None = None,
) -> DemoStack:
    """Start everything, print one line per part, seed the demo forms (and their
    answers, unless ``answers=False``) and wait for the worker, which runs beat too.
    The environment (``extra_env`` on top of the demo's) holds until ``cleanup``
    closes; ``extra_path`` goes on the worker's PYTHONPATH."""
    # First, so that its snapshot precedes every write and its tidying follows the worker.
    demo_redis, demo_keys = open_demo_redis(
        os.environ.get("SHEETSYNC_REDIS_URL"), os.environ.get("SHEETSYNC_BROKER_URL"), cleanup
    )
    for label, text in demo_redis.describe():
        console.print(f"{label:<9} {text}", markup=False)

    database_url = fresh_database(workdir)
    database_path = workdir / "sheetsync.db"
    console.print(f"database  {shown(database_path)} (SQLite, new)")

    emulator = EmulatorServer().start()
    cleanup.callback(emulator.stop)
    admin = EmulatorAdmin(emulator.url)
    console.print(f"sheets    emulator at {emulator.url}, with Google's quotas")

    env = {
        **demo_environment(database_url, demo_redis, emulator, flush_delay_s),
        **(extra_env or {}),
    }
    cleanup.enter_context(environment(env))
    demo_keys.worker_prefix = f"demo-{os.getpid()}@"
    demo_keys.beat_name = f"beat@{socket.gethostname()}"
    worker_env = dict(env)
    if extra_path is not None:
        worker_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(extra_path), os.environ.get("PYTHONPATH")) if p
        )
    worker = start_celery_worker(
        env=worker_env,
        queues=QUEUES,
        concurrency=DEMO_WORKER_CONCURRENCY,
        log_path=workdir / "worker.log",
        name=f"{demo_keys.worker_prefix}%h",
        # Beat inside the worker (-B, fine for one worker): the sweeper, the reconciler
        # and due dead letters run as in a deployment.
        extra_args=("-B", "--schedule", str(workdir / BEAT_SCHEDULE)),
    )
    cleanup.callback(worker.stop)
    console.print(
        f"worker    celery with beat (-B), pid {worker.process.pid}, log {shown(worker.log_path)}"
    )

    services = get_services()
    seeded = seed_demo(services, admin, answers=answers)
    demo_keys.google_accounts.extend(account.account_id for account in seeded.accounts.values())
    demo_keys.buffers.extend(
        BufferKey(sheet.form.owner.user_id, sheet.submission_id, sheet.spreadsheet_id, sheet.gid)
        for sheet in seeded.sheets
    )
    stored = (
        f"{len(seeded.answer_ids):,} answers to send"
        if answers
        else "no answers yet (their sheets start empty)"
    )
    console.print(
        f"seeded    {len(DEMO_FORMS)} forms of {len(demo_owners())} owners, "
        f"{len(seeded.sheets)} linked sheets, {stored}"
    )
    if not worker.wait_ready(WORKER_START_TIMEOUT_S):
        if not worker.alive:
            raise DemoError(f"the Celery worker exited with {worker.process.returncode} at start")
        raise DemoError(f"the Celery worker did not start within {WORKER_START_TIMEOUT_S:.0f} s")
    from sheetsync.celery.application import reconfigure

    # The Celery app may have been imported before the demo set its environment.
    reconfigure()
    return DemoStack(
        workdir, database_url, database_path, emulator, admin, env, worker, services, seeded
    )


def fresh_database(workdir: Path) -> str:
    workdir.mkdir(exist_ok=True)
    path = workdir / "sheetsync.db"
    for leftover in (path, *workdir.glob("sheetsync.db-*")):  # and SQLite's -wal, -shm
        leftover.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    upgrade(url)
    return url


def demo_environment(
    database_url: str, demo_redis: DemoRedis, emulator: EmulatorServer, flush_delay_s: float
) -> dict[str, str]:
    """SHEETSYNC_* for this process and the worker: the demo's stores, a new PII key,
    the emulator as Google, and a short debounce."""
    return {
        "SHEETSYNC_DATABASE_URL": database_url,
        "SHEETSYNC_REDIS_URL": demo_redis.url,
        "SHEETSYNC_BROKER_URL": demo_redis.broker_url,
        "SHEETSYNC_PII_KEYS": generate_key(),
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-demo",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": secrets.token_urlsafe(16),
        "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
        "SHEETSYNC_FLUSH_DELAY_S": str(flush_delay_s),
    }


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Among SHEETSYNC_* variables, this process (and what it starts) sees only ``env``
    and :data:`INHERITED_VARIABLES`; everything is restored at the end."""
    saved = dict(os.environ)
    for name in [n for n in os.environ if n.startswith("SHEETSYNC_")]:
        if name not in INHERITED_VARIABLES:
            del os.environ[name]
    os.environ.update(env)
    forget_cached_settings()
    try:
        yield
    finally:
        forget_cached_settings()
        os.environ.clear()
        os.environ.update(saved)


def forget_cached_settings() -> None:
    reset_settings()
    reset_keyring()
    reset_services()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def interrupt(_signum: int, _frame: FrameType | None) -> Any:
        raise SigtermInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_held() -> Iterator[None]:
    """Ignore Ctrl-C and SIGTERM while cleaning up, so a second one cannot strand children."""
    try:
        previous = {
            sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)
        }
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: Exit codes, as the command line has them (130: interrupted, as shells report it).
EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130


def run_until_stopped(
    console: Console,
    body: Callable[[ExitStack], None],
    *,
    interrupted: int = EXIT_OK,
    describe: Callable[[SheetSyncError], str] = str,
) -> int:
    """Run ``body`` (which starts children and registers their stops on the ExitStack it
    gets), then stop them all, also after Ctrl-C or SIGTERM; returns the exit code: a
    failure is one line on stderr (``describe`` words a SheetSyncError; the emulator's
    and Redis's errors say it themselves)."""
    cleanup = ExitStack()
    try:
        with sigterm_as_interrupt():
            body(cleanup)
    except RedisNotInstalledError as failure:
        error_line(
            f"the demo starts a redis-server of its own, but {failure}: {REDIS_INSTALL_HINT}"
        )
        return EXIT_ERROR
    except SheetSyncError as failure:
        error_line(describe(failure))
        return EXIT_ERROR
    except (EmulatorError, redis.RedisError) as failure:
        error_line(str(failure))
        return EXIT_ERROR
    except KeyboardInterrupt:
        console.print("stopping everything the demo started…")
        return interrupted
    finally:
        with signals_held():
            cleanup.close()
    return EXIT_OK


def error_line(message: str) -> None:
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.stderr.flush()
