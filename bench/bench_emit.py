"""What the emit adds to the web app's own transaction.

Usage::

    python bench/bench_emit.py [--rounds 1500]

The app's transaction inserts one answer and commits; "with emit" also calls
``emit_answer_submitted(answer, session=...)`` inside it, as the docs tell users to,
which hands the push to Redis to the process's push thread at the commit. Both are timed
from ``begin`` until the app has control back (what its request waits for); each round
then waits for the push outside the clock (``wait_for_pushes``), so pushes never pile up.
The variants are interleaved round by round so a busy machine slows both alike; medians
are printed.
PostgreSQL and SQLite, a form linked to 1 and to 3 sheets. The answer JSON is built
before the clock starts (the app has it already); every emit is a steady-state one (the
routing cache is warm, as it is after a form's first answer in each web process).

PostgreSQL comes from ``SHEETSYNC_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``; a scratch database is created and dropped);
Redis from ``SHEETSYNC_BENCH_REDIS_URL`` (default db 11 on 127.0.0.1:6379, flushed) or a
redis-server of its own. Goals (issue 12): the emit adds at most 0.5x the app's
transaction for 1 sheet on PostgreSQL, at most 0.6x for 3 sheets.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_rows import DEFAULT_POSTGRES_URL, postgres_scratch, sqlite_scratch  # noqa: E402

from sheetsync import crypto, emit_answer_submitted, wait_for_pushes  # noqa: E402
from sheetsync.db import make_engine, session_factory, upgrade  # noqa: E402
from sheetsync.dev.local import ensure_redis  # noqa: E402
from sheetsync.dev.seed import SeededForm, answer_items, link_sheet, seed_form  # noqa: E402
from sheetsync.models import SubmissionAnswer  # noqa: E402

GOALS = {1: 0.5, 3: 0.6}


def configure(database_url: str, redis_url: str) -> None:
    os.environ.update(
        {
            "SHEETSYNC_DATABASE_URL": database_url,
            "SHEETSYNC_REDIS_URL": redis_url,
            "SHEETSYNC_PII_KEYS": os.environ.setdefault("BENCH_PII_KEY", crypto.generate_key()),
            # No worker runs: nothing may fall due while the bench pushes.
            "SHEETSYNC_FLUSH_DELAY_S": "1800",
            "SHEETSYNC_FLUSH_THRESHOLD": str(10**9),
        }
    )
    from sheetsync.crypto import reset_keyring
    from sheetsync.services import reset_services
    from sheetsync.settings import reset_settings

    reset_settings()
    reset_keyring()
    reset_services()
    redis.Redis.from_url(redis_url).flushdb()


def bench_database(label: str, database_url: str, redis_url: str, rounds: int) -> None:
    configure(database_url, redis_url)
    upgrade(database_url)
    engine = make_engine(database_url)  # the web app's own engine
    statements = {"n": 0}
    event.listen(
        engine, "before_cursor_execute", lambda *_: statements.__setitem__("n", statements["n"] + 1)
    )
    factory = session_factory(engine)
    keyring = crypto.default_keyring()
    rng = random.Random(5)
    try:
        forms = {}
        with factory.begin() as session:
            for sheets in (1, 3):
                form = seed_form(session, owner_id=f"owner{sheets}", pii=2, keyring=keyring)
                for n in range(sheets):
                    link_sheet(session, form, f"bench-{sheets}-{n}", 0)
                forms[sheets] = form
        counter = iter(range(10**9))

        def app_transaction(form: SeededForm, emit: bool) -> int:
            answer_id = f"{form.submission_id}-{next(counter)}"
            items = answer_items(form, rng, keyring=keyring, answer_id=answer_id)
            start = time.perf_counter_ns()
            with factory.begin() as session:
                answer = SubmissionAnswer(
                    id=answer_id, submission_id=form.submission_id, answer=items, user_name="x"
                )
                session.add(answer)
                session.flush()
                if emit:
                    emit_answer_submitted(answer, session=session)
            took = time.perf_counter_ns() - start
            if emit and not wait_for_pushes():
                raise SystemExit("bench_emit: a push did not reach Redis within 5 s")
            return took

        for sheets in (1, 3):  # warm: the routing cache and the connection pool
            app_transaction(forms[sheets], True)
        samples: dict[tuple[int, bool], list[int]] = {k: [] for k in _variants()}
        for _ in range(rounds):
            for sheets, emit in _variants():
                samples[(sheets, emit)].append(app_transaction(forms[sheets], emit))
        counts = _statements_per_emit(factory, forms, statements, app_transaction)
        _report(label, rounds, samples, counts)
    finally:
        engine.dispose()


def _variants() -> list[tuple[int, bool]]:
    return [(1, False), (1, True), (3, False), (3, True)]


def _statements_per_emit(
    factory: sessionmaker[Session],
    forms: dict[int, SeededForm],
    statements: dict[str, int],
    app_transaction: Callable[[SeededForm, bool], int],
) -> dict[int, int]:
    """SQL statements the emit adds to the app's transaction, per number of sheets."""
    counts = {}
    for sheets, form in forms.items():
        statements["n"] = 0
        app_transaction(form, False)
        without = statements["n"]
        statements["n"] = 0
        app_transaction(form, True)
        counts[sheets] = statements["n"] - without
    return counts


def _report(
    label: str,
    rounds: int,
    samples: dict[tuple[int, bool], list[int]],
    statements: dict[int, int],
) -> None:
    print(f"{label}: the app's transaction, with and without the emit (median of {rounds}):")
    for sheets in (1, 3):
        without = statistics.median(samples[(sheets, False)]) / 1e6
        with_emit = statistics.median(samples[(sheets, True)]) / 1e6
        added = with_emit - without
        print(
            f"  {sheets} sheet{'s' if sheets > 1 else ' '}: without {without:6.3f} ms, with "
            f"{with_emit:6.3f} ms: the emit adds {added:+.3f} ms = {added / without:.2f}x "
            f"(goal <= {GOALS[sheets]}x), {statements[sheets]} SQL statement(s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1500)
    args = parser.parse_args()
    print(f"emit benchmark on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    local_redis = ensure_redis(
        os.environ.get("SHEETSYNC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
    )
    server = os.environ.get("SHEETSYNC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        with postgres_scratch(server) as url:
            bench_database("PostgreSQL", url, local_redis.url, args.rounds)
        with sqlite_scratch() as url:
            bench_database("SQLite", url, local_redis.url, args.rounds)
    finally:
        local_redis.stop()


if __name__ == "__main__":
    main()
