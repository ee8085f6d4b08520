"""How long preparing one batch of rows takes: hydrate, decrypt, build.

Usage::

    python bench/bench_rows.py [--runs 15] [--batch 5000] [--table 20000]

Seeds a realistic form (12 answerable questions, 2 of them PERSONAL_INFO, and a
jumbotron) with ``--table`` answers, then times preparing ``--batch`` of them as the
flush does (load the layout, one SELECT, one row per answer, under ``gc_paused``).
Prints medians (and the fastest run, a guide on a busy machine), no pass/fail.

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

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from sheetsync.crypto import Keyring
from sheetsync.db import make_engine, normalize_url, session_factory, upgrade
from sheetsync.dev.seed import seed_answers, seed_form
from sheetsync.flush.hydrate import fetch_answers, gc_paused
from sheetsync.flush.rows import RowBuilder, load_layout
from sheetsync.models import QuestionType
from sheetsync.settings import Settings

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Timing:
    db_s: float
    decrypt_s: float
    build_s: float  # including decryption

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


def bench(url: str, *, runs: int, batch: int, table: int) -> list[Timing]:
    keyring = Keyring([os.urandom(32)])
    settings = Settings.load()
    upgrade(url)
    engine = make_engine(url)
    factory = session_factory(engine)
    try:
        with factory.begin() as session:
            form = seed_form(session, steps=3, questions_per_step=4, pii=2, keyring=keyring)
            ids = seed_answers(session, form, table, keyring=keyring)
        batch_ids = random.Random(7).sample(ids, batch)
        timings = []
        for _ in range(runs + 1):  # the first run warms caches and is dropped
            timings.append(_one_batch(factory, form.submission_id, batch_ids, settings, keyring))
        return timings[1:]
    finally:
        engine.dispose()


def _one_batch(
    factory: sessionmaker[Session],
    submission_id: str,
    batch_ids: list[str],
    settings: Settings,
    keyring: Keyring,
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
    pii = {c.question_id for c in layout.columns if c.type is QuestionType.PERSONAL_INFO}
    tokens = [
        item["value"]
        for record in records.values()
        for item in record.answer
        if item["questionId"] in pii and item["value"]
    ]
    decrypt_started = time.perf_counter()
    for token in tokens:
        keyring.decrypt(token)
    decrypt_s = time.perf_counter() - decrypt_started
    return Timing(fetched - started, decrypt_s, built - fetched)


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
    with postgres_scratch(postgres_url) as url:
        report(
            "postgres", bench(url, runs=args.runs, batch=args.batch, table=args.table), args.batch
        )
    with sqlite_scratch() as url:
        report("sqlite", bench(url, runs=args.runs, batch=args.batch, table=args.table), args.batch)


if __name__ == "__main__":
    main()
