"""Capacity: what one Redis primary and one worker process take, and the model built on
them (docs/operating/capacity.md).

Usage::

    python bench/bench_capacity.py

Sizes come from the environment (defaults in brackets):

1. **Emits a second, one Redis primary** (``BENCH_CAPACITY_CLIENTS`` [1,2,4],
   ``BENCH_CAPACITY_SECONDS`` [3]): client processes (spawned, each with its own
   connection) call the emit's Redis part, ``sheetsync.buffers.push.push`` (the enqueue
   script, one sheet per answer, one call per answer as the web app makes them) as fast
   as they can for the given seconds, against one redis-server the bench starts. Redis's
   CPU (``INFO cpu``), the clients' (their own process time) and the whole machine's
   (/proc/stat) over the same seconds say which side was the limit; Redis's CPU per emit
   is the figure to plan with. Baseline, same clients: a plain RPUSH of one id.
2. **Redis memory per waiting buffer and per waiting id** (``BENCH_CAPACITY_BUFFERS``
   [10000], ``BENCH_CAPACITY_IDS`` [200000], ids of ``BENCH_CAPACITY_ID_CHARS`` [36]
   characters, a UUID's): ``INFO memory`` ``used_memory`` before and after the enqueue
   script made that many buffers of one id each, after their flush tasks went to the
   broker (a db of the same server, as when the broker URL follows the Redis URL), and
   after that many more ids, one enqueue call each (the emit's arrival notes included),
   spread evenly over the buffers.
3. **Flush rows a second, per worker process** (``BENCH_CAPACITY_SHEETS`` [6],
   ``BENCH_CAPACITY_ROWS`` [10000] per sheet): a backlog pushed to sheets of distinct
   owners, appended to the Sheets emulator (in this process, as the other benches run it)
   by one real Celery worker with one pool process, then with two; answers and ledger in
   a scratch PostgreSQL database (``SHEETSYNC_TEST_POSTGRES_URL``, as bench_emit.py), the
   quota out of the way (limits set high in the settings and the emulator). From the
   push until every buffer is empty; the CPU the worker, the emulator and the whole
   machine used meanwhile (/proc) say what was busy. Then **runs a second** with one id
   each (``BENCH_CAPACITY_RUNS`` [150] buffers, their sheets' headers already written):
   what a trickle costs.
4. **The model** (bench/capacity_model.py): a table of example loads from these figures
   and the settings' defaults.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_pipeline import Stack  # noqa: E402
from bench_rows import DEFAULT_POSTGRES_URL, postgres_scratch  # noqa: E402
from capacity_model import Defaults, Measured, table  # noqa: E402
from capacity_redis import bench_emits, bench_memory, machine_busy_s  # noqa: E402

from sheets_emulator import EmulatorServer  # noqa: E402
from sheetsync import ledger  # noqa: E402
from sheetsync.dev.local import LocalRedis, start_redis_server, wait_until  # noqa: E402
from sheetsync.models import TransactionType  # noqa: E402
from sheetsync.redis_keys import BufferKey  # noqa: E402
from sheetsync.settings import Settings  # noqa: E402

#: The backlogs are due at once (the threshold); a buffer of one id after this.
FLUSH_DELAY_S = 0.2


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(f"BENCH_CAPACITY_{name}", default))


# -- 3. flush throughput --------------------------------------------------------------------


def workers_cpu_s(stack: Stack) -> float:
    """CPU seconds of every process in the workers' process groups (/proc)."""
    groups, ticks, total = {w.process.pid for w in stack.workers}, os.sysconf("SC_CLK_TCK"), 0
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) in groups:  # pgrp; utime and stime follow
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def make_backlog(
    stack: Stack, sheets: int, rows: int, prefix: str
) -> list[tuple[BufferKey, list[str]]]:
    """``sheets`` links of distinct owners, ``rows`` answers each, ENQUEUED in the ledger."""
    backlog = []
    for n in range(sheets):
        form, [link] = stack.form(f"{prefix}{n}")
        ids = stack.answers(form, rows, f"{prefix}{n}")
        key = BufferKey(form.owner_id, form.submission_id, *link)
        with stack.services.sessions.begin() as session:
            ledger.record(session, ids, key.spread_sheet_id, key.sheet_id, TransactionType.ENQUEUED)
        backlog.append((key, ids))
    return backlog


@dataclass(frozen=True)
class Drained:
    seconds: float
    workers_cpu_s: float  # the worker's process group
    emulator_cpu_s: float  # this process: the emulator's thread and the bench's polling
    machine_cpu_s: float  # every core, whoever used it (PostgreSQL, other work)

    def shares(self) -> str:
        return (
            f"CPU over it: the worker {self.workers_cpu_s / self.seconds:.0%} of a core, the "
            f"emulator {self.emulator_cpu_s / self.seconds:.0%}, the machine "
            f"{self.machine_cpu_s / self.seconds:.0%} of {os.cpu_count()} cores"
        )


def drain(stack: Stack, backlog: list[tuple[BufferKey, list[str]]]) -> Drained:
    """Push the backlog; how long until every buffer is empty and no job is left, and
    the CPU spent meanwhile."""
    from sheetsync.buffers.push import push

    client = stack.services.redis
    workers, own, machine = workers_cpu_s(stack), time.process_time(), machine_busy_s()
    started = time.perf_counter()
    for key, ids in backlog:
        push(stack.services.store, [(key, "sheetsync_priority")], ids)

    def done() -> bool:
        pipe = client.pipeline(transaction=False)
        for key, _ in backlog:
            pipe.exists(key.buf, key.job)
        return not any(pipe.execute())

    if not wait_until(done, 600, interval_s=0.02):
        raise SystemExit("bench_capacity: the backlog did not drain within 600 s")
    return Drained(
        time.perf_counter() - started,
        workers_cpu_s(stack) - workers,
        time.process_time() - own,
        machine_busy_s() - machine,
    )


def bench_flush(stack: Stack, database_url: str, processes: int, sheets: int, rows: int) -> float:
    stack.configure(flush_delay_s=FLUSH_DELAY_S, database_url=database_url)
    seeding = time.perf_counter()
    backlog = make_backlog(stack, sheets, rows, f"p{processes}s")
    seeding = time.perf_counter() - seeding
    stack.start_workers(1, concurrency=processes)
    drained = drain(stack, backlog)
    total = sheets * rows
    landed = sum(stack.rows((key.spread_sheet_id, key.sheet_id)) for key, _ in backlog)
    assert landed == total, (landed, total)
    requests = stack.admin.stats()["requests"]["by_kind"]
    print(
        f"  {processes} pool process{'es' if processes > 1 else ''}: {total:,} rows over "
        f"{sheets} sheets in {drained.seconds:.2f} s = {total / drained.seconds:,.0f} rows/s "
        f"({requests.get('values.append', 0)} appends; seeded in {seeding:.0f} s); the worker's "
        f"CPU {drained.workers_cpu_s / total * 1e6:.0f} µs a row; {drained.shares()}"
    )
    return total / drained.seconds


def bench_runs(stack: Stack, database_url: str, buffers: int) -> float:
    """One id per buffer, headers already written: runs a second of one pool process."""
    stack.configure(flush_delay_s=FLUSH_DELAY_S, database_url=database_url)
    stack.start_workers(1, concurrency=1)
    forms = [stack.form(f"r{n}") for n in range(buffers)]
    warm, measured = [], []
    for n, (form, [link]) in enumerate(forms):
        key = BufferKey(form.owner_id, form.submission_id, *link)
        first, second = stack.answers(form, 2, f"r{n}")
        with stack.services.sessions.begin() as session:
            ledger.record(
                session,
                [first, second],
                key.spread_sheet_id,
                key.sheet_id,
                TransactionType.ENQUEUED,
            )
        warm.append((key, [first]))
        measured.append((key, [second]))
    drain(stack, warm)  # each sheet's first run reads row 1 and writes the header
    drained = drain(stack, measured)
    runs = buffers / (drained.seconds - FLUSH_DELAY_S)
    print(
        f"  one id per buffer, {buffers} buffers, 1 pool process: {runs:,.1f} runs/s "
        f"({1000 / runs:.1f} ms a run: claim, SELECT, append, ledger, trim); the worker's CPU "
        f"{drained.workers_cpu_s / buffers * 1000:.1f} ms a run; {drained.shares()}"
    )
    return runs


# -- 4. the model, and main -----------------------------------------------------------------


def main() -> None:
    counts = [int(n) for n in os.environ.get("BENCH_CAPACITY_CLIENTS", "1,2,4").split(",")]
    seconds = float(os.environ.get("BENCH_CAPACITY_SECONDS", "3"))
    sheets, rows = env_int("SHEETS", 6), env_int("ROWS", 10_000)
    print(f"capacity benchmark on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    server: LocalRedis = start_redis_server(db=11)
    base = server.url.rpartition("/")[0]
    try:
        emits, redis_cpu_per_emit = bench_emits(f"{base}/2", counts, seconds)
        bench_memory(
            f"{base}/2",
            env_int("BUFFERS", 10_000),
            env_int("IDS", 200_000),
            env_int("ID_CHARS", 36),
        )
        database = os.environ.get("SHEETSYNC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
        print(
            "3. flush throughput, one Celery worker, PostgreSQL, the quota out of the way:",
            flush=True,
        )
        with (
            tempfile.TemporaryDirectory(prefix="sheetsync-capacity-") as workdir,
            EmulatorServer() as emu,
            postgres_scratch(database) as url,
        ):
            stack = Stack(Path(workdir), server.url, emu)
            try:
                one = bench_flush(stack, url, 1, sheets, rows)
                bench_flush(stack, url, 2, sheets, rows)
                runs = bench_runs(stack, url, env_int("RUNS", 150))
            finally:
                stack.stop_workers()
    finally:
        server.stop()
    measured = Measured(redis_cpu_per_emit_s=redis_cpu_per_emit, rows_per_s=one, runs_per_s=runs)
    defaults = Defaults.of(Settings.model_construct())  # the shipped defaults, not this env
    print(
        f"4. the model (docs/operating/capacity.md) from {redis_cpu_per_emit * 1e6:.1f} µs of "
        f"Redis CPU an emit ({emits:,.0f} emits/s measured), {one:,.0f} rows/s "
        f"and {runs:,.1f} runs/s a process; FLUSH_DELAY_S {defaults.flush_delay_s:g}, "
        f"FLUSH_THRESHOLD {defaults.flush_threshold}, "
        f"{defaults.writes_per_project_a_minute:g} writes/min a project, "
        f"{defaults.writes_per_account_a_minute:g} an account:"
    )
    for line in table(measured, defaults):
        print("  " + line)


if __name__ == "__main__":
    main()
