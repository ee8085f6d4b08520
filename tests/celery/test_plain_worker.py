"""`celery -A tasks worker` exactly as users type it: no -Q, from a fresh directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support.paths import ROOT
from support.waiting import wait_until

from sheetsync.deadletters import replay, store
from sheetsync.models import DeadLetterReason, DeadLetterStatus, Plan
from sheetsync.redis_keys import BufferKey


def test_a_plain_worker_runs_every_queue(world, pipeline_env, tmp_path: Path):
    env = pipeline_env()
    workdir = tmp_path / "app"
    workdir.mkdir()
    # What a user has next to them: the repository's two shims, nothing else.
    shutil.copytree(ROOT / "tasks", workdir / "tasks")
    shutil.copy(ROOT / "celeryconfig.py", workdir)
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--loglevel=INFO"],
            cwd=workdir,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        pro = world.form("pro_owner", plan=Plan.PRO)
        free = world.form("free_owner", plan=Plan.FREE)
        pro_sheet, free_sheet = world.sheet(pro), world.sheet(free)
        [pro_id] = world.answers(pro, 1, prefix="pro")
        [free_id] = world.answers(free, 1, prefix="free")
        parked_ids = world.answers(free, 2, prefix="parked")
        key = BufferKey(
            free.owner_id, free.submission_id, free_sheet.spreadsheet_id, free_sheet.gid
        )
        with world.pipeline.sessions.begin() as session:
            store.park(session, key, parked_ids, DeadLetterReason.CREDENTIAL, "test", delay_s=0)

        from sheetsync import emit_answer_submitted

        emit_answer_submitted(pro_id)
        emit_answer_submitted(free_id)
        assert replay.dispatch_due(world.pipeline) == 1  # the replay goes to sheetsync_scheduled

        wait_until(lambda: world.ids_in(pro_sheet) == [pro_id], timeout=30)
        wait_until(lambda: sorted(world.ids_in(free_sheet)) == sorted([free_id, *parked_ids]))
        wait_until(
            lambda: (
                world.complete_replays() and world.dead_letters()[0].status is DeadLetterStatus.DONE
            )
        )
        log_text = log_path.read_text(errors="replace")
        for queue in ("sheetsync_priority", "sheetsync_default", "sheetsync_scheduled"):
            assert f".> {queue} " in log_text
        assert not list(workdir.glob("*.db")), "the worker created a database file in its cwd"
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(timeout=30)
