"""A rolling upgrade: a worker of the previous version of the code (the commit before the
last one that changed ``sheetsync/``) runs beside one of this version, against this
version's schema, Redis and task messages; every answer lands once, and both did work."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.paths import ROOT
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.dev.local import WORKER_READY_MARKER
from sheetsync.dispatch import FLUSH_TASK

SHEETS = 4
PER_SHEET = 30


def git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


def previous_version() -> str:
    """The commit before the newest one that changed the package, or "" without history."""
    last = git("log", "-1", "--format=%H", "--", "sheetsync")
    return git("rev-parse", "--verify", "--quiet", f"{last}^") if last else ""


def extract(commit: str, into: Path) -> Path:
    """The ``sheetsync`` package as it was at ``commit``, in a directory of its own."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "sheetsync"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, archive.stderr.decode()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


@pytest.mark.slow  # two worker processes and a few seconds of flushing
def test_a_worker_of_the_previous_version_runs_beside_this_one(
    world, worker_processes, admin, tmp_path
):
    commit = previous_version()
    if not commit:
        pytest.skip("no git history here to take the previous version from")
    source = extract(commit, tmp_path / "previous")
    imported = subprocess.run(
        [sys.executable, "-c", "import sheetsync; print(sheetsync.__file__)"],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.startswith(str(source))  # it runs that code, not this checkout's
    workers = worker_processes(batch_size=10, flush_threshold=10)
    workers.start(1)  # this version: worker0.log
    workers.start(1, source=source)  # the previous one: worker1.log
    logs = [tmp_path / "worker0.log", tmp_path / "worker1.log"]
    wait_until(lambda: all(WORKER_READY_MARKER in log.read_bytes() for log in logs), timeout=60)
    form = world.form()
    sheets = [world.sheet(form) for _ in range(SHEETS)]
    ids = world.answers(form, PER_SHEET)
    # Appends take a while, so neither worker drains every buffer alone.
    admin.add_fault("values.append", SHEETS * PER_SHEET, "hang", seconds=0.2)
    emit_answers_submitted(ids)
    total = SHEETS * PER_SHEET
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": total}, timeout=120)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    for sheet in sheets:
        assert world.ids_in(sheet) == ids  # each answer once, in order
    for log in logs:  # both versions ran flushes, each its own code's
        text = log.read_text(errors="replace")
        assert f"Task {FLUSH_TASK}[" in text and " succeeded in " in text, log.name
        assert "Traceback" not in text, log.name
