"""A scale-down drain: a backlog drained while workers are told to stop (SIGTERM) in
bursts, from 8 processes to 1 and back, against the same drain with no SIGTERM.

Usage::

    python bench/bench_scale_down.py [--answers 100000] [--sheets 12] [--owners 4]

Each drain gets a fresh PostgreSQL database, redis-server and emulator state: ``--answers``
answers over ``--sheets`` forms (one sheet each) of ``--owners`` Google accounts, emitted
before any worker runs (the backlog and its first tasks wait in Redis), then drained by
8 worker processes (``celery worker -c 1``, and beat) at a tight quota (``--writes`` per
project and per account in the emulator's window, the limiter told the same), so the
drain's pace is Google's, not the CPUs'. The clock runs from the workers' start to the
last answer COMPLETED with no buffer left.

The scale-down drain SIGTERMs workers' main processes (as Kubernetes does) as the
backlog goes: 3 at 15 %, 2 at 25 %, 2 at 35 % (8 -> 1), then starts 7 at 55 % (back to 8)
and replaces 4 at once at 75 % (a rolling deploy). Goals: 0 lost, 0 duplicated (every
answer's ledger COMPLETED, its id once in its sheet), each SIGTERMed worker gone within
``sheetsync.celery.shutdown.grace_period_s``, the drain within 20 % of the baseline's.

The stack is the chaos suite's (tests/chaos: its redis-server, database, worker fleet and
short timings).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from chaos.config import DEFAULT_POSTGRES_URL, SHORT_TIMINGS  # noqa: E402
from chaos.processes import ChaosProcess, Fleet  # noqa: E402
from chaos.services import (  # noqa: E402
    Database,
    RedisServer,
    child_environment,
    process_settings,
)

from sheets_emulator import EmulatorAdmin, EmulatorServer  # noqa: E402
from sheetsync.crypto import generate_key  # noqa: E402
from sheetsync.redis_keys import BUFFER_INDEX  # noqa: E402

PROCESSES = 8
#: (share of the backlog COMPLETED, workers to SIGTERM, workers to start).
SCHEDULE = ((0.15, 3, 0), (0.25, 2, 0), (0.35, 2, 0), (0.55, 0, 7), (0.75, 4, 4))
EMIT_CHUNK = 5_000
WINDOW_S = 10.0


@dataclass
class Drain:
    label: str
    seconds: float = 0.0
    lost: int = 0
    duplicated: int = 0
    completed: int = 0
    rate_limited: int = 0
    #: Seconds each SIGTERMed worker took to exit.
    exits: list[float] = field(default_factory=list)
    exit_codes: Counter[int] = field(default_factory=Counter)
    #: grace_period_s for the drain's settings: the most a SIGTERMed worker may take.
    bound_s: float = 0.0


def settings_for(
    redis_server: RedisServer,
    database: Database,
    emulator: EmulatorServer,
    args: argparse.Namespace,
) -> dict[str, str]:
    timings = {
        **SHORT_TIMINGS,
        "BATCH_SIZE": str(args.batch),
        "RATE_WINDOW_S": str(WINDOW_S),
        "RATE_LIMIT_PER_ACCOUNT": str(args.writes),
        "RATE_LIMIT_PER_PROJECT": str(args.writes),
    }
    return {
        "SHEETSYNC_REDIS_URL": redis_server.url,
        "SHEETSYNC_BROKER_URL": redis_server.broker_url,
        "SHEETSYNC_DATABASE_URL": database.url,
        "SHEETSYNC_PII_KEYS": generate_key(),
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-bench",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
        "SHEETSYNC_DEVELOPMENT": "true",
        **{f"SHEETSYNC_{name}": value for name, value in timings.items()},
    }


def seed(admin: EmulatorAdmin, args: argparse.Namespace) -> dict[tuple[str, int], list[str]]:
    """Forms, their sheets and the backlog, emitted; returns each sheet's answer ids."""
    from sheetsync import emit_answers_submitted
    from sheetsync.dev.seed import link_sheet, seed_answers, seed_form
    from sheetsync.services import get_services

    services = get_services()
    per_sheet = args.answers // args.sheets
    sheets: dict[tuple[str, int], list[str]] = {}
    for n in range(args.sheets):
        owner = f"owner{n % args.owners}"
        admin.add_account(f"google-{owner}", f"refresh-{owner}")
        spreadsheet_id, gids = admin.create_spreadsheet(
            f"google-{owner}", f"Drain {n}", ["Responses"]
        )
        with services.sessions.begin() as session:
            form = seed_form(session, owner_id=owner)
            link_sheet(session, form, spreadsheet_id, gids["Responses"])
            ids = seed_answers(session, form, per_sheet, prefix=f"s{n}")
        for start in range(0, len(ids), EMIT_CHUNK):
            emit_answers_submitted(ids[start : start + EMIT_CHUNK])
        sheets[(spreadsheet_id, gids["Responses"])] = ids
    return sheets


def completed() -> int:
    from sheetsync.services import get_services

    with get_services().sessions() as session:
        return int(
            session.scalar(text("SELECT count(*) FROM sheet_transaction WHERE type = 'COMPLETED'"))
            or 0
        )


def quiet(redis_url: str, total: int) -> bool:
    client = redis.Redis.from_url(redis_url)
    try:
        return completed() >= total and not client.zcard(BUFFER_INDEX)
    finally:
        client.close()


def sigterm(fleet: Fleet, slots: list[int], drain: Drain, threads: list[threading.Thread]) -> None:
    """SIGTERM the main process of each worker in ``slots`` at once; a thread times each
    exit."""

    def timed(proc: ChaosProcess, told: float) -> None:
        code = proc.popen.wait()
        drain.exits.append(time.monotonic() - told)
        drain.exit_codes[code] += 1

    for slot in slots:
        proc = fleet.workers.pop(slot)
        proc.killed = True
        fleet.retired.append(proc)
        pid = proc.celery_pid()
        told = time.monotonic()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
        thread = threading.Thread(target=timed, args=(proc, told), daemon=True)
        thread.start()
        threads.append(thread)


def drive(
    fleet: Fleet,
    drain: Drain,
    redis_url: str,
    total: int,
    args: argparse.Namespace,
    out: Callable[[str], None],
) -> None:
    """Start the fleet, follow the SCHEDULE (if this drain scales down) until the backlog
    is drained, then time it and wait for every SIGTERMed worker's exit."""
    threads: list[threading.Thread] = []
    steps = list(SCHEDULE) if drain.label == "sigterm" else []
    next_slot = PROCESSES
    started = time.monotonic()
    fleet.start()
    while not quiet(redis_url, total):
        done = completed() / total
        while steps and done >= steps[0][0]:
            share, stop_count, start_count = steps.pop(0)
            sigterm(fleet, sorted(fleet.workers)[:stop_count], drain, threads)
            for _ in range(start_count):
                fleet._start_worker(next_slot)  # a new worker, as the fleet names them
                next_slot += 1
            out(
                f"    at {share:.0%}: SIGTERM {stop_count}, start {start_count}: "
                f"{len(fleet.workers)} processes"
            )
        if time.monotonic() - started > args.timeout:
            raise SystemExit(f"{drain.label}: not drained within {args.timeout:.0f} s")
        time.sleep(0.2)
    drain.seconds = time.monotonic() - started
    for thread in threads:
        thread.join()


def run_drain(
    label: str, args: argparse.Namespace, emulator: EmulatorServer, out: Callable[[str], None]
) -> Drain:
    from sheetsync.celery.application import reconfigure
    from sheetsync.celery.shutdown import grace_period_s
    from sheetsync.db import upgrade
    from sheetsync.settings import get_settings

    drain = Drain(label)
    with ExitStack() as stack:
        redis_server = RedisServer()
        stack.callback(redis_server.stop)
        redis_server.start()
        database = Database(args.postgres, f"sheetsync_bench_scale_down_{os.getpid()}_{label}")
        stack.callback(database.drop)
        database.create()
        admin = EmulatorAdmin(emulator.url)
        admin.reset()
        admin.set_quotas(
            read_per_account=args.writes,
            write_per_account=args.writes,
            read_per_project=args.writes,
            write_per_project=args.writes,
            window_s=WINDOW_S,
        )
        settings = settings_for(redis_server, database, emulator, args)
        stack.enter_context(process_settings(settings))
        reconfigure()  # the emit's tasks go to this drain's broker
        upgrade(database.url)
        drain.bound_s = grace_period_s(get_settings())
        seeded_at = time.monotonic()
        sheets = seed(admin, args)
        total = sum(len(ids) for ids in sheets.values())
        seeding_s = time.monotonic() - seeded_at
        out(f"  {label}: {total:,} answers over {len(sheets)} sheets emitted in {seeding_s:.0f} s")
        log_dir = Path(tempfile.mkdtemp(prefix=f"sheetsync-scale-down-{label}-"))
        fleet = Fleet(child_environment(settings), log_dir, PROCESSES, 1, 0)
        stack.callback(fleet.stop)
        drive(fleet, drain, redis_server.url, total, args, out)
        fleet.stop()
        drain.completed = completed()
        for sheet, ids in sheets.items():
            column = Counter(row[0] for row in admin.sheet_values(*sheet)[1:] if row)
            drain.lost += sum(1 for i in ids if not column[i])
            drain.duplicated += sum(n - 1 for n in column.values() if n > 1)
        drain.rate_limited = admin.stats()["rate_limited"]["total"]
    return drain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=int(os.environ.get("ANSWERS", "100000")))
    parser.add_argument("--sheets", type=int, default=12)
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--batch", type=int, default=250, help="BATCH_SIZE")
    parser.add_argument(
        "--writes", type=int, default=30, help=f"writes per {WINDOW_S:.0f} s window"
    )
    parser.add_argument("--timeout", type=float, default=3_600.0)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args()
    logging.getLogger("sheetsync").setLevel(logging.WARNING)

    def out(line: str) -> None:
        print(line, flush=True)

    load = os.getloadavg()[0]
    out(f"scale-down drain on {os.cpu_count()} CPUs, load {load:.2f}: {args.answers:,} answers")
    with EmulatorServer() as emulator:
        baseline = run_drain("baseline", args, emulator, out)
        scaled = run_drain("sigterm", args, emulator, out)
    for drain in (baseline, scaled):
        exits = ""
        if drain.exits:
            exits = (
                f", SIGTERMed workers exited in {min(drain.exits):.1f}-{max(drain.exits):.1f} s "
                f"(bound {drain.bound_s:.1f} s), exit codes {dict(drain.exit_codes)}"
            )
        out(
            f"  {drain.label}: drained in {drain.seconds:.1f} s; completed {drain.completed:,}, "
            f"lost {drain.lost}, duplicated {drain.duplicated}, 429s {drain.rate_limited}{exits}"
        )
    ratio = scaled.seconds / baseline.seconds
    out(f"  the SIGTERM drain took {ratio:.2f}x the baseline's (goal <= 1.20x)")


if __name__ == "__main__":
    main()
