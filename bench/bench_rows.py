"""How long preparing one batch of rows takes: hydrate, decrypt, build; and what the
durable intent and the link check add to settling it.

Usage::

    python bench/bench_rows.py [--runs 15] [--batch 5000] [--table 20000]

Seeds a realistic form (12 answerable questions, 2 of them PERSONAL_INFO, and a
jumbotron) with ``--table`` answers, then times preparing ``--batch`` of them as the
flush does (load the layout, one SELECT, one row per answer, under ``gc_paused``).
Prints medians (and the fastest run, a guide on a busy machine), no pass/fail.

The twins figure builds the same batch again two ways, back to back in each run, in an
order that turns from run to run: with ``RowBuilder.build`` (the fast path) and with its
reference (``_build_checked``, then the same typed-cell step): what the fast path saves
on a realistic batch.

The settle figure compares, interleaved, the ledger write alone (COMPLETED for the
batch, one transaction: what settling cost before the durable intent) with what a batch
now costs around its append: the intent committed, the link checked, then COMPLETED
and the intent deleted in one transaction.

PostgreSQL comes from ``SHEETSYNC_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``); the benchmark creates and drops its own
scratch database there. SQLite runs in a temporary file.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import ledger, links
from sheetsync.buffers.store import Lease
from sheetsync.crypto import Keyring, answer_value_context
from sheetsync.db import make_engine, normalize_url, session_factory, upgrade
from sheetsync.dev.seed import SeededForm, link_sheet, seed_answers, seed_form
from sheetsync.flush import intents
from sheetsync.flush.hydrate import fetch_answers, gc_paused
from sheetsync.flush.layout import load_layout
from sheetsync.flush.rows import RowBuilder
from sheetsync.models import QuestionType, TransactionType
from sheetsync.redis_keys import BufferKey
from sheetsync.settings import Settings

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Timing:
    db_s: float
    decrypt_s: float
    build_s: float  # including decryption
    twin_build_s: float  # build again, beside the reference
    reference_s: float  # the same rows from the reference, _build_checked

    @property
    def total_s(self) -> float:
        return self.db_s + self.build_s


@contextmanager
def postgres_scratch(server_url: str) -> Iterator[str]:
    server = make_url(normalize_url(server_url))
    name = f"sheetsync_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@contextmanager
def sqlite_scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield f"sqlite:///{directory}/bench.db"


@dataclass(frozen=True)
class SettleTiming:
    ledger_only_s: float
    with_intent_s: float


def bench(
    url: str, *, runs: int, batch: int, table: int
) -> tuple[list[Timing], list[SettleTiming]]:
    keyring = Keyring([os.urandom(32)])
    settings = Settings.load()
    upgrade(url)
    engine = make_engine(url)
    factory = session_factory(engine)
    try:
        with factory.begin() as session:
            form = seed_form(session, steps=3, questions_per_step=4, pii=2, keyring=keyring)
            ids = seed_answers(session, form, table, keyring=keyring)
            link_sheet(session, form, "bench-spreadsheet", 0)
        batch_ids = random.Random(7).sample(ids, batch)
        timings = []
        settles = []
        for turn in range(runs + 1):  # the first run warms caches and is dropped
            timings.append(
                _one_batch(factory, form.submission_id, batch_ids, settings, keyring, turn)
            )
            settles.append(_settle(factory, form, batch_ids))
        return timings[1:], settles[1:]
    finally:
        engine.dispose()


def _settle(factory: sessionmaker[Session], form: SeededForm, batch_ids: list[str]) -> SettleTiming:
    """One batch settled the old way and the new way, back to back."""
    key = BufferKey(form.owner_id, form.submission_id, "bench-spreadsheet", 0)
    lease = Lease(f"{key.base}#1", "1", until_ms=2**40, granted_ms=0)

    def reset() -> None:
        with factory.begin() as session:
            ledger.record(session, batch_ids, key.spread_sheet_id, 0, TransactionType.ENQUEUED)

    reset()
    started = time.perf_counter()
    with factory.begin() as session:
        ledger.record(session, batch_ids, key.spread_sheet_id, 0, TransactionType.COMPLETED)
    ledger_only = time.perf_counter() - started

    reset()
    started = time.perf_counter()
    with factory.begin() as session:
        intent_id = intents.record(session, key, lease, batch_ids, after_row=1)
    with factory() as session:
        links.check(session, key)
    with factory.begin() as session:
        ledger.record(session, batch_ids, key.spread_sheet_id, 0, TransactionType.COMPLETED)
        intents.resolve(session, intent_id)
    with_intent = time.perf_counter() - started
    return SettleTiming(ledger_only, with_intent)


def _one_batch(
    factory: sessionmaker[Session],
    submission_id: str,
    batch_ids: list[str],
    settings: Settings,
    keyring: Keyring,
    turn: int,
) -> Timing:
    with factory() as session:
        started = time.perf_counter()
        layout = load_layout(session, submission_id)
        records = fetch_answers(session, batch_ids)
        fetched = time.perf_counter()
        builder = RowBuilder(layout, settings, keyring)
        with gc_paused():
            rows = [
                builder.build(record.id, record.user_name, record.submitted_at, record.answer)
                for record in (records[answer_id] for answer_id in batch_ids)
            ]
        built = time.perf_counter()
        assert len(rows) == len(batch_ids)
        twins = _twins(builder, records, batch_ids, rows, turn)
    pii = {q.question_id for q in layout.questions if q.type is QuestionType.PERSONAL_INFO}
    # Each token with its context (answer, question) built beforehand: the row builder
    # builds them more cheaply (the answer's part once per row), and counts that in build.
    tokens = [
        (item["value"], answer_value_context(record.id, item["questionId"]))
        for record in records.values()
        for item in record.answer
        if item["questionId"] in pii and item["value"]
    ]
    decrypt_started = time.perf_counter()
    for token, context in tokens:
        keyring.decrypt(token, context)
    decrypt_s = time.perf_counter() - decrypt_started
    return Timing(fetched - started, decrypt_s, built - fetched, *twins)


def _twins(
    builder: RowBuilder, records: dict[str, Any], batch_ids: list[str], rows: list[Any], turn: int
) -> tuple[float, float]:
    """The batch's rows again: by build and by the reference (_build_checked), in an
    order that turns with ``turn``; the same rows each time, checked."""
    batch = [records[answer_id] for answer_id in batch_ids]

    def fast() -> list[Any]:
        return [builder.build(r.id, r.user_name, r.submitted_at, r.answer) for r in batch]

    def reference() -> list[Any]:
        return [
            builder._typed_row(
                builder._build_checked(r.id, r.user_name, r.submitted_at, r.answer),
                r.submitted_at,
            )
            for r in batch
        ]

    ways = [fast, reference]
    took = {}
    for n in range(2):
        way = ways[(turn + n) % 2]
        with gc_paused():
            started = time.perf_counter()
            built = way()
            took[way] = time.perf_counter() - started
        assert built == rows
    return took[fast], took[reference]


def report(label: str, timings: list[Timing], batch: int) -> None:
    def median_ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    total = median_ms([t.total_s for t in timings])
    fastest = min(t.total_s for t in timings) * 1000
    db = median_ms([t.db_s for t in timings])
    decrypt = median_ms([t.decrypt_s for t in timings])
    build = median_ms([t.build_s for t in timings])
    print(
        f"{label:<10} total {total:6.1f} ms/batch (fastest {fastest:6.1f})  "
        f"{total * 1000 / batch:5.1f} µs/row  | "
        f"db {db:6.1f} ms  decrypt {decrypt:5.1f} ms  "
        f"build (excl. decrypt) {build - decrypt:5.1f} ms"
    )


def report_twins(label: str, timings: list[Timing]) -> None:
    build = statistics.median(t.twin_build_s for t in timings) * 1000
    reference = statistics.median(t.reference_s for t in timings) * 1000
    print(
        f"{label:<10} twins: build {build:6.1f} ms; rows by _build_checked {reference:6.1f} ms "
        f"({reference / build:.2f}x build)"
    )


def report_settle(label: str, settles: list[SettleTiming], batch: int) -> None:
    before = statistics.median(t.ledger_only_s for t in settles) * 1000
    after = statistics.median(t.with_intent_s for t in settles) * 1000
    added = statistics.median((t.with_intent_s - t.ledger_only_s) for t in settles) * 1000
    print(
        f"{label:<10} settle {batch}: ledger only {before:6.1f} ms, with durable intent and "
        f"link check {after:6.1f} ms: +{added:5.1f} ms/batch (median of the differences)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--table", type=int, default=20_000)
    args = parser.parse_args()
    postgres_url = os.environ.get("SHEETSYNC_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"batch of {args.batch} answers from a table of {args.table}; "
        f"12 columns (2 PERSONAL_INFO); median of {args.runs} runs; "
        f"{os.cpu_count()} CPUs, load average {load}"
    )
    results = []
    with postgres_scratch(postgres_url) as url:
        results.append(
            ("postgres", *bench(url, runs=args.runs, batch=args.batch, table=args.table))
        )
    with sqlite_scratch() as url:
        results.append(("sqlite", *bench(url, runs=args.runs, batch=args.batch, table=args.table)))
    for label, timings, _ in results:
        report(label, timings, args.batch)
    for label, timings, _ in results:
        report_twins(label, timings)
    for label, _, settles in results:
        report_settle(label, settles, args.batch)


if __name__ == "__main__":
    main()
