"""Pipeline figures on real parts: Redis, Celery worker processes, the Sheets emulator.

Usage::

    python bench/bench_pipeline.py [--only emit,latency,threshold,burst,backlog]

Prints figures, not pass/fail; the issue's targets are shown beside them. Uses the
Redis at ``SHEETSYNC_BENCH_REDIS_URL`` (default db 11 on 127.0.0.1:6379, flushed) or
starts a redis-server, a SQLite file in a temporary directory, and the emulator.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sheets_emulator import EmulatorAdmin, EmulatorServer  # noqa: E402
from sheetsync import crypto, ledger  # noqa: E402
from sheetsync.db import upgrade  # noqa: E402
from sheetsync.dev.local import WorkerProcess, ensure_redis, start_celery_worker  # noqa: E402
from sheetsync.dev.seed import SeededForm, link_sheet, seed_answers, seed_form  # noqa: E402
from sheetsync.models import TransactionType  # noqa: E402
from sheetsync.redis_keys import BufferKey  # noqa: E402

QUEUES = ("sheetsync_priority", "sheetsync_default", "sheetsync_scheduled")
GENEROUS = 1_000_000


def median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


class Stack:
    """Redis, a SQLite DB, the emulator and worker processes for one benchmark."""

    def __init__(self, workdir: Path, redis_url: str, emulator: EmulatorServer) -> None:
        self.workdir = workdir
        self.redis_url = redis_url
        self.emulator = emulator
        self.admin = EmulatorAdmin(emulator.url)
        self.workers: list[WorkerProcess] = []
        self.env: dict[str, str] = {}
        self._forms = 0

    def configure(self, **settings: Any) -> None:
        """A fresh database and Redis, and these settings for this process and workers."""
        self.stop_workers()
        self._forms += 1
        db = self.workdir / f"bench{self._forms}.db"
        base, _, number = self.redis_url.rpartition("/")
        self.env = {
            "SHEETSYNC_DATABASE_URL": f"sqlite:///{db}",
            "SHEETSYNC_REDIS_URL": self.redis_url,
            "SHEETSYNC_BROKER_URL": f"{base}/{int(number) - 1}",
            "SHEETSYNC_PII_KEYS": os.environ.setdefault("BENCH_PII_KEY", crypto.generate_key()),
            "SHEETSYNC_GOOGLE_API_ENDPOINT": self.emulator.url,
            "SHEETSYNC_GOOGLE_TOKEN_URI": self.emulator.token_uri,
            "SHEETSYNC_GOOGLE_CLIENT_ID": "bench",
            "SHEETSYNC_GOOGLE_CLIENT_SECRET": "bench",
            "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
            "SHEETSYNC_RATE_LIMIT_PER_ACCOUNT": str(GENEROUS),
            "SHEETSYNC_RATE_LIMIT_PER_PROJECT": str(GENEROUS),
        }
        self.env.update({f"SHEETSYNC_{k.upper()}": str(v) for k, v in settings.items()})
        os.environ.update(self.env)
        from sheetsync.crypto import reset_keyring
        from sheetsync.services import reset_services
        from sheetsync.settings import reset_settings

        reset_settings()
        reset_keyring()
        reset_services()
        from sheetsync.celery.application import reconfigure

        reconfigure()
        for url in (self.env["SHEETSYNC_REDIS_URL"], self.env["SHEETSYNC_BROKER_URL"]):
            redis.Redis.from_url(url).flushdb()
        upgrade(self.env["SHEETSYNC_DATABASE_URL"])
        self.admin.reset()
        self.admin.set_quotas(
            read_per_account=GENEROUS,
            write_per_account=GENEROUS,
            read_per_project=GENEROUS,
            write_per_project=GENEROUS,
        )

    @property
    def services(self) -> Any:
        from sheetsync.services import get_services

        return get_services()

    def start_workers(self, count: int, concurrency: int = 1) -> None:
        for n in range(count):
            worker = start_celery_worker(
                env=self.env,
                queues=QUEUES,
                concurrency=concurrency,
                log_path=self.workdir / f"worker{len(self.workers)}-{n}.log",
                cwd=ROOT,
            )
            self.workers.append(worker)
        for worker in self.workers:
            if not worker.wait_ready(60):
                raise SystemExit(f"worker did not start; see {worker.log_path}")

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()

    def form(self, owner: str, sheets: int = 1) -> tuple[SeededForm, list[tuple[str, int]]]:
        self.admin.add_account(f"google-{owner}", f"refresh-{owner}")
        with self.services.sessions.begin() as session:
            form = seed_form(session, owner_id=owner)
        links = []
        for n in range(sheets):
            spreadsheet_id, gids = self.admin.create_spreadsheet(
                f"google-{owner}", f"Bench {n}", ["Responses"]
            )
            links.append((spreadsheet_id, gids["Responses"]))
            with self.services.sessions.begin() as session:
                link_sheet(session, form, spreadsheet_id, gids["Responses"])
        return form, links

    def answers(self, form: SeededForm, n: int, prefix: str) -> list[str]:
        with self.services.sessions.begin() as session:
            return seed_answers(session, form, n, prefix=prefix)

    def rows(self, link: tuple[str, int]) -> int:
        return max(0, len(self.admin.sheet_values(*link)) - 1)


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.005) -> float:
    """Seconds until ``predicate()`` held (raises after ``timeout``)."""
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"timed out after {timeout}s")
        time.sleep(interval)
    return time.perf_counter() - started


# -- the benchmarks -----------------------------------------------------------------------


def bench_emit(stack: Stack, rounds: int = 3000) -> None:
    """The emit's Redis round trip against a bare RPUSH, measured interleaved."""
    from sheetsync import emit_answer_submitted
    from sheetsync.buffers.push import push

    stack.configure(flush_delay_s=600, flush_threshold=10**9)
    form, links = stack.form("emitter", sheets=3)
    one = [(BufferKey(form.owner_id, form.submission_id, *links[0]), "sheetsync_default")]
    three = [
        (BufferKey(form.owner_id, form.submission_id, *link), "sheetsync_default") for link in links
    ]
    client = stack.services.redis
    push(stack.services.store, three, ["warmup"])  # the jobs exist: later pushes just join
    samples: dict[str, list[int]] = {"rpush": [], "one": [], "three": []}
    clock = time.perf_counter_ns
    for n in range(rounds):
        answer_id = f"a{n}"
        start = clock()
        client.rpush("bench:bare", answer_id)
        samples["rpush"].append(clock() - start)
        start = clock()
        push(stack.services.store, one, [answer_id])
        samples["one"].append(clock() - start)
        start = clock()
        push(stack.services.store, three, [answer_id])
        samples["three"].append(clock() - start)
    rpush = median_us(samples["rpush"])
    print(f"emit push, Redis round trip (median of {rounds}, interleaved):")
    print(f"  bare RPUSH          {rpush:7.1f} µs")
    for name, label, target in (("one", "1 sheet ", 1.5), ("three", "3 sheets", 2.0)):
        value = median_us(samples[name])
        print(
            f"  emit, {label}     {value:7.1f} µs = {value / rpush:.2f}x RPUSH (target ≤ {target}x)"
        )

    ids = stack.answers(form, 300, "full")
    full: list[int] = []
    for answer_id in ids:
        start = clock()
        emit_answer_submitted(answer_id)
        full.append(clock() - start)
    print(
        f"  whole emit_answer_submitted (3 sheets, SQLite, ledger rows + push): "
        f"{median_us(full):.0f} µs median"
    )


def bench_latency(stack: Stack, runs: int = 5) -> None:
    """One answer alone: FLUSH_DELAY + how much after its emit."""
    from sheetsync import emit_answer_submitted

    delay = 2.0
    stack.configure(flush_delay_s=delay)
    stack.start_workers(1)
    latencies = []
    for n in range(runs):
        form, [link] = stack.form(f"solo{n}")
        [answer_id] = stack.answers(form, 1, f"solo{n}")
        started = time.perf_counter()
        emit_answer_submitted(answer_id)
        wait_for(lambda link=link: stack.rows(link) == 1, timeout=30)
        latencies.append(time.perf_counter() - started - delay)
    print(
        f"one answer alone (FLUSH_DELAY_S={delay:g}, {runs} runs): lands FLUSH_DELAY + "
        f"{statistics.median(latencies) * 1000:.0f} ms median, "
        f"{max(latencies) * 1000:.0f} ms worst (target < 1 s)"
    )


def bench_threshold(stack: Stack, runs: int = 3) -> None:
    """500 buffered: rows land how long after the 500th emit."""
    from sheetsync import emit_answer_submitted

    stack.configure(flush_delay_s=30, flush_threshold=500)
    stack.start_workers(1)
    times = []
    for n in range(runs):
        form, [link] = stack.form(f"thr{n}")
        ids = stack.answers(form, 500, f"thr{n}")
        for answer_id in ids[:-1]:
            emit_answer_submitted(answer_id)
        started = time.perf_counter()
        emit_answer_submitted(ids[-1])
        wait_for(lambda link=link: stack.rows(link) == 500, timeout=30)
        times.append(time.perf_counter() - started)
    print(
        f"500 buffered (FLUSH_DELAY_S=30): rows land {statistics.median(times) * 1000:.0f} ms "
        f"median after the 500th emit ({runs} runs; target < 2 s)"
    )


def bench_burst(stack: Stack, total: int = 10_000) -> None:
    """A burst of 10,000 answers to one sheet: how many requests."""
    from sheetsync.buffers.push import push

    stack.configure(flush_delay_s=10, flush_threshold=500, batch_size=5000)
    stack.start_workers(1)
    form, [link] = stack.form("burst")
    ids = stack.answers(form, total, "burst")
    key = BufferKey(form.owner_id, form.submission_id, *link)
    with stack.services.sessions.begin() as session:
        ledger.record(session, ids, key.spread_sheet_id, key.sheet_id, TransactionType.ENQUEUED)
    stack.admin.reset_stats()
    started = time.perf_counter()
    for answer_id in ids:  # the emit's push, one call per answer, as the web app makes it
        push(stack.services.store, [(key, "sheetsync_priority")], [answer_id])
    pushed = time.perf_counter() - started
    wait_for(lambda: _appends(stack) and stack.rows(link) == total, timeout=120, interval=0.2)
    elapsed = time.perf_counter() - started
    kinds = stack.admin.stats()["requests"]["by_kind"]
    print(
        f"burst of {total:,} answers to one sheet (pushed in {pushed:.1f} s, all rows in "
        f"{elapsed:.1f} s): {kinds.get('values.append', 0)} append requests (target ≤ 3), "
        f"{kinds.get('spreadsheets.getByDataFilter', 0)} read of the title, zone and "
        f"header (target ≤ 1), {kinds.get('spreadsheets.batchUpdate', 0)} header write"
    )


def bench_backlog(stack: Stack, answers: int = 50_000, sheets: int = 10) -> None:
    """A backlog over the rate limit: writes per window against the write limit (reads
    have windows of their own), and 429s."""
    from sheetsync.buffers.push import push

    window, limit, margin = 4.0, 20, 0.1
    stack.configure(
        rate_window_s=window,
        rate_margin_s=margin,
        rate_limit_per_account=limit,
        rate_limit_per_project=300,
        batch_size=500,
        flush_delay_s=0.2,
        lease_s=30,
    )
    per_sheet = answers // sheets
    targets = []
    for n in range(sheets):
        form, [link] = stack.form("backlog") if n == 0 else another_form(stack, "backlog")
        ids = stack.answers(form, per_sheet, f"b{n}")
        key = BufferKey(form.owner_id, form.submission_id, *link)
        with stack.services.sessions.begin() as session:
            ledger.record(session, ids, key.spread_sheet_id, key.sheet_id, TransactionType.ENQUEUED)
        targets.append((key, ids, link))
    stack.admin.set_quotas(
        read_per_account=limit,
        write_per_account=limit,
        read_per_project=300,
        write_per_project=300,
        window_s=window,
    )
    stack.admin.reset_stats()
    for key, ids, _ in targets:
        push(stack.services.store, [(key, "sheetsync_priority")], ids)
    stack.start_workers(2, concurrency=2)
    appends = sheets * -(-per_sheet // 500)
    # Watch the emulator's counters: reading whole sheets while it serves would slow it.
    wait_for(lambda: _appends(stack) >= appends, timeout=600, interval=0.2)
    stats = stack.admin.stats(times=True)
    landed = sum(stack.rows(link) for _, _, link in targets)
    times = stats["served_times_by_access"]["write"]
    gaps, used = limit_used(times, limit, window)
    print(
        f"backlog of {answers:,} answers over {sheets} sheets of one account "
        f"(window {window:g} s, limit {limit}, margin {margin:g} s): {len(times)} writes in "
        f"{times[-1] - times[0]:.1f} s; writes {limit} apart are {statistics.mean(gaps):.2f} s "
        f"apart on average (closest {min(gaps):.2f} s) = {used:.1%} of the write limit used "
        f"(target >= 95%); busiest window {stats['max_in_window']['writes']} writes, "
        f"{stats['rate_limited']['total']} x 429 (target 0); {landed:,} rows landed"
    )


def limit_used(times: list[float], limit: int, window: float) -> tuple[list[float], float]:
    """The gaps between requests ``limit`` apart, and the share of the limit used.

    Requests ``limit`` apart can be no closer than the window (the limiter's promise);
    how close they come on average is how much of the limit the pipeline used."""
    gaps = [times[i + limit] - times[i] for i in range(len(times) - limit)]
    return gaps, window / statistics.mean(gaps)


def _appends(stack: Stack) -> int:
    return int(stack.admin.stats()["requests"]["by_kind"].get("values.append", 0))


def another_form(stack: Stack, owner: str) -> tuple[SeededForm, list[tuple[str, int]]]:
    with stack.services.sessions.begin() as session:
        form = seed_form(session, owner_id=owner)
    spreadsheet_id, gids = stack.admin.create_spreadsheet(f"google-{owner}", "B", ["Responses"])
    with stack.services.sessions.begin() as session:
        link_sheet(session, form, spreadsheet_id, gids["Responses"])
    return form, [(spreadsheet_id, gids["Responses"])]


BENCHES = {
    "emit": bench_emit,
    "latency": bench_latency,
    "threshold": bench_threshold,
    "burst": bench_burst,
    "backlog": bench_backlog,
}


@contextmanager
def stack_for_bench() -> Iterator[Stack]:
    url = os.environ.get("SHEETSYNC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
    local_redis = ensure_redis(url)
    with tempfile.TemporaryDirectory(prefix="sheetsync-bench-") as workdir, EmulatorServer() as emu:
        stack = Stack(Path(workdir), local_redis.url, emu)
        try:
            yield stack
        finally:
            stack.stop_workers()
            local_redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(BENCHES))
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"pipeline benchmarks on {os.cpu_count()} CPUs, load {load[0]:.2f}")
    with stack_for_bench() as stack:
        for name in args.only.split(","):
            BENCHES[name](stack)
            stack.stop_workers()


if __name__ == "__main__":
    main()
