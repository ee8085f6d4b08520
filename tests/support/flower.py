"""Flower as compose runs it (``python -m sheetsync.celery.flower``, basic auth), in a
subprocess on a free port, and its Broker page read over HTTP."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from sheetsync.dev.local import free_port
from support.lifetime import dies_with_this_process
from support.paths import ROOT

AUTH = "operator:flower-test-password-0d9c1f4e7a2b8356"  # 32+ characters, as the shim asks


@dataclass(frozen=True)
class Flower:
    port: int
    log: Path

    def get(self, path: str) -> str:
        token = base64.b64encode(AUTH.encode()).decode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", headers={"Authorization": f"Basic {token}"}
        )
        with urllib.request.urlopen(request, timeout=5) as reply:
            return str(reply.read().decode())

    def broker_lists(self, queues: Iterable[str]) -> bool:
        """Whether the Broker page has a row for each queue: Flower writes them only
        after reading the queues' lengths from the broker ("No queue data is available."
        otherwise)."""
        try:
            page = self.get("/broker")
        except OSError:
            return False
        return all(f'<tr id="{queue}">' in page for queue in queues)


@contextmanager
def running_flower(env: dict[str, str], log_dir: Path) -> Iterator[Flower]:
    flower = Flower(free_port(), log_dir / "flower.log")
    with open(flower.log, "wb") as out:
        process = subprocess.Popen(
            dies_with_this_process([sys.executable, "-m", "sheetsync.celery.flower",
             f"--port={flower.port}", "--address=127.0.0.1", f"--basic-auth={AUTH}"]),
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        yield flower
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
