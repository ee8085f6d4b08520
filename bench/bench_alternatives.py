"""sheetsync against celery-batches and a task per answer, on the same burst to one sheet.

Usage::

    .venv/bin/python bench/bench_alternatives.py [--answers 10000] [--per-answer 2000]

One run, three legs, one table. Every leg gets the same answers (seeded once into a
SQLite file), one Celery worker process with a prefork pool of 1 (its CPU time is read
from /proc: the worker and its pool child), the same Redis and the same Sheets emulator:

1. sheetsync: the real pipeline, as ``bench_pipeline.bench_burst`` runs it (the emit's
   push per answer into one buffer, a real worker, FLUSH_DELAY_S=10, FLUSH_THRESHOLD=500).
2. celery-batches: a ``Batches`` task (flush_every=500, flush_interval=10 s), one
   ``apply_async`` per answer, one ``values.append`` per batch. celery-batches pins an
   older Celery than ``.venv``'s, so its worker runs in a virtualenv this script creates
   (``BENCH_CELERY_BATCHES_VENV``, by default under /tmp: not in the work tree).
3. a task per answer: a plain Celery task that appends its one row, run by ``.venv``'s
   Celery on ``--per-answer`` of the answers; its figures are scaled to the full burst.

The emulator enforces Google's quotas (60 writes a minute per account) in legs 1 and 2.
Leg 3 could not get through them in minutes, so its quotas are raised, and the time it
would take at Google's quota is printed beside it.

Starts its own ``redis-server`` on ``--redis-port`` (6394) and shuts it down at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from celery import Celery

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_pipeline import GENEROUS, Stack, wait_for  # noqa: E402

from sheets_emulator import EmulatorServer  # noqa: E402
from sheets_emulator.quotas import (  # noqa: E402
    DEFAULT_READS_PER_ACCOUNT,
    DEFAULT_READS_PER_PROJECT,
    DEFAULT_WRITES_PER_ACCOUNT,
    DEFAULT_WRITES_PER_PROJECT,
)
from sheetsync import ledger  # noqa: E402
from sheetsync.buffers.push import push  # noqa: E402
from sheetsync.dev.local import WorkerProcess  # noqa: E402
from sheetsync.dev.seed import SeededForm  # noqa: E402
from sheetsync.models import TransactionType  # noqa: E402
from sheetsync.redis_keys import BufferKey  # noqa: E402

#: Outside the work tree: .gitignore does not cover a .bench/ folder.
DEFAULT_VENV = Path(tempfile.gettempdir()) / "sheetsync-bench" / "venv-celery-batches"
# celery[redis], not celery and redis: kombu's Redis transport also needs packaging.
VENV_PACKAGES = ("celery-batches", "celery[redis]", "google-api-python-client", "google-auth")
FLUSH_EVERY = 500  # sheetsync's FLUSH_THRESHOLD
FLUSH_INTERVAL_S = 10.0  # sheetsync's FLUSH_DELAY_S
SHEET_TITLE = "Responses"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SETTLE_S = 2.0  # after the last row: time for a late duplicate to show


# -- worker processes -----------------------------------------------------------------------


def group_cpu_s(pgid: int) -> float:
    """User + system seconds of every process in the group, with their reaped children."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:  # fields[0] is field 3 of proc(5): state
            ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / CLOCK_TICKS


def start_worker(python: Path, env: dict[str, str], queue: str, log_path: Path) -> WorkerProcess:
    """``celery -A alternatives_tasks worker`` of ``python``'s environment, pool of 1."""
    name = f"{queue}-{os.getpid()}@%h"
    command = [
        str(python),
        "-m",
        "celery",
        "-A",
        "alternatives_tasks",
        "worker",
        "-P",
        "prefork",
        "-c",
        "1",
        "-Q",
        queue,
        "-n",
        name,
        "--without-gossip",
        "--without-mingle",
        "--loglevel=INFO",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=log_path.parent,
            env={**os.environ, **env, "PYTHONPATH": str(HERE)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = WorkerProcess(process, log_path, name)
    if not worker.wait_ready(60):
        worker.stop()
        raise SystemExit(f"{queue} worker did not start:\n{tail(log_path)}")
    return worker


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the celery-batches virtualenv ----------------------------------------------------------


def batches_venv(path: Path) -> tuple[Path, dict[str, str], str]:
    """The venv's python (created and filled if needed), its versions, and the
    Celery requirement celery-batches declares."""
    python = path / "bin" / "python"
    probe = [
        str(python),
        "-c",
        "import celery_batches, googleapiclient, google.oauth2, kombu.transport.redis",
    ]
    if not python.exists() or subprocess.run(probe, check=False, capture_output=True).returncode:
        print(f"creating {path} and installing {' '.join(VENV_PACKAGES)} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        installed = subprocess.run(
            [*pip, *VENV_PACKAGES], check=False, capture_output=True, text=True
        )
        if installed.returncode:
            raise SystemExit(f"pip install failed:\n{installed.stdout}{installed.stderr}")
    report = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m\n"
            "for name in ('celery-batches', 'celery', 'kombu', 'google-api-python-client'):\n"
            "    print(name, m.version(name))\n"
            "print('requires', *[r for r in m.requires('celery-batches') if 'celery' in r])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    versions = dict(line.split(" ", 1) for line in report if not line.startswith("requires "))
    requires = next(line.split(" ", 1)[1] for line in report if line.startswith("requires "))
    return python, versions, requires


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    answers: int
    appends: int = 0
    reads: int = 0
    other_requests: int = 0
    rate_limited: int = 0
    wall_s: float | None = None
    rows: int = 0
    distinct: int = 0
    cpu_s: float = 0.0
    produce_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def sheet_rows(stack: Stack, link: tuple[str, int], ids: set[str]) -> tuple[int, int]:
    """(rows holding one of ``ids``, distinct ids among them)."""
    landed = [row[0] for row in stack.admin.sheet_values(*link) if row and row[0] in ids]
    return len(landed), len(set(landed))


def measure(
    stack: Stack,
    result: Result,
    link: tuple[str, int],
    ids: list[str],
    send: Any,
    workers: list[WorkerProcess],
    timeout_s: float,
) -> None:
    """Send every id, wait until each has its row in the sheet, and fill ``result``."""
    wanted = set(ids)
    cpu_before = sum(group_cpu_s(worker.process.pid) for worker in workers)
    stack.admin.reset_stats()
    started = time.monotonic()  # the emulator's clock: it runs in this process
    for answer_id in ids:
        send(answer_id)
    result.produce_s = time.monotonic() - started
    seen_appends, checked_at, done_at = -1, 0.0, None
    while time.monotonic() - started < timeout_s:
        appends = int(stack.admin.stats()["requests"]["by_kind"].get("values.append", 0))
        now = time.monotonic()
        # Reading the whole sheet costs the emulator: at once when every row may be there
        # (an append is counted when it arrives, before its rows are in), else once a second.
        changed = appends != seen_appends
        if (changed and appends >= len(ids)) or (appends and now - checked_at >= 1.0):
            seen_appends, checked_at = appends, now
            if sheet_rows(stack, link, wanted)[1] == len(wanted):
                done_at = time.monotonic()
                break
        time.sleep(0.1)
    result.cpu_s = sum(group_cpu_s(worker.process.pid) for worker in workers) - cpu_before
    if done_at is None:
        result.notes.append(f"timed out after {timeout_s:.0f} s")
    else:
        time.sleep(SETTLE_S)
    stats = stack.admin.stats(times=True)
    if done_at is not None:
        # The arrival of the last request before the sheet was seen complete: the poll's
        # lag is not the pipeline's.
        last = max((t for t in stats["served_times"] if t <= done_at), default=done_at)
        result.wall_s = last - started
    kinds = stats["requests"]["by_kind"]
    result.appends = int(kinds.get("values.append", 0))
    result.reads = int(stats["requests"]["reads"])
    result.other_requests = int(stats["requests"]["total"]) - result.appends - result.reads
    result.rate_limited = int(stats["rate_limited"]["total"])
    result.rows, result.distinct = sheet_rows(stack, link, wanted)
    for worker in workers:
        worker.stop()
        if "Traceback" in tail(worker.log_path, 10**6):
            result.notes.append(f"errors in its log; last lines:\n{tail(worker.log_path)}")


def google_quotas(stack: Stack) -> None:
    stack.admin.set_quotas(
        read_per_account=DEFAULT_READS_PER_ACCOUNT,
        write_per_account=DEFAULT_WRITES_PER_ACCOUNT,
        read_per_project=DEFAULT_READS_PER_PROJECT,
        write_per_project=DEFAULT_WRITES_PER_PROJECT,
    )


def new_sheet(stack: Stack, account: str) -> tuple[str, int]:
    stack.admin.add_account(f"google-{account}", f"refresh-{account}")
    spreadsheet_id, gids = stack.admin.create_spreadsheet(
        f"google-{account}", f"Bench {account}", [SHEET_TITLE]
    )
    return spreadsheet_id, gids[SHEET_TITLE]


# -- the three legs -------------------------------------------------------------------------


def leg_sheetsync(stack: Stack, total: int) -> tuple[Result, SeededForm, list[str], Path]:
    """The real pipeline; returns the form, answer ids and database the other legs reuse."""
    stack.configure(
        flush_delay_s=FLUSH_INTERVAL_S,
        flush_threshold=FLUSH_EVERY,
        batch_size=5000,
        rate_limit_per_account=DEFAULT_WRITES_PER_ACCOUNT,
        rate_limit_per_project=DEFAULT_WRITES_PER_PROJECT,
    )
    google_quotas(stack)
    form, [link] = stack.form("burst")
    ids = stack.answers(form, total, "burst")
    key = BufferKey(form.owner_id, form.submission_id, *link)
    with stack.services.sessions.begin() as session:
        ledger.record(session, ids, key.spread_sheet_id, key.sheet_id, TransactionType.ENQUEUED)
    stack.start_workers(1)
    store = stack.services.store
    # A first flush to another sheet, so that the worker's one-off setup (its Sheets
    # client, first queries) is left out as the alternatives' is (worker_process_init).
    warm_form, [warm_link] = stack.form("warmup")
    warm_ids = stack.answers(warm_form, FLUSH_EVERY, "warmup")
    warm_key = BufferKey(warm_form.owner_id, warm_form.submission_id, *warm_link)
    with stack.services.sessions.begin() as session:
        ledger.record(session, warm_ids, *warm_link, TransactionType.ENQUEUED)
    push(store, [(warm_key, "sheetsync_priority")], warm_ids)
    wait_for(lambda: stack.rows(warm_link) == len(warm_ids), timeout=60, interval=0.2)
    route = [(key, "sheetsync_priority")]  # the form's owner is on a paying plan

    def send(answer_id: str) -> None:  # the emit's push, once per answer
        push(store, route, [answer_id])

    result = Result("sheetsync", total)
    measure(stack, result, link, ids, send, list(stack.workers), timeout_s=180)
    stack.workers.clear()
    database = Path(stack.env["SHEETSYNC_DATABASE_URL"].removeprefix("sqlite:///"))
    return result, form, ids, database


def alternative_env(
    stack: Stack, broker: str, database: Path, account: str, link: tuple[str, int]
) -> dict[str, str]:
    return {
        "ALT_BROKER_URL": broker,
        "ALT_DATABASE": str(database),
        "ALT_API_ENDPOINT": stack.emulator.url,
        "ALT_TOKEN_URI": f"{stack.emulator.url}/token",
        "ALT_REFRESH_TOKEN": f"refresh-{account}",
        "ALT_SPREADSHEET_ID": link[0],
        "ALT_RANGE": f"{SHEET_TITLE}!A1",
        "ALT_FLUSH_EVERY": str(FLUSH_EVERY),
        "ALT_FLUSH_INTERVAL_S": str(FLUSH_INTERVAL_S),
    }


def leg_celery_batches(
    stack: Stack, ids: list[str], database: Path, broker: str, python: Path, label: str
) -> Result:
    redis.Redis.from_url(broker).flushdb()
    stack.admin.reset_stats()
    google_quotas(stack)
    link = new_sheet(stack, "batches")
    env = alternative_env(stack, broker, database, "batches", link)
    # As celery-batches' docs say: a prefetch limit (multiplier x concurrency) below
    # flush_every starves the batch, which then goes every flush_interval with 4 answers.
    env["ALT_PREFETCH_MULTIPLIER"] = "0"  # no limit
    worker = start_worker(python, env, "alt_batches", stack.workdir / "batches-worker.log")
    producer = Celery("producer", broker=broker)
    task = producer.signature("alternatives.append_batch", queue="alt_batches")

    def send(answer_id: str) -> None:  # append_batch.apply_async((answer_id,))
        task.apply_async((answer_id,))

    result = Result(label, len(ids))
    try:
        measure(stack, result, link, ids, send, [worker], timeout_s=180)
    finally:
        worker.stop()
        producer.close()
    return result


def leg_task_per_answer(
    stack: Stack, ids: list[str], database: Path, broker: str, total: int
) -> Result:
    redis.Redis.from_url(broker).flushdb()
    stack.admin.reset_stats()
    stack.admin.set_quotas(
        read_per_account=GENEROUS,
        write_per_account=GENEROUS,
        read_per_project=GENEROUS,
        write_per_project=GENEROUS,
    )
    link = new_sheet(stack, "per-answer")
    env = alternative_env(stack, broker, database, "per-answer", link)
    worker = start_worker(
        Path(sys.executable), env, "alt_per_answer", stack.workdir / "per-answer-worker.log"
    )
    producer = Celery("producer", broker=broker)
    task = producer.signature("alternatives.append_one", queue="alt_per_answer")

    def send(answer_id: str) -> None:  # append_one.apply_async((answer_id,))
        task.apply_async((answer_id,))

    label = "task per answer" if len(ids) == total else f"task per answer ({len(ids):,} sent)"
    result = Result(label, len(ids))
    try:
        measure(stack, result, link, ids, send, [worker], timeout_s=420)
    finally:
        worker.stop()
        producer.close()
    google_quotas(stack)
    return result


# -- output ---------------------------------------------------------------------------------


def print_table(results: list[Result], total: int) -> None:
    print(f"{'':<30} {'Sheets requests':^28} {'wall s':>7} {'rows in sheet':>15} {'worker':>7}")
    print(
        f"{'':<30} {'appends':>7} {'reads':>6} {'total':>7} {'429s':>5} {'':>7} "
        f"{'(duplicates)':>15} {'CPU s':>7}"
    )
    for result in results:
        requests = result.appends + result.reads + result.other_requests
        wall = "-" if result.wall_s is None else f"{result.wall_s:.1f}"
        rows = f"{result.rows:,} ({result.rows - result.distinct:,})"
        print(
            f"{result.name:<30} {result.appends:>7,} {result.reads:>6,} {requests:>7,} "
            f"{result.rate_limited:>5} {wall:>7} {rows:>15} {result.cpu_s:>7.2f}"
        )
        scale = total / result.answers
        if scale != 1:
            wall = "-" if result.wall_s is None else f"{result.wall_s * scale:.0f}"
            print(
                f"{'  x' + format(scale, 'g') + ' = ' + format(total, ',') + ' (estimate)':<30} "
                f"{round(result.appends * scale):>7,} {round(result.reads * scale):>6,} "
                f"{round(requests * scale):>7,} {'':>5} {wall:>7} {'':>15} "
                f"{result.cpu_s * scale:>7.2f}"
            )


def print_notes(results: list[Result]) -> None:
    for result in results:
        extra = f"; {result.other_requests} other requests" if result.other_requests else ""
        print(
            f"  {result.name}: {result.answers:,} answers sent in {result.produce_s:.1f} s "
            f"by the producer; worker CPU {result.cpu_s / result.answers * 1000:.3f} ms "
            f"an answer{extra}"
        )
        if result.distinct != result.answers:
            print(f"    MISSING: {result.answers - result.distinct:,} answers have no row")
        for note in result.notes:
            print(f"    {note}")


@contextmanager
def own_redis(port: int) -> Iterator[str]:
    """A redis-server of our own on ``port`` (no persistence), shut down on the way out."""
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        client.ping()
    except redis.ConnectionError:
        pass
    else:
        raise SystemExit(f"something already answers on port {port}: pick another --redis-port")
    subprocess.run(
        [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "yes",
            "--loglevel",
            "warning",
        ],
        check=True,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        with suppress(redis.ConnectionError):  # it answers a shutdown by closing the connection
            client.shutdown(nosave=True)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=10_000, help="the burst (default 10,000)")
    parser.add_argument(
        "--per-answer",
        type=int,
        default=2_000,
        help="answers the task-per-answer leg sends; its figures are scaled to --answers",
    )
    parser.add_argument("--redis-port", type=int, default=6394)
    parser.add_argument(
        "--venv", type=Path, default=Path(os.environ.get("BENCH_CELERY_BATCHES_VENV", DEFAULT_VENV))
    )
    args = parser.parse_args()
    total = args.answers
    per_answer = min(args.per_answer, total)

    python, versions, requires = batches_venv(args.venv)
    import celery

    load = os.getloadavg()
    print(
        f"alternatives on a burst of {total:,} answers to one sheet; {os.cpu_count()} CPUs, "
        f"load {load[0]:.2f}"
    )
    print(
        f"celery-batches {versions['celery-batches']} requires {requires}; .venv has Celery "
        f"{celery.__version__}, so its worker runs in {args.venv} with Celery "
        f"{versions['celery']} (kombu {versions['kombu']}, google-api-python-client "
        f"{versions['google-api-python-client']})"
    )
    started = time.monotonic()
    with (
        own_redis(args.redis_port) as redis_base,
        tempfile.TemporaryDirectory(prefix="sheetsync-alt-") as workdir,
        EmulatorServer() as emulator,
    ):
        # sheetsync: buffers in db 1, broker db 0; the alternatives' brokers: db 2 and 3.
        stack = Stack(Path(workdir), f"{redis_base}/1", emulator)
        try:
            results = []
            print("1/3 sheetsync ...", flush=True)
            result, _, ids, database = leg_sheetsync(stack, total)
            results.append(result)
            print("2/3 celery-batches ...", flush=True)
            label = f"celery-batches {versions['celery-batches']}"
            results.append(
                leg_celery_batches(stack, ids, database, f"{redis_base}/2", python, label)
            )
            print(f"3/3 task per answer ({per_answer:,} answers) ...", flush=True)
            results.append(
                leg_task_per_answer(stack, ids[:per_answer], database, f"{redis_base}/3", total)
            )
        finally:
            stack.stop_workers()
    print()
    print_table(results, total)
    print()
    print("notes:")
    print_notes(results)
    at_google = total / DEFAULT_WRITES_PER_ACCOUNT
    print(
        f"  quotas: the emulator enforced Google's ({DEFAULT_WRITES_PER_ACCOUNT} writes/min per "
        f"account, {DEFAULT_WRITES_PER_PROJECT} per project) for sheetsync and celery-batches; "
        f"for the task per answer it was raised to {GENEROUS:,}/min. At Google's "
        f"{DEFAULT_WRITES_PER_ACCOUNT} writes/min per account, {total:,} appends take at least "
        f"{total:,} / {DEFAULT_WRITES_PER_ACCOUNT} = {at_google:.0f} min ({at_google / 60:.1f} h), "
        "and the naive task (no retry) would lose the rows of every append answered 429"
    )
    if per_answer != total:
        print(
            f"  the task per answer sent {per_answer:,} answers; its estimate scales them "
            f"linearly to {total:,} (the emulator's append also slows as the sheet grows)"
        )
    print(
        "  wall s: from the first answer sent to the arrival at the emulator of the request "
        "that completed the sheet (the producer's time included)"
    )
    print(
        "  worker CPU s: user+sys of the worker process and its pool child (/proc) over that "
        "time; each worker: one process, prefork pool of 1, log level INFO. One-off setup left "
        "out: sheetsync's worker first flushed 500 answers to another sheet; the "
        "alternatives' pool process built its Sheets client and values() resource and opened "
        "the database when it started"
    )
    print(
        "  rows: every leg wrote the same seeded answers; sheetsync decrypts personal info and "
        "orders columns by question, the alternatives write the stored values as they are"
    )
    print(f"whole run {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
