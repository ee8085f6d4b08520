"""``sheetsync demo``: the real pipeline on embedded defaults, end to end, in under a minute.

SQLite in ``.demo/``, a redis-server of its own (or the Redis at ``SHEETSYNC_REDIS_URL``,
see :mod:`sheetsync.dev.demo_redis`), the Sheets API emulator in this process with
Google's quotas, and a real Celery worker process. Every answer of the dataset in
:mod:`sheetsync.dev.demo_data` (2,050 answers, 5 sheets) is emitted with
:func:`sheetsync.emit_answer_submitted` inside web-app transactions, while the worker
flushes. One owner has revoked Google access, so their answers end in a dead letter. The
demo waits until every other answer landed and every answer of that owner is parked,
reads the sheets back (:mod:`sheetsync.dev.demo_report`) and prints what to try next.

Everything it starts is stopped on the way out: on success, failure, Ctrl-C or SIGTERM.
Nothing it prints carries an answer's value.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import func, select

from sheetsync.crypto import generate_key, reset_keyring
from sheetsync.db import upgrade
from sheetsync.dev.demo_data import (
    DEMO_FORMS,
    DemoSeed,
    demo_owners,
    expected_dead_lettered,
    expected_rows,
    restore_access,
    revoke_access,
    seed_demo,
)
from sheetsync.dev.demo_redis import DemoRedis, open_demo_redis
from sheetsync.dev.demo_report import (
    DATABASE_VARIABLE,
    print_next_steps,
    report_dead_letters,
    report_requests,
    report_sheets,
    shown,
    write_env_file,
)
from sheetsync.dev.emulator import EmulatorAdmin, EmulatorServer
from sheetsync.dev.local import (
    REDIS_INSTALL_HINT,
    RedisNotInstalledError,
    WorkerProcess,
    start_celery_worker,
    wait_until,
)
from sheetsync.dispatch import QUEUES
from sheetsync.errors import SheetSyncError
from sheetsync.keys import BufferKey
from sheetsync.models import SheetTransaction, TransactionType
from sheetsync.pipeline import Pipeline, get_pipeline, reset_pipeline
from sheetsync.settings import reset_settings

__all__ = ["DEMO_DIR", "DemoError", "run_demo"]

#: Where the demo keeps its database and the worker's log (under the current directory).
DEMO_DIR = ".demo"
#: The debounce, shortened from the production 10 s so the tail lands quickly. Not
#: shorter: while answers stream in, each buffer is flushed about once per delay, and
#: the conference form's two sheets share its owner's 60 requests a minute.
DEMO_FLUSH_DELAY_S = 3.0
#: Answers emitted per web-app transaction (``emit_answer_submitted(id, session=...)``).
#: The pushes of one transaction reach Redis together, after its commit. One answer per
#: transaction works too, but on a loaded machine the slow trickle of single pushes
#: keeps flush runs appending tiny batches and can spend the owner's 60 requests a
#: minute; the rate limiter would then hold the rest back for up to a minute.
EMIT_TRANSACTION_SIZE = 100
#: Pool processes of the one worker, which consumes every queue.
DEMO_WORKER_CONCURRENCY = 2
WORKER_START_TIMEOUT_S = 30.0
#: How long the rows may take to land once every answer is emitted.
DRAIN_TIMEOUT_S = 40.0
#: Exit codes, as the command line has them (130: interrupted, as shells report it).
EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130
#: The caller's SHEETSYNC_* variables the demo keeps. The others are left out, so the
#: demo never touches a real database, Google project or alert webhook.
INHERITED_VARIABLES = frozenset(
    {"SHEETSYNC_REDIS_URL", "SHEETSYNC_BROKER_URL", "SHEETSYNC_CLI_TRACEBACK"}
)
#: Where the demo writes the SHEETSYNC_* variables that point `sheetsync` at its data.
ENV_FILE = "env"


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class DemoError(SheetSyncError):
    """A step of the demo failed; the message is the line to print."""


class _SigtermInterrupt(KeyboardInterrupt):
    """SIGTERM arrived: stop as on Ctrl-C."""


def run_demo(keep: bool = False) -> int:
    """Run the demo; returns the exit code. ``keep``: leave everything up until Ctrl-C."""
    console = Console(highlight=False, soft_wrap=True)
    workdir = Path.cwd() / DEMO_DIR
    cleanup = ExitStack()
    try:
        with _sigterm_as_interrupt():
            _run(console, cleanup, workdir, keep)
    except DemoError as failure:
        _error_line(f"{failure} (worker log: {shown(workdir / 'worker.log')})")
        return EXIT_ERROR
    except RedisNotInstalledError as failure:
        _error_line(
            f"the demo starts a redis-server of its own, but {failure}: {REDIS_INSTALL_HINT}"
        )
        return EXIT_ERROR
    except (SheetSyncError, redis.RedisError) as failure:
        _error_line(str(failure))
        return EXIT_ERROR
    except KeyboardInterrupt:
        console.print("stopping everything the demo started…")
        return EXIT_OK if keep else EXIT_INTERRUPTED
    finally:
        with _signals_held():
            cleanup.close()
    return EXIT_OK


def _run(console: Console, cleanup: ExitStack, workdir: Path, keep: bool) -> None:
    started = time.monotonic()
    console.print("[bold]sheetsync demo[/]: the real pipeline on embedded defaults\n")
    # First, so that its snapshot precedes every write and its tidying follows the worker.
    demo_redis, demo_keys = open_demo_redis(
        os.environ.get("SHEETSYNC_REDIS_URL"), os.environ.get("SHEETSYNC_BROKER_URL"), cleanup
    )
    for label, text in demo_redis.describe():
        console.print(f"{label:<9} {text}", markup=False)

    database_url = _fresh_database(workdir)
    database_path = workdir / "sheetsync.db"
    console.print(f"database  {shown(database_path)} (SQLite, new)")

    emulator = EmulatorServer().start()
    cleanup.callback(emulator.stop)
    admin = EmulatorAdmin(emulator.url)
    console.print(f"sheets    emulator at {emulator.url}, with Google's quotas")

    env = _demo_environment(database_url, demo_redis, emulator)
    env_file = workdir / ENV_FILE
    database_only = {DATABASE_VARIABLE: database_url}
    write_env_file(env_file, env if keep else database_only)
    if keep:  # the rest of the stack is gone once the demo ends
        cleanup.callback(write_env_file, env_file, database_only)
    cleanup.enter_context(_environment(env))
    demo_keys.worker_prefix = f"demo-{os.getpid()}@"
    worker = start_celery_worker(
        env=env,
        queues=QUEUES,
        concurrency=DEMO_WORKER_CONCURRENCY,
        log_path=workdir / "worker.log",
        name=f"{demo_keys.worker_prefix}%h",
    )
    cleanup.callback(worker.stop)
    console.print(f"worker    celery, pid {worker.process.pid}, log {shown(worker.log_path)}")

    pipeline = get_pipeline()
    seeded = seed_demo(pipeline, admin)
    demo_keys.google_accounts.extend(account.account_id for account in seeded.accounts.values())
    demo_keys.buffers.extend(
        BufferKey(sheet.form.owner.user_id, sheet.submission_id, sheet.spreadsheet_id, sheet.gid)
        for sheet in seeded.sheets
    )
    console.print(
        f"seeded    {len(DEMO_FORMS)} forms of {len(demo_owners())} owners, "
        f"{len(seeded.answer_ids):,} answers, {len(seeded.sheets)} linked sheets"
    )
    revoked = revoke_access(admin, seeded)
    for owner in revoked:
        console.print(
            f"revoked   {owner.user_id} withdrew sheetsync's access to their Google account "
            "(in the emulator): their answers will meet invalid_grant and go to a dead letter",
            markup=False,
        )
    if not worker.wait_ready(WORKER_START_TIMEOUT_S):
        if not worker.alive:
            raise DemoError(f"the Celery worker exited with {worker.process.returncode} at start")
        raise DemoError(f"the Celery worker did not start within {WORKER_START_TIMEOUT_S:.0f} s")

    _emit_and_drain(console, pipeline, worker, seeded)
    problems = report_sheets(console, admin, emulator.url, seeded)
    dead_letters, parking_problems = report_dead_letters(console, pipeline.sessions, seeded)
    report_requests(console, admin)
    console.print(f"\nelapsed {time.monotonic() - started:.1f} s")
    problems += parking_problems
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise DemoError(problems[0] + more)
    if keep:
        for owner in restore_access(admin, seeded):
            console.print(
                f"\n{owner.user_id} has authorised Google again: the emulator accepts their "
                "token once more, and sheetsync will use it after `credentials reconnect`.",
                markup=False,
            )
    print_next_steps(
        console,
        keep=keep,
        env_file=env_file,
        database_path=database_path,
        dead_letters=dead_letters,
        revoked=revoked,
    )
    if not keep:
        return
    console.print("Press Ctrl-C to stop.")
    while worker.alive:
        time.sleep(0.5)
    raise DemoError(f"the Celery worker exited with {worker.process.returncode}")


def _fresh_database(workdir: Path) -> str:
    workdir.mkdir(exist_ok=True)
    path = workdir / "sheetsync.db"
    for leftover in (path, *workdir.glob("sheetsync.db-*")):  # and SQLite's -wal, -shm
        leftover.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    upgrade(url)
    return url


def _demo_environment(
    database_url: str, demo_redis: DemoRedis, emulator: EmulatorServer
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
        "SHEETSYNC_FLUSH_DELAY_S": str(DEMO_FLUSH_DELAY_S),
    }


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """Among SHEETSYNC_* variables, this process (and what it starts) sees only ``env``
    and :data:`INHERITED_VARIABLES`; everything is restored at the end."""
    saved = dict(os.environ)
    for name in [n for n in os.environ if n.startswith("SHEETSYNC_")]:
        if name not in INHERITED_VARIABLES:
            del os.environ[name]
    os.environ.update(env)
    _forget_cached_settings()
    try:
        yield
    finally:
        _forget_cached_settings()
        os.environ.clear()
        os.environ.update(saved)


def _forget_cached_settings() -> None:
    reset_settings()
    reset_keyring()
    reset_pipeline()


def _ledger_counts(pipeline: Pipeline) -> dict[TransactionType, int]:
    """(answer, sheet) pairs per ledger state."""
    with pipeline.sessions() as session:
        rows = session.execute(
            select(SheetTransaction.type, func.count()).group_by(SheetTransaction.type)
        )
        return {TransactionType(state): int(count) for state, count in rows}


def _emit_and_drain(
    console: Console, pipeline: Pipeline, worker: WorkerProcess, seeded: DemoSeed
) -> None:
    """Emit every answer as a web app does, then wait until every answer of a valid
    owner is COMPLETED and every answer of a revoked one DEAD_LETTERED."""
    from sheetsync import emit_answer_submitted
    from sheetsync.celery.application import reconfigure

    # The Celery app may have been imported before the demo set its environment.
    reconfigure()
    answer_ids = seeded.answer_ids
    rows, parked = expected_rows(), expected_dead_lettered()
    console.print(
        f"emitting  {len(answer_ids):,} answers with emit_answer_submitted, "
        f"{EMIT_TRANSACTION_SIZE} per web-app transaction, while the worker flushes"
    )
    columns = (
        TextColumn("{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        emitting = progress.add_task("answers emitted", total=len(answer_ids))
        landing = progress.add_task("rows in sheets", total=rows)
        parking = progress.add_task("dead-lettered", total=parked)

        def settled() -> bool:
            counts = _ledger_counts(pipeline)
            progress.update(landing, completed=counts.get(TransactionType.COMPLETED, 0))
            progress.update(parking, completed=counts.get(TransactionType.DEAD_LETTERED, 0))
            return (
                counts.get(TransactionType.COMPLETED, 0) >= rows
                and counts.get(TransactionType.DEAD_LETTERED, 0) >= parked
            )

        for start in range(0, len(answer_ids), EMIT_TRANSACTION_SIZE):
            chunk = answer_ids[start : start + EMIT_TRANSACTION_SIZE]
            # The outbox path: ENQUEUED rows in the caller's transaction, pushes after commit.
            with pipeline.sessions.begin() as session:
                for answer_id in chunk:
                    emit_answer_submitted(answer_id, session=session, pipeline=pipeline)
            progress.update(emitting, completed=start + len(chunk))
            settled()
        wait_until(lambda: settled() or not worker.alive, DRAIN_TIMEOUT_S, interval_s=0.2)
    if not worker.alive:
        raise DemoError(f"the Celery worker exited with {worker.process.returncode}")
    counts = _ledger_counts(pipeline)
    done = counts.get(TransactionType.COMPLETED, 0)
    if done < rows:
        raise DemoError(
            f"only {done:,} of {rows:,} rows landed within {DRAIN_TIMEOUT_S:.0f} s "
            "after the last answer"
        )
    dead_lettered = counts.get(TransactionType.DEAD_LETTERED, 0)
    if dead_lettered < parked:
        raise DemoError(
            f"only {dead_lettered} of the revoked owner's {parked} answers reached a dead "
            f"letter within {DRAIN_TIMEOUT_S:.0f} s after the last answer"
        )


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def interrupt(_signum: int, _frame: FrameType | None) -> Any:
        raise _SigtermInterrupt

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
def _signals_held() -> Iterator[None]:
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


def _error_line(message: str) -> None:
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.stderr.flush()
