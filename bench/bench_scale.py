"""The repairs at scale: a sweeper pass over 100,000 buffers, a reconciler pass over
1,000,000 ENQUEUED ledger rows.

Usage::

    python bench/bench_scale.py [--buffers 100000] [--rows 1000000] [--links 100]

Sweeper: ``--buffers`` buffers with a job each, none due (FLUSH_DELAY_S is long). A pass
(``repair.sweep``) reads the due index only; its baseline, timed in the same run, is the
same rule (sweep.lua) applied to every buffer, which is what a pass cost before the
index. Then 1,000 of the buffers fall due and a pass re-sends exactly those.

Reconciler: ``--rows`` old ENQUEUED rows over ``--links`` buffers, every id in its
buffer (nothing lost). Redis time is Redis's own (INFO commandstats, reset before);
the database's is the rest of the wall time. Baseline: the previous design's LPOS per
id, timed on a sample and scaled to every row. Then 100 ids are lost from one buffer,
and a pass finds and re-pushes exactly those.

No worker runs: the benchmark calls the library's passes directly. SQLite in a
temporary file; a redis-server of its own (its command statistics must count only
the benchmark). Goals (issue 12): a sweep
<= 50 ms at 100k buffers with nothing due; a reconcile <= 1 s of Redis time.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import redis
from sqlalchemy import insert

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sheetsync import crypto  # noqa: E402
from sheetsync.db import upgrade  # noqa: E402
from sheetsync.dev.local import start_redis_server  # noqa: E402
from sheetsync.dev.seed import link_sheet, seed_form  # noqa: E402
from sheetsync.models import SheetTransaction, SubmissionAnswer, TransactionType, utcnow  # noqa: E402
from sheetsync.redis_keys import DUE_INDEX, BufferKey  # noqa: E402

QUEUE = "sheetsync_default"
TARGETS_PER_CALL = 500
ROWS_PER_INSERT = 50_000


def configure(database_url: str, redis_url: str) -> None:
    os.environ.update(
        {
            "SHEETSYNC_DATABASE_URL": database_url,
            "SHEETSYNC_REDIS_URL": redis_url,
            "SHEETSYNC_BROKER_URL": redis_url.rpartition("/")[0] + "/1",
            "SHEETSYNC_PII_KEYS": os.environ.setdefault("BENCH_PII_KEY", crypto.generate_key()),
            "SHEETSYNC_FLUSH_DELAY_S": "1800",
            "SHEETSYNC_FLUSH_THRESHOLD": str(10**9),
            "SHEETSYNC_RECONCILE_AFTER_S": "60",
        }
    )
    from sheetsync.crypto import reset_keyring
    from sheetsync.services import reset_services
    from sheetsync.settings import reset_settings

    reset_settings()
    reset_keyring()
    reset_services()
    from sheetsync.celery.application import reconfigure

    reconfigure()
    redis.Redis.from_url(redis_url).flushall()
    upgrade(database_url)


def redis_usec(client: redis.Redis) -> int:
    """Microseconds Redis spent in commands since the last CONFIG RESETSTAT."""
    stats = client.info("commandstats")
    return sum(int(entry["usec"]) for entry in stats.values())


def bench_sweep(buffers: int, passes: int = 20) -> None:
    from sheetsync.recovery import repair
    from sheetsync.services import get_services

    services = get_services()
    store = services.store
    keys = [BufferKey(f"owner{n % 97}", f"form{n}", f"sheet{n}", 0) for n in range(buffers)]
    started = time.perf_counter()
    for start in range(0, buffers, TARGETS_PER_CALL):
        chunk = keys[start : start + TARGETS_PER_CALL]
        store.push([(key, QUEUE) for key in chunk], ["a1"])
    made = time.perf_counter() - started
    print(f"sweeper: {buffers:,} buffers with a job, none due (made in {made:.1f} s)")
    repair.sweep(services)  # fills the due index once (an upgrade), then scores it
    indexed, every = [], []
    for _ in range(passes):
        start = time.perf_counter()
        sent = repair.sweep(services)
        indexed.append(time.perf_counter() - start)
        assert not sent, sent
    for _ in range(3):
        start = time.perf_counter()
        assert not store.sweep(keys, QUEUE)
        every.append(time.perf_counter() - start)
    fast, slow = statistics.median(indexed) * 1000, statistics.median(every) * 1000
    print(
        f"  a pass, due index: {fast:.2f} ms median of {passes} (goal <= 50 ms); "
        f"every buffer read: {slow:.0f} ms median of 3 (the baseline), {slow / fast:,.0f}x"
    )
    overdue = random.Random(3).sample(keys, 1000)
    client = services.redis
    for key in overdue:  # a job whose countdown ended long ago, as after a lost message
        client.hset(key.job, "due_at", 1)
    client.zadd(DUE_INDEX, {key.base: 1 for key in overdue})
    start = time.perf_counter()
    sent = repair.sweep(services)
    elapsed = (time.perf_counter() - start) * 1000
    print(f"  1,000 of them overdue: the pass re-sends {len(sent):,} tasks in {elapsed:.0f} ms")


def bench_reconcile(rows: int, links: int, database_url: str) -> None:
    from sheetsync.recovery import repair
    from sheetsync.services import get_services

    services = get_services()
    client = services.redis
    per_link = rows // links
    old = utcnow() - timedelta(hours=1)
    keys = []
    started = time.perf_counter()
    for n in range(links):
        with services.sessions.begin() as session:
            form = seed_form(session, owner_id=f"owner{n % 10}")
            link_sheet(session, form, f"spreadsheet{n}", 0)
        key = BufferKey(form.owner_id, form.submission_id, f"spreadsheet{n}", 0)
        ids = [f"r{n}_{m}" for m in range(per_link)]
        for start in range(0, per_link, ROWS_PER_INSERT):
            chunk = ids[start : start + ROWS_PER_INSERT]
            with services.sessions.begin() as session:
                session.execute(
                    insert(SubmissionAnswer.__table__),
                    [{"id": i, "submission_id": form.submission_id, "answer": []} for i in chunk],
                )
                session.execute(
                    insert(SheetTransaction.__table__),
                    [
                        {
                            "submission_answer_id": i,
                            "spread_sheet_id": key.spread_sheet_id,
                            "sheet_id": 0,
                            "type": TransactionType.ENQUEUED.name,
                            "updated_at": old,
                        }
                        for i in chunk
                    ],
                )
        services.store.push([(key, QUEUE)], ids)
        keys.append((key, ids))
    made = time.perf_counter() - started
    print(f"reconciler: {rows:,} old ENQUEUED rows over {links} buffers (made in {made:.0f} s)")
    for label, lose in (("nothing lost", 0), ("100 ids lost from one buffer", 100)):
        if lose:
            key, ids = keys[links // 2]
            client.ltrim(key.buf, 0, -lose - 1)
        client.config_resetstat()
        start = time.perf_counter()
        report = repair.reconcile(services)
        wall = time.perf_counter() - start
        redis_s = redis_usec(client) / 1e6
        print(
            f"  {label}: a pass takes {wall:.2f} s, of which Redis {redis_s * 1000:.2f} ms "
            f"(goal <= 1 s); re-pushed {report.answers} ids to {report.buffers} buffer(s)"
        )
        assert report.answers == lose, report
    key, ids = keys[0]
    sample = random.Random(4).sample(ids, 1000)
    client.config_resetstat()
    for answer_id in sample:
        client.lpos(key.buf, answer_id)
    per_id = redis_usec(client) / len(sample)
    print(
        f"  baseline, an LPOS per id (the previous design) on a {per_link:,}-id list: "
        f"{per_id:.0f} µs per id, {per_id * rows / 1e6:,.0f} s of Redis time for {rows:,} rows"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--buffers", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--links", type=int, default=100)
    args = parser.parse_args()
    logging.getLogger("sheetsync").setLevel(logging.ERROR)  # one warning per re-send
    print(f"scale benchmark on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    # A redis-server of its own: INFO commandstats counts every client of a server.
    local_redis = start_redis_server()
    try:
        with tempfile.TemporaryDirectory(prefix="sheetsync-scale-") as directory:
            url = f"sqlite:///{directory}/scale.db"
            configure(url, local_redis.url)
            bench_sweep(args.buffers)
            configure(url, local_redis.url)
            bench_reconcile(args.rows, args.links, url)
    finally:
        local_redis.stop()


if __name__ == "__main__":
    main()
