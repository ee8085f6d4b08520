"""Workers told to stop (SIGTERM to the main process, as Kubernetes sends it) in bursts
while a backlog over several sheets drains, then replaced: every answer lands once, and
each exits within the grace period the settings call for."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.celery.shutdown import grace_period_s
from sheetsync.dev.local import WORKER_READY_MARKER
from sheetsync.settings import get_settings

SHEETS = 6
PER_SHEET = 120
BATCH = 20
#: Each append takes this long in the emulator, so the drain outlasts the bursts.
APPEND_S = 0.4


def ready(workers, count: int) -> bool:
    """Whether the first ``count`` workers started are consuming (a worker SIGTERMed
    before Celery set its handlers dies of it, having claimed nothing)."""
    logs = [workers.log_dir / f"worker{n}.log" for n in range(count)]
    return all(WORKER_READY_MARKER in log.read_bytes() for log in logs)


def stop(procs: list[subprocess.Popen[bytes]]) -> float:
    """SIGTERM each worker's main process at once; the slowest one's exit time (s)."""
    told = time.monotonic()
    for proc in procs:
        os.kill(proc.pid, signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=5 * grace_period_s(get_settings()))
        assert proc.returncode == 0
    return time.monotonic() - told


@pytest.mark.slow  # about 15 s of worker processes
@pytest.mark.timing  # each exit within the grace period
def test_sigterm_bursts_lose_and_duplicate_nothing(world, worker_processes, admin):
    from sheetsync.services import get_services

    workers = worker_processes(batch_size=BATCH, flush_threshold=BATCH)
    pipeline = get_services()
    form = world.form()
    sheets = [world.sheet(form) for _ in range(SHEETS)]
    ids = world.answers(form, PER_SHEET)
    total = SHEETS * PER_SHEET
    admin.add_fault("values.append", total, "hang", seconds=APPEND_S)  # committed after
    first = workers.start(3, concurrency=2)
    wait_until(lambda: ready(workers, 3), timeout=60)
    emit_answers_submitted(ids)

    def landed() -> int:
        return world.ledger_counts().get("COMPLETED", 0)

    wait_until(lambda: landed() >= total // 5, timeout=60)
    took = [stop(first[:2])]
    replacements = workers.start(2, concurrency=2)
    wait_until(lambda: landed() >= total // 2 and ready(workers, 5), timeout=60)
    took.append(stop([first[2], replacements[0]]))
    workers.start(1, concurrency=2)

    wait_until(lambda: not world.leftover_keys() and landed() == total, timeout=120)
    for sheet in sheets:
        assert world.ids_in(sheet) == ids  # each answer once, in order
    assert world.ledger_counts() == {"COMPLETED": total}
    bound = grace_period_s(pipeline.settings)
    assert max(took) <= bound, (took, bound)
    assert "the worker is stopping; handing the buffer on" in workers.logs()
