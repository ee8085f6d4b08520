"""The test suite's own guarantees: no process of a test run outlives it, and the tiers
select what they say (``support.tiers``: markers derived from what a test uses; the unit
tier's guard).

The runs checked here are small inner ``pytest`` processes over synthetic test files in
``tmp_path``, with this repository's settings (``pyproject.toml``) and ``tests/`` on the
path, so they exercise ``support.redis_dbs`` and ``support.tiers`` as the suite does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.paths import ROOT
from support.waiting import wait_until

#: A test that takes this process's redis-server (``support.redis_dbs``), says where it is
#: (its pid and port, and the pytest process's pid), then holds until killed if asked.
HOLDS_A_REDIS = """
import os
import time
from pathlib import Path

from support import redis_dbs


def test_holds_a_redis():
    url = redis_dbs.pipeline_redis_url()
    port = url.rsplit(":", 1)[1].split("/")[0]
    Path(os.environ["WHERE"]).write_text(f"{redis_dbs.server_pid()} {port} {os.getpid()}")
    if os.environ.get("HOLD"):
        time.sleep(120)
"""


def inner_pytest(
    tmp_path: Path, source: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``pytest`` over one synthetic test file, in a session of its own (so a signal to it
    reaches no one else); output in ``tmp_path/inner.log``."""
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(textwrap.dedent(source))
    environment = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT / "tests")}
    environment.pop("PYTEST_ADDOPTS", None)
    log = open(tmp_path / "inner.log", "w")  # noqa: SIM115
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    return subprocess.Popen(
        [*command, "--rootdir", str(ROOT), "-p", "no:cacheprovider", *args, str(test_file)],
        cwd=tmp_path,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PDEATHSIG: Linux")
@pytest.mark.parametrize("ending", ["exits", "SIGTERM", "SIGKILL", "xdist worker SIGKILL"], ids=str)
def test_no_redis_server_outlives_the_pytest_process_that_started_it(
    tmp_path: Path, ending: str
) -> None:
    where = tmp_path / "where"
    hold = ending != "exits"
    xdist = ["-n", "1"] if ending.startswith("xdist") else []
    inner = inner_pytest(
        tmp_path, HOLDS_A_REDIS, "-q", *xdist, env={"WHERE": str(where), "HOLD": "1" * hold}
    )
    try:
        assert wait_until(where.exists, 60), (tmp_path / "inner.log").read_text()
        assert wait_until(lambda: len(where.read_text().split()) == 3, 5)
        redis_pid, port, pytest_pid = map(int, where.read_text().split())
        assert running(redis_pid) and answers(port)
        if hold:
            sig = signal.SIGTERM if ending == "SIGTERM" else signal.SIGKILL
            os.kill(pytest_pid, sig)  # the process that started the redis-server, alone
        inner.wait(timeout=60)
    finally:
        if inner.poll() is None:
            os.killpg(inner.pid, signal.SIGKILL)
            inner.wait()
    gone = wait_until(lambda: not running(redis_pid) and not answers(port), 10)
    if not gone:  # do not leave it behind either
        os.kill(redis_pid, signal.SIGKILL)
    assert gone, f"the redis-server {redis_pid} on port {port} outlived pytest ({ending})"
