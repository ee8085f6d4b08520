"""``sheetsync demo``: the real pipeline on embedded defaults, end to end, in under a minute.

SQLite in ``.demo/``, the Redis at ``SHEETSYNC_REDIS_URL`` (or a redis-server child), the
Sheets API emulator in this process with Google's quotas, and a real Celery worker
process. Every answer of the dataset in :mod:`sheetsync.dev.demo_data` (2,000 answers,
4 sheets) is emitted with :func:`sheetsync.emit_answer_submitted` inside web-app
transactions, while the worker flushes; the demo waits for every row to land and reads
the sheets back.

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
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import redis
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import func, select

from sheetsync.crypto import generate_key, reset_keyring
from sheetsync.db import upgrade
from sheetsync.dev.demo_data import (
    DEMO_FORMS,
    SHEET_TITLE,
    DemoSheet,
    demo_owners,
    expected_rows,
    seed_demo,
)
from sheetsync.dev.emulator import EmulatorAdmin, EmulatorServer
from sheetsync.dev.local import (
    REDIS_INSTALL_HINT,
    LocalRedis,
    LocalStackError,
    RedisNotInstalledError,
    WorkerProcess,
    ensure_redis,
    start_celery_worker,
    wait_until,
)
from sheetsync.dispatch import QUEUES
from sheetsync.errors import SheetSyncError
from sheetsync.keys import BUFFER_INDEX, BufferKey, rate_account_key
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
#: The settings' default buffer Redis.
DEFAULT_REDIS_URL = "redis://localhost:6379/0"


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
        _error_line(f"{failure} (worker log: {_shown(workdir / 'worker.log')})")
        return EXIT_ERROR
    except RedisNotInstalledError as failure:
        _error_line(f"{failure}: {REDIS_INSTALL_HINT}")
        return EXIT_ERROR
    except (LocalStackError, redis.RedisError) as failure:
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
    local_redis = ensure_redis(os.environ.get("SHEETSYNC_REDIS_URL") or DEFAULT_REDIS_URL)
    cleanup.callback(local_redis.stop)
    where = "a redis-server child" if local_redis.started_here else "already running"
    console.print(f"redis     {_masked(local_redis.url)} ({where})")

    database_url = _fresh_database(workdir)
    console.print(f"database  {_shown(workdir / 'sheetsync.db')} (SQLite, new)")

    emulator = EmulatorServer().start()
    cleanup.callback(emulator.stop)
    admin = EmulatorAdmin(emulator.url)
    console.print(f"sheets    emulator at {emulator.url}, with Google's quotas")

    env = _demo_environment(database_url, local_redis, emulator)
    cleanup.enter_context(_environment(env))
    sheets: list[DemoSheet] = []
    if not local_redis.started_here:  # after the worker stopped: it could still write
        cleanup.callback(_forget_demo_keys, local_redis.url, sheets)
    worker = start_celery_worker(
        env=env,
        queues=QUEUES,
        concurrency=DEMO_WORKER_CONCURRENCY,
        log_path=workdir / "worker.log",
        name=f"demo-{os.getpid()}@%h",
    )
    cleanup.callback(worker.stop)
    console.print(f"worker    celery, pid {worker.process.pid}, log {_shown(worker.log_path)}")

    pipeline = get_pipeline()
    seeded, answer_ids = seed_demo(pipeline, admin)
    sheets.extend(seeded)
    console.print(
        f"seeded    {len(DEMO_FORMS)} forms of {len(demo_owners())} owners, "
        f"{len(answer_ids):,} answers, {len(sheets)} linked sheets"
    )
    if not worker.wait_ready(WORKER_START_TIMEOUT_S):
        if not worker.alive:
            raise DemoError(f"the Celery worker exited with {worker.process.returncode} at start")
        raise DemoError(f"the Celery worker did not start within {WORKER_START_TIMEOUT_S:.0f} s")

    _emit_and_drain(console, pipeline, worker, answer_ids)
    _summarize(console, admin, emulator.url, sheets, time.monotonic() - started)
    if not keep:
        console.print(
            "\nThe emulator and the worker stop with the demo, so these URLs stop answering: "
            "run `sheetsync demo --keep` to keep everything up until Ctrl-C."
        )
        return
    console.print("\nEverything keeps running: open the URLs above. Press Ctrl-C to stop.")
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
    database_url: str, local_redis: LocalRedis, emulator: EmulatorServer
) -> dict[str, str]:
    """SHEETSYNC_* for this process and the worker: the demo's stores, a new PII key,
    the emulator as Google, and a short debounce."""
    broker_url = None if local_redis.started_here else os.environ.get("SHEETSYNC_BROKER_URL")
    return {
        "SHEETSYNC_DATABASE_URL": database_url,
        "SHEETSYNC_REDIS_URL": local_redis.url,
        "SHEETSYNC_BROKER_URL": broker_url or local_redis.url,
        "SHEETSYNC_PII_KEYS": generate_key(),
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-demo",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": secrets.token_urlsafe(16),
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


def _completed_rows(pipeline: Pipeline) -> int:
    with pipeline.sessions() as session:
        count = session.scalar(
            select(func.count())
            .select_from(SheetTransaction)
            .where(SheetTransaction.type == TransactionType.COMPLETED)
        )
    return int(count or 0)


def _emit_and_drain(
    console: Console, pipeline: Pipeline, worker: WorkerProcess, answer_ids: list[str]
) -> None:
    """Emit every answer as a web app does, then wait until every row is COMPLETED."""
    from sheetsync import emit_answer_submitted
    from sheetsync.celery.application import reconfigure

    # The Celery app may have been imported before the demo set its environment.
    reconfigure()
    total = expected_rows()
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
        landing = progress.add_task("rows in sheets", total=total)
        for start in range(0, len(answer_ids), EMIT_TRANSACTION_SIZE):
            chunk = answer_ids[start : start + EMIT_TRANSACTION_SIZE]
            # The outbox path: ENQUEUED rows in the caller's transaction, pushes after commit.
            with pipeline.sessions.begin() as session:
                for answer_id in chunk:
                    emit_answer_submitted(answer_id, session=session, pipeline=pipeline)
            progress.update(emitting, completed=start + len(chunk))
            progress.update(landing, completed=_completed_rows(pipeline))

        def landed() -> bool:
            done = _completed_rows(pipeline)
            progress.update(landing, completed=done)
            return done >= total or not worker.alive

        wait_until(landed, DRAIN_TIMEOUT_S, interval_s=0.2)
    if not worker.alive:
        raise DemoError(f"the Celery worker exited with {worker.process.returncode}")
    done = _completed_rows(pipeline)
    if done < total:
        raise DemoError(
            f"only {done:,} of {total:,} rows landed within {DRAIN_TIMEOUT_S:.0f} s "
            "after the last answer"
        )


def _summarize(
    console: Console,
    admin: EmulatorAdmin,
    emulator_url: str,
    sheets: list[DemoSheet],
    elapsed_s: float,
) -> None:
    """Rows per sheet (read back from the emulator), the Sheets requests, the time."""
    console.print("\nSheets, read back from the emulator:")
    in_sheets = 0
    for number, sheet in enumerate(sheets, start=1):
        values = admin.sheet_values(sheet.spreadsheet_id, sheet.gid)
        ids = [row[0] for row in values[1:] if row]
        in_sheets += len(ids)
        duplicates = len(ids) - len(set(ids))
        console.print(
            f"  sheet {number}  {sheet.title} / {SHEET_TITLE}  "
            f"(form “{sheet.form.title}”, {sheet.form.owner.plan.value} owner)  "
            f"{len(ids)} rows" + (f", {duplicates} DUPLICATES" if duplicates else ""),
            markup=False,
        )
        view = f"{emulator_url}/_emulator/spreadsheets/{sheet.spreadsheet_id}/sheets/{sheet.gid}"
        console.print(f"           {view}", markup=False)
    console.print(f"  total    {in_sheets} rows (expected {expected_rows()})")

    stats = admin.stats()
    requests = stats["requests"]
    kinds = ", ".join(f"{kind} {n}" for kind, n in requests["by_kind"].items())
    busiest = max(
        (account["max_in_window"]["all"] for account in stats["by_account"].values()), default=0
    )
    console.print(f"\nSheets API requests: {requests['total']} ({kinds})")
    console.print(
        f"  429 responses: {stats['rate_limited']['total']}; busiest {stats['window_s']:.0f} s "
        f"of one account: {busiest} requests (quota: 60)"
    )
    console.print(f"\nelapsed {elapsed_s:.1f} s")


def _forget_demo_keys(redis_url: str, sheets: list[DemoSheet]) -> None:
    """On a Redis the demo did not start, remove what it left: its buffers (empty unless
    the demo failed), sheet caches and rate windows. Best effort."""
    keys = {rate_account_key(sheet.google_account) for sheet in sheets}
    buffers = [
        BufferKey(sheet.form.owner.user_id, sheet.submission_id, sheet.spreadsheet_id, sheet.gid)
        for sheet in sheets
    ]
    for buffer in buffers:
        keys.update((buffer.buf, buffer.job, buffer.sheet, buffer.inflight))
    client = redis.Redis.from_url(redis_url)
    with suppress(redis.RedisError), client:
        if keys:
            client.delete(*keys)
        if buffers:
            client.zrem(BUFFER_INDEX, *(buffer.base for buffer in buffers))


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


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _masked(url: str) -> str:
    password = urlsplit(url).password
    return url.replace(f":{password}@", ":***@") if password else url
