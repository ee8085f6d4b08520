"""The test suite's own guarantees: no process of a test run outlives it, and the tiers
select what they say (``support.tiers``: markers derived from what a test uses; the unit
tier's guard).

The runs checked here are small inner ``pytest`` processes over synthetic test files in
``tmp_path``, with this repository's settings (``pyproject.toml``) and ``tests/`` on the
path, so they exercise ``support.redis_dbs`` and ``support.tiers`` as the suite does.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import tiers
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


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("setpriv") is None,
    reason="/proc and the parent-death signal (util-linux's setpriv): Linux",
)
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


# -- the tiers ------------------------------------------------------------------------------


def synthetic(source: str) -> dict[str, Any]:
    """The functions of ``source``, as if defined in a module of tests/ (this one): the
    tests below name them through this dict only, so their own markers stay their own."""
    namespace: dict[str, Any] = {"__name__": __name__}
    exec(textwrap.dedent(source), namespace)
    return namespace


CODE = synthetic(
    """
    import subprocess
    from support import redis_dbs
    from support.cli import installed_script
    from support.redis_dbs import pipeline_redis_url
    from sheets_emulator import EmulatorServer as Sheets

    def runs_the_cli():
        subprocess.run(["sheetsync", "--version"], check=True)

    def a_helper_two_calls_down():
        return runs_the_cli()

    def test_through_a_helper():
        a_helper_two_calls_down()

    def test_takes_redis():
        return redis_dbs.redis_db_url(3)

    def a_fixture_with_redis():
        yield pipeline_redis_url()

    def test_serves_sheets():
        with Sheets():
            pass

    def test_computes():
        return sorted([3, 1, 2])

    def test_runs_the_installed_script(cli):
        installed_script(cli).ok("--version")
    """
)


@pytest.mark.parametrize(
    ("test", "fixtures", "expected"),
    [
        pytest.param("test_computes", {}, set(), id="plain"),
        pytest.param("test_through_a_helper", {}, {"process"}, id="subprocess-in-a-helper"),
        pytest.param("test_takes_redis", {}, {"redis"}, id="redis-dbs"),
        pytest.param("test_serves_sheets", {}, {"emulator"}, id="emulator-renamed"),
        pytest.param(
            "test_computes",
            {"a_fixture_with_redis": CODE["a_fixture_with_redis"]},
            {"redis"},
            id="a-fixtures-code",
        ),
        pytest.param(
            "test_computes", {"redis_url": None, "tmp_path": None}, {"redis"}, id="redis_url"
        ),
        pytest.param(
            "test_computes", {"worker_processes": None}, {"worker"}, id="worker_processes"
        ),
        pytest.param(
            "test_computes",
            {"cli": None, "redis_db": None, "postgres_url": None},
            {"redis", "postgres"},
            id="cli-in-process-postgres_url",
        ),
        pytest.param(
            "test_runs_the_installed_script",
            {"cli": None, "redis_db": None},
            {"redis", "process"},
            id="cli-of-the-installed-script",
        ),
        pytest.param("test_computes", {"compose": None}, {"docker"}, id="compose"),
    ],
)
def test_markers_come_from_the_fixtures_and_the_code_a_test_uses(
    test: str, fixtures: dict[str, Any], expected: set[str]
) -> None:
    functions = [CODE[test], *(f for f in fixtures.values() if f is not None)]
    assert tiers.markers_for(fixtures, functions, {}) == expected


def test_a_test_on_postgresql_is_marked_postgres() -> None:
    assert tiers.markers_for([], [CODE["test_computes"]], {"db_url": "postgres"}) == {"postgres"}
    assert tiers.markers_for([], [CODE["test_computes"]], {"db_url": "sqlite"}) == set()


def test_the_tests_of_this_run_carry_the_markers_of_what_they_start(
    request: pytest.FixtureRequest,
) -> None:
    """The hook marked the tests of this run: this module's, and the suite's fixtures."""
    marks = {
        item.nodeid: {mark.name for mark in item.iter_markers()} for item in request.session.items
    }
    assert "unit" in marks[request.node.nodeid]
    for nodeid, names in marks.items():
        if "test_no_redis_server_outlives" in nodeid:  # an inner pytest: a subprocess
            assert "process" in names and "unit" not in names, nodeid
        if "unit" in names:
            assert not names & tiers.NOT_UNIT, nodeid


#: Tests the names cannot see through (dynamic calls): the guard of a unit run must.
SNEAKY = """
import importlib


def test_computes():
    assert sorted([2, 1]) == [1, 2]


def test_runs_a_program_by_another_name():
    getattr(importlib.import_module("sub" + "process"), "run")(["true"], check=True)


def test_asks_for_redis_by_another_name():
    getattr(importlib.import_module("support.redis_dbs"), "pipeline_" + "redis_url")()
"""


def test_a_unit_run_fails_a_test_that_starts_a_process_or_asks_for_redis(tmp_path: Path) -> None:
    inner = inner_pytest(tmp_path, SNEAKY, "-p", "support.tiers", "-m", "unit", "-rA")
    try:
        inner.wait(timeout=120)
    finally:
        if inner.poll() is None:
            os.killpg(inner.pid, signal.SIGKILL)
            inner.wait()
    output = (tmp_path / "inner.log").read_text()
    assert inner.returncode == 1, output
    outcomes = dict(
        (match.group(2), match.group(1))
        for match in re.finditer(r"^(PASSED|FAILED) \S*::(\w+)", output, re.MULTILINE)
    )
    assert outcomes == {
        "test_computes": "PASSED",
        "test_runs_a_program_by_another_name": "FAILED",
        "test_asks_for_redis_by_another_name": "FAILED",
    }, output
    assert "is in the unit tier (no server, no process) but ran true" in output
    assert "asked for Redis (support.redis_dbs) (in call)" in output
    assert "unit tier: pid" in output  # and, after the run, the redis-server it started
