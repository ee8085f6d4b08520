"""``sheetsync demo``, the real command: run in a fresh directory as a user would, it
must land every answer of a valid owner once per linked sheet, park every answer of the
revoked owner in a PENDING dead letter, print commands that work, and leave no process
behind and no key in a Redis it did not start.

A shared Redis is database 12 of the test process's own redis-server
(``support.redis_dbs``), emptied before and after. One test looks at the Redis on
127.0.0.1:6379 on purpose: the demo must not write there.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from support.redis_dbs import DEMO_DB, redis_db_url
from support.waiting import wait_until

from sheets_emulator import EmulatorAdmin
from sheetsync.dev.demo_data import expected_rows
from sheetsync.dev.local import free_port, redis_answers
from sheetsync.redis_keys import BUFFER_INDEX, HEARTBEATS, heartbeat_key

#: The Redis a newcomer's machine may already run, which the demo must leave alone.
DEFAULT_PORT_REDIS_URL = "redis://127.0.0.1:6379/0"
SHEETSYNC = Path(sys.executable).with_name("sheetsync")
#: The demo promises to finish within a minute on a 2-core machine.
DEMO_BUDGET_S = 60.0
#: What a seeded personal-info value looks like: never in any output.
PII_PATTERN = re.compile(r"010-\d{4}-\d{4}|user\d+@example\.co\.kr")
SHEET_LINE = re.compile(r"^\s+sheet \d+\s+.*\s(\d+) rows$", re.MULTILINE)
OWN_REDIS_LINE = re.compile(r"^redis\s+(redis://\S+) \(its own redis-server", re.MULTILINE)
DEAD_LETTER_LINE = re.compile(
    r"^\s+dead letter (\d+)  owner demo_owner_4  CREDENTIAL, PENDING  50 answer ids",
    re.MULTILINE,
)
#: The revoked owner's form: answers trip_1 … trip_50.
REVOKED_ANSWER_IDS = {f"trip_{n}" for n in range(1, 51)}

#: Each test runs the real demo (its stack, a worker, beat; two tests share one run of a
#: newcomer's demo): long, so not in test-fast.
pytestmark = pytest.mark.slow

needs_redis_server = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not on PATH"
)


@pytest.fixture
def demo_redis_url() -> Iterator[str]:
    url = redis_db_url(DEMO_DB)
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@dataclass(frozen=True)
class DemoRun:
    """One ``sheetsync demo`` with its own redis-server, and what the Redis on
    127.0.0.1:6379 held just before it (key and heartbeat names; None if nothing
    answered there)."""

    workdir: Path
    result: subprocess.CompletedProcess[str]
    elapsed: float
    keys_before: set[bytes] | None
    workers_before: set[str] | None


@pytest.fixture(scope="session")
def default_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo as a newcomer runs it (no SHEETSYNC_* at all), run once for the whole
    test run: two tests look at the same run, whichever pytest process (xdist) gets
    there first runs it under a file lock and leaves its outcome for the other."""
    basetemp = tmp_path_factory.getbasetemp()
    # Under xdist each process's basetemp is a directory of the run's own.
    shared = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    workdir, outcome = shared / "default-demo", shared / "default-demo.json"
    with open(shared / "default-demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            workdir.mkdir(exist_ok=True)  # an earlier try that raised made it
            keys = workers = None
            if redis_answers(DEFAULT_PORT_REDIS_URL):
                client = redis.Redis.from_url(DEFAULT_PORT_REDIS_URL)
                keys, workers = key_names(client), heartbeat_names(client)
                client.close()
            result, elapsed = run_demo(workdir)
            outcome.write_text(
                json.dumps(
                    {
                        "returncode": result.returncode,
                        "stdout": result.stdout,
                        "stderr": result.stderr,
                        "elapsed": elapsed,
                        "keys_before": None if keys is None else [k.hex() for k in keys],
                        "workers_before": None if workers is None else sorted(workers),
                    }
                )
            )
    saved = json.loads(outcome.read_text())
    return DemoRun(
        workdir=workdir,
        result=subprocess.CompletedProcess(
            [str(SHEETSYNC), "demo"], saved["returncode"], saved["stdout"], saved["stderr"]
        ),
        elapsed=saved["elapsed"],
        keys_before=None
        if saved["keys_before"] is None
        else {bytes.fromhex(k) for k in saved["keys_before"]},
        workers_before=None if saved["workers_before"] is None else set(saved["workers_before"]),
    )


def clean_environment(**variables: str) -> dict[str, str]:
    """This process's environment without SHEETSYNC_*, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    env.update(variables)
    return env


def run_demo(workdir: Path, **variables: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``sheetsync demo`` in ``workdir`` with no SHEETSYNC_* but ``variables``."""
    started = time.monotonic()
    result = subprocess.run(
        [str(SHEETSYNC), "demo"],
        check=False,
        cwd=workdir,
        env=clean_environment(**variables),
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


def assert_no_personal_info(printed: str, workdir: Path) -> None:
    """Neither what the demo printed nor its worker's log holds an answer's value."""
    logs = printed + (workdir / ".demo" / "worker.log").read_text()
    assert not PII_PATTERN.search(logs)


def printed_command(stdout: str, pattern: str) -> str:
    """The command of a "try next" line (``  <command>  # <note>``) matching ``pattern``."""
    found = re.search(rf"^\s+({pattern})\s+# ", stdout, re.MULTILINE)
    assert found, f"no command matching {pattern!r} in:\n{stdout}"
    return found.group(1)


def run_printed(workdir: Path, source: str, command: str) -> str:
    """Run ``command`` as a user would in a new shell, ``source`` first; its stdout."""
    result = subprocess.run(
        ["bash", "-c", f"{source} && {command}"],
        check=False,
        cwd=workdir,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout


def run_printed_json(workdir: Path, source: str, command: str) -> Any:
    return json.loads(run_printed(workdir, source, f"{command} --json"))


def status_after_sourcing(
    workdir: Path, source: str, users_redis_url: str
) -> subprocess.CompletedProcess[str]:
    """``sheetsync status --json`` in a new shell whose SHEETSYNC_REDIS_URL (and broker)
    point at ``users_redis_url``, another Redis than the demo's, with ``source`` first."""
    return subprocess.run(
        ["bash", "-c", f"{source} && {SHEETSYNC} status --json"],
        check=False,
        cwd=workdir,
        env=clean_environment(
            SHEETSYNC_REDIS_URL=users_redis_url, SHEETSYNC_BROKER_URL=users_redis_url
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_status_says_the_demos_redis_is_gone(
    workdir: Path, source: str, users_redis_url: str
) -> None:
    """After the demo, ``sheetsync status`` with .demo/env fails in one line naming where
    the demo's Redis was: it never reports on the Redis the shell pointed at before."""
    result = status_after_sourcing(workdir, source, users_redis_url)
    assert result.returncode == 1, result.stdout
    [line] = result.stderr.strip().splitlines()
    stopped = workdir / ".demo" / "redis-stopped-with-the-demo.sock"
    assert line.startswith(f"error: cannot reach Redis at unix://{stopped} "), line
    assert result.stdout == ""


def key_names(client: redis.Redis) -> set[bytes]:
    return set(client.scan_iter(count=1000))


def heartbeat_names(client: redis.Redis) -> set[str]:
    names: list[bytes] = client.zrange(HEARTBEATS, 0, -1)  # type: ignore[assignment]
    return {name.decode() for name in names}


def test_demo_on_a_shared_redis_lands_every_answer_once_and_leaves_only_what_was_there(
    tmp_path: Path, demo_redis_url: str
) -> None:
    client = redis.Redis.from_url(demo_redis_url)
    # What a real deployment (and the web app) may keep in the same database.
    client.set("webapp:session:42", "kept")
    client.sadd("_kombu.binding.sheetsync_default", "sheetsync_default\x06\x16\x06\x16x")
    client.zadd(BUFFER_INDEX, {"sheetsync:{real_owner:form_1:sheet_1:0}": 1})
    seconds, _ = client.time()
    # Scored ahead, so the demo worker's pruning of stale heartbeats keeps it.
    client.zadd(HEARTBEATS, {"worker-real@prod": (seconds + 600) * 1000})
    client.hset(heartbeat_key("worker-real@prod"), mapping={"role": "worker", "pid": "1"})
    before = key_names(client)

    result, elapsed = run_demo(tmp_path, SHEETSYNC_REDIS_URL=demo_redis_url)

    assert result.returncode == 0, described(result, tmp_path)
    counts = [int(n) for n in SHEET_LINE.findall(result.stdout)]
    assert len(counts) == 5, result.stdout
    assert sum(counts) == expected_rows()
    assert "DUPLICATES" not in result.stdout
    assert "429 responses: 0;" in result.stdout
    assert "/_emulator/spreadsheets/" in result.stdout
    assert "(SHEETSYNC_REDIS_URL; the demo removes its keys at the end)" in result.stdout
    assert elapsed < DEMO_BUDGET_S
    assert processes_in(tmp_path) == []
    assert (tmp_path / ".demo" / "sheetsync.db").exists()
    # Exactly the keys that were there before, and none of the demo's members in them.
    assert key_names(client) == before
    assert client.zrange(BUFFER_INDEX, 0, -1) == [b"sheetsync:{real_owner:form_1:sheet_1:0}"]
    assert client.zrange(HEARTBEATS, 0, -1) == [b"worker-real@prod"]
    assert client.get("webapp:session:42") == b"kept"
    client.close()
    # Its keys are gone from that Redis: status on .demo/env does not report on it.
    source = printed_command(result.stdout, r"source \S+")
    assert_status_says_the_demos_redis_is_gone(tmp_path, source, demo_redis_url)
    assert_no_personal_info(result.stdout + result.stderr, tmp_path)


@needs_redis_server
def test_demo_with_its_own_redis_parks_the_revoked_owner_and_prints_commands_that_work(
    default_demo: DemoRun, demo_redis_url: str
) -> None:
    result, tmp_path = default_demo.result, default_demo.workdir

    assert result.returncode == 0, described(result, tmp_path)
    assert sum(int(n) for n in SHEET_LINE.findall(result.stdout)) == expected_rows()
    own_redis = OWN_REDIS_LINE.search(result.stdout)
    assert own_redis, result.stdout
    assert "2,050 answers to send" in result.stdout
    # Its worker runs beat (-B): sweeps, reconciles and due dead letters, as deployed.
    assert "beat: Starting..." in (tmp_path / ".demo" / "worker.log").read_text()
    assert not redis_answers(own_redis.group(1))
    assert processes_in(tmp_path) == []
    dead_letter = DEAD_LETTER_LINE.search(result.stdout)
    assert dead_letter, result.stdout
    entry_id = int(dead_letter.group(1))
    # The commands name this installation's script, and work as printed after the demo.
    source = printed_command(result.stdout, r"source \S+")
    dlq_list = printed_command(result.stdout, r"\S+ dlq list")
    dlq_show = printed_command(result.stdout, rf"\S+ dlq show {entry_id}")
    assert dlq_list == f"{SHEETSYNC} dlq list"
    assert f"`source {SHEETSYNC.with_name('activate')}`" in result.stdout
    assert f"{SHEETSYNC} demo --keep" in result.stdout
    listed = run_printed_json(tmp_path, source, dlq_list)
    assert [
        (e["id"], e["user_id"], e["reason"], e["status"], e["answer_count"])
        for e in listed["entries"]
    ] == [(entry_id, "demo_owner_4", "CREDENTIAL", "PENDING", 50)]
    shown = run_printed_json(tmp_path, source, dlq_show)
    assert set(shown["answer_ids"]) == REVOKED_ANSWER_IDS
    # The demo's Redis stopped with it: status says so instead of reporting on the one a
    # user's shell points at (here database 12 of the tests' redis-server).
    assert_status_says_the_demos_redis_is_gone(tmp_path, source, demo_redis_url)
    assert "`sheetsync status` needs the demo's Redis" in result.stdout
    assert_no_personal_info(result.stdout + result.stderr, tmp_path)


@needs_redis_server
def test_kept_demo_lets_the_printed_commands_reconnect_and_replay_the_revoked_owner(
    tmp_path: Path, demo_redis_url: str
) -> None:
    output = tmp_path / "demo.out"
    with open(output, "wb") as sink:
        demo = subprocess.Popen(
            [str(SHEETSYNC), "demo", "--keep"],
            cwd=tmp_path,
            env=clean_environment(),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "Press Ctrl-C to stop." in output.read_text() or demo.poll() is not None,
            timeout=DEMO_BUDGET_S,
        )
        stdout = output.read_text()
        assert demo.poll() is None, stdout
        source = printed_command(stdout, r"source \S+")
        assert f"{SHEETSYNC} status" in stdout
        # While it runs, status reports on the demo's own Redis, whatever the shell had.
        own_redis = OWN_REDIS_LINE.search(stdout)
        assert own_redis, stdout
        running = status_after_sourcing(tmp_path, source, demo_redis_url)
        assert running.returncode == 0, running.stderr
        assert json.loads(running.stdout)["redis_url"] == own_redis.group(1)
        reconnect = printed_command(stdout, r"\S+ credentials reconnect demo_owner_4")
        replay = printed_command(stdout, r"\S+ dlq replay --user demo_owner_4 --now")

        assert "VALID" in run_printed(tmp_path, source, reconnect)
        run_printed(tmp_path, source, replay)

        listed = run_printed_json(tmp_path, source, f"{SHEETSYNC} dlq list")
        assert [(e["user_id"], e["status"]) for e in listed["entries"]] == [
            ("demo_owner_4", "DONE")
        ]
        views = re.findall(r"(http://\S+)/_emulator/spreadsheets/(\S+)/sheets/(\d+)", stdout)
        emulator_url, spreadsheet_id, gid = views[-1]  # sheet 5, the revoked owner's
        values = EmulatorAdmin(emulator_url).sheet_values(spreadsheet_id, int(gid))
        assert sorted(row[0] for row in values[1:]) == sorted(REVOKED_ANSWER_IDS)
    finally:
        demo.terminate()
        code = demo.wait(timeout=DEMO_BUDGET_S)
    assert code == 0, output.read_text()
    assert "stopping everything the demo started" in output.read_text()
    assert processes_in(tmp_path) == []
    # The stack is gone: what is left to source points at the database, and at where the
    # demo's Redis was, so that status says it is gone.
    env_file = (tmp_path / ".demo" / "env").read_text()
    assert re.findall(r"^export (\w+)=", env_file, re.MULTILINE) == [
        "SHEETSYNC_DATABASE_URL",
        "SHEETSYNC_REDIS_URL",
        "SHEETSYNC_BROKER_URL",
    ]
    assert_status_says_the_demos_redis_is_gone(tmp_path, source, demo_redis_url)
    assert_no_personal_info(output.read_text(), tmp_path)


@needs_redis_server
def test_demo_leaves_no_key_in_the_redis_already_on_port_6379(default_demo: DemoRun) -> None:
    if default_demo.keys_before is None or default_demo.workers_before is None:
        pytest.skip("nothing answered on 127.0.0.1:6379 when the demo ran")
    result = default_demo.result
    client = redis.Redis.from_url(DEFAULT_PORT_REDIS_URL)

    assert result.returncode == 0, described(result, default_demo.workdir)
    assert OWN_REDIS_LINE.search(result.stdout), result.stdout
    assert key_names(client) - default_demo.keys_before == set()
    new_workers = heartbeat_names(client) - default_demo.workers_before
    assert not [name for name in new_workers if name.startswith("demo-")]
    client.close()


def test_demo_without_redis_server_says_how_to_get_one(tmp_path: Path) -> None:
    result, _ = run_demo(tmp_path, PATH=str(tmp_path))

    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: the demo starts a redis-server of its own, but ")
    assert "apt-get install redis-server" in lines[0]
    assert processes_in(tmp_path) == []


def test_demo_with_an_unreachable_redis_url_says_so_and_starts_none(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"

    result, _ = run_demo(tmp_path, SHEETSYNC_REDIS_URL=url)

    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: no Redis answers at SHEETSYNC_REDIS_URL={url}: start it, or unset "
        "SHEETSYNC_REDIS_URL and the demo starts a redis-server of its own"
    ]
    assert processes_in(tmp_path) == []
