"""``sheetsync demo``, the real command: run in a fresh directory as a user would, it
must land every answer once per linked sheet, in time, and leave no process behind.

The Redis is ``SHEETSYNC_TEST_DEMO_REDIS_URL`` (default db 12 on 127.0.0.1), a database
no other test uses; it is emptied before and after.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from sheetsync.dev.demo_data import expected_rows
from sheetsync.dev.local import free_port, redis_answers

DEFAULT_DEMO_REDIS_URL = "redis://127.0.0.1:6379/12"
SHEETSYNC = Path(sys.executable).with_name("sheetsync")
#: The demo promises to finish within a minute on a 2-core machine.
DEMO_BUDGET_S = 60.0
#: What a seeded personal-info value looks like: never in any output.
PII_PATTERN = re.compile(r"010-\d{4}-\d{4}|user\d+@example\.co\.kr")
SHEET_LINE = re.compile(r"^\s+sheet \d+\s+.*\s(\d+) rows$", re.MULTILINE)


@pytest.fixture
def demo_redis_url() -> Iterator[str]:
    url = os.environ.get("SHEETSYNC_TEST_DEMO_REDIS_URL", DEFAULT_DEMO_REDIS_URL)
    if not redis_answers(url):
        pytest.skip(f"no Redis at {url}")
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


def run_demo(workdir: Path, **variables: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``sheetsync demo`` in ``workdir`` with no SHEETSYNC_* but ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    env.update(variables)
    started = time.monotonic()
    result = subprocess.run(
        [str(SHEETSYNC), "demo"],
        check=False,
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_BUDGET_S * 2,
    )
    return result, time.monotonic() - started


def processes_in(directory: Path) -> list[str]:
    """Command lines of the processes whose working directory is ``directory`` (the
    demo's children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone, or not ours to read
            continue
        if cwd == directory:
            found.append(f"{entry.name}: {command}")
    return found


def described(result: subprocess.CompletedProcess[str], workdir: Path) -> str:
    log = workdir / ".demo" / "worker.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no worker log)"
    return f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\nworker log tail:\n{tail}"


def test_demo_lands_every_answer_once_per_sheet_and_cleans_up(
    tmp_path: Path, demo_redis_url: str
) -> None:
    result, elapsed = run_demo(tmp_path, SHEETSYNC_REDIS_URL=demo_redis_url)

    assert result.returncode == 0, described(result, tmp_path)
    counts = [int(n) for n in SHEET_LINE.findall(result.stdout)]
    assert len(counts) == 4, result.stdout
    assert sum(counts) == expected_rows()
    assert "DUPLICATES" not in result.stdout
    assert "429 responses: 0;" in result.stdout
    assert "/_emulator/spreadsheets/" in result.stdout
    assert "sheetsync demo --keep" in result.stdout
    assert elapsed < DEMO_BUDGET_S
    assert processes_in(tmp_path) == []
    assert (tmp_path / ".demo" / "sheetsync.db").exists()
    # Buffers drained; the demo's sheet caches and rate windows are gone too.
    client = redis.Redis.from_url(demo_redis_url)
    assert list(client.scan_iter("sheetsync:{*")) == []
    assert list(client.scan_iter("sheetsync:rate:account:*")) == []
    logs = result.stdout + result.stderr + (tmp_path / ".demo" / "worker.log").read_text()
    assert not PII_PATTERN.search(logs)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not on PATH")
def test_demo_starts_and_stops_its_own_redis_when_none_answers(tmp_path: Path) -> None:
    port = free_port()
    result, _ = run_demo(tmp_path, SHEETSYNC_REDIS_URL=f"redis://127.0.0.1:{port}/0")

    assert result.returncode == 0, described(result, tmp_path)
    assert "(a redis-server child)" in result.stdout
    assert sum(int(n) for n in SHEET_LINE.findall(result.stdout)) == expected_rows()
    assert processes_in(tmp_path) == []
    assert not redis_answers(f"redis://127.0.0.1:{port}/0")


def test_demo_without_redis_says_how_to_get_one(tmp_path: Path) -> None:
    port = free_port()
    result, _ = run_demo(
        tmp_path, SHEETSYNC_REDIS_URL=f"redis://127.0.0.1:{port}/0", PATH=str(tmp_path)
    )

    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: no Redis answers at 127.0.0.1:")
    assert "apt-get install redis-server" in lines[0]
    assert processes_in(tmp_path) == []
