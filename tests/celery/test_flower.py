"""`make flower` runs `celery -A tasks flower`, and the flush tasks show in it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from contextlib import suppress

import pytest
from support.paths import ROOT
from support.waiting import wait_until

from sheetsync import emit_answer_submitted


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flower_tasks(port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/tasks", timeout=2) as reply:
            return json.loads(reply.read())
    except OSError:
        return {}


@pytest.mark.slow
def test_flush_tasks_show_in_flower(world, worker_processes, tmp_path):
    workers = worker_processes()
    port = free_port()
    log = open(tmp_path / "flower.log", "wb")  # noqa: SIM115
    flower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tasks",
            "flower",
            f"--port={port}",
            "--address=127.0.0.1",
        ],
        cwd=ROOT,
        env={**os.environ, **workers.env, "FLOWER_UNAUTHENTICATED_API": "true"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        workers.start(1)
        form = world.form()
        sheet = world.sheet(form)
        ids = world.answers(form, 5)
        wait_until(lambda: _up(port), timeout=30)

        def flushes_done():
            # Flower learns of a task from worker events: STARTED shows before SUCCESS.
            return [
                t
                for t in flower_tasks(port).values()
                if t.get("name") == "sheetsync.flush.run" and t.get("state") == "SUCCESS"
            ]

        # Flower's HTTP side can answer before its event receiver listens, so a first
        # flush may pass unseen: flush again (one answer, one flush) until one is seen.
        seen = []
        for answer_id in ids:
            emit_answer_submitted(answer_id)
            try:
                seen = wait_until(flushes_done, timeout=8)
                break
            except AssertionError:
                continue
        assert seen, "no flush task reached Flower"
        assert set(world.ids_in(sheet)) <= set(ids)
        assert seen[0]["uuid"].startswith(f"sheetsync:{{{form.owner_id}:")
    finally:
        with suppress(ProcessLookupError):
            os.killpg(flower.pid, signal.SIGTERM)
        flower.wait(timeout=15)
        log.close()


def _up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2):
            return True
    except OSError:
        return False
