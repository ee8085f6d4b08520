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

import signal
import time
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import func, select

from sheetsync.dev.demo_data import (
    DemoSeed,
    expected_dead_lettered,
    expected_rows,
    restore_access,
    revoke_access,
)
from sheetsync.dev.demo_report import (
    ENDED_NOTES,
    ended_environment,
    print_next_steps,
    report_dead_letters,
    report_requests,
    report_sheets,
    shown,
    write_env_file,
)
from sheetsync.dev.demo_stack import (
    DEMO_DIR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    DemoError,
    run_until_stopped,
    start_stack,
)
from sheetsync.dev.local import (
    WorkerProcess,
    wait_until,
)
from sheetsync.models import SheetTransaction, TransactionType
from sheetsync.services import Services

__all__ = ["DEMO_DIR", "DemoError", "run_demo"]

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
#: How long the rows may take to land once every answer is emitted.
DRAIN_TIMEOUT_S = 40.0
#: Where the demo writes the SHEETSYNC_* variables that point `sheetsync` at its data.
ENV_FILE = "env"


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_demo(keep: bool = False) -> int:
    """Run the demo; returns the exit code. ``keep``: leave everything up until Ctrl-C."""
    console = Console(highlight=False, soft_wrap=True)
    workdir = Path.cwd() / DEMO_DIR
    return run_until_stopped(
        console,
        lambda cleanup: _run(console, cleanup, workdir, keep),
        interrupted=EXIT_OK if keep else EXIT_INTERRUPTED,
        describe=lambda failure: (
            f"{failure} (worker log: {shown(workdir / 'worker.log')})"
            if isinstance(failure, DemoError)
            else str(failure)
        ),
    )


def _run(console: Console, cleanup: ExitStack, workdir: Path, keep: bool) -> None:
    started = time.monotonic()
    console.print("[bold]sheetsync demo[/]: the real pipeline on embedded defaults\n")
    stack = start_stack(console, cleanup, workdir, flush_delay_s=DEMO_FLUSH_DELAY_S)
    services, worker, seeded, admin = stack.services, stack.worker, stack.seeded, stack.admin
    env_file = workdir / ENV_FILE
    # While the stack runs, .demo/env points at all of it; once it ends, at the database,
    # and at a Redis that is gone, so `sheetsync status` says so (never another Redis).
    write_env_file(env_file, stack.env)
    cleanup.callback(
        write_env_file, env_file, ended_environment(workdir, stack.database_url), ENDED_NOTES
    )
    revoked = revoke_access(admin, seeded)
    for owner in revoked:
        console.print(
            f"revoked   {owner.user_id} withdrew sheetsync's access to their Google account "
            "(in the emulator): their answers will meet invalid_grant and go to a dead letter",
            markup=False,
        )

    _emit_and_drain(console, services, worker, seeded)
    problems = report_sheets(console, admin, stack.emulator.url, seeded)
    dead_letters, parking_problems = report_dead_letters(console, services.sessions, seeded)
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
        database_path=stack.database_path,
        dead_letters=dead_letters,
        revoked=revoked,
    )
    if not keep:
        return
    console.print("Press Ctrl-C to stop.")
    while worker.alive:
        time.sleep(0.5)
    raise DemoError(f"the Celery worker exited with {worker.process.returncode}")


def _ledger_counts(services: Services) -> dict[TransactionType, int]:
    """(answer, sheet) pairs per ledger state."""
    with services.sessions() as session:
        rows = session.execute(
            select(SheetTransaction.type, func.count()).group_by(SheetTransaction.type)
        )
        return {TransactionType(state): int(count) for state, count in rows}


def _emit_and_drain(
    console: Console, services: Services, worker: WorkerProcess, seeded: DemoSeed
) -> None:
    """Emit every answer as a web app does, then wait until every answer of a valid
    owner is COMPLETED and every answer of a revoked one DEAD_LETTERED."""
    from sheetsync import emit_answer_submitted

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
            counts = _ledger_counts(services)
            progress.update(landing, completed=counts.get(TransactionType.COMPLETED, 0))
            progress.update(parking, completed=counts.get(TransactionType.DEAD_LETTERED, 0))
            return (
                counts.get(TransactionType.COMPLETED, 0) >= rows
                and counts.get(TransactionType.DEAD_LETTERED, 0) >= parked
            )

        for start in range(0, len(answer_ids), EMIT_TRANSACTION_SIZE):
            chunk = answer_ids[start : start + EMIT_TRANSACTION_SIZE]
            # The outbox path: ENQUEUED rows in the caller's transaction, pushes after commit.
            with services.sessions.begin() as session:
                for answer_id in chunk:
                    emit_answer_submitted(answer_id, session=session, services=services)
            progress.update(emitting, completed=start + len(chunk))
            settled()
        wait_until(lambda: settled() or not worker.alive, DRAIN_TIMEOUT_S, interval_s=0.2)
    if not worker.alive:
        raise DemoError(f"the Celery worker exited with {worker.process.returncode}")
    counts = _ledger_counts(services)
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
