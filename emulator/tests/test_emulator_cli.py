"""The ``sheets-emulator`` command (``python -m sheets_emulator``): options, refusals, stop."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys

from sheets_emulator import EmulatorAdmin, EmulatorServer, __version__

COMMAND = [sys.executable, "-m", "sheets_emulator"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_it_serves_with_its_quota_options_until_sigterm() -> None:
    process = subprocess.Popen(
        [*COMMAND, "--port", "0", "--write-per-account", "7", "--window-s", "2.5"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": ""},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("Sheets API emulator listening on http://127.0.0.1:")
        url = line.split()[-1]
        quotas = EmulatorAdmin(url).quotas()
        assert (quotas["write_per_account"], quotas["window_s"]) == (7, 2.5)
        assert quotas["read_per_account"] == 60
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_remote_host_needs_allow_remote() -> None:
    result = run("--host", "0.0.0.0", "--port", "0")

    assert result.returncode == 2
    assert "0.0.0.0 is not a loopback address" in result.stderr
    assert "--allow-remote" in result.stderr.splitlines()[-1]


def test_bad_options_are_usage_errors() -> None:
    assert "must be at least 1, got 0" in run("--read-per-account", "0").stderr
    assert "must be 0 to 65535" in run("--port", "70000").stderr
    assert run("--window-s", "-1").returncode == 2


def test_a_taken_port_is_one_line(emulator_server: EmulatorServer) -> None:
    port = str(emulator_server.port)

    result = run("--port", port)

    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"sheets-emulator: cannot serve on 127.0.0.1:{port}")


def test_version_and_help() -> None:
    assert run("--version").stdout.strip() == f"sheets-emulator {__version__}"
    assert importlib.metadata.version("sheetsync-emulator") == __version__  # one source
    usage = run("--help").stdout
    for option in ("--host", "--port", "--allow-remote", "--read-per-project", "--window-s"):
        assert option in usage


def test_it_stands_without_sheetsync() -> None:
    # None in sys.modules blocks an import, as if sheetsync were not installed.
    code = (
        "import sys, importlib, pkgutil\n"
        "sys.modules['sheetsync'] = None\n"
        "import sheets_emulator\n"
        "for found in pkgutil.walk_packages(sheets_emulator.__path__, 'sheets_emulator.'):\n"
        "    if found.name != 'sheets_emulator.__main__':\n"
        "        importlib.import_module(found.name)\n"
        "with sheets_emulator.EmulatorServer() as server:\n"
        "    print(sheets_emulator.EmulatorAdmin(server.url).quotas()['read_per_account'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )

    assert (result.returncode, result.stdout.strip()) == (0, "60"), result.stderr
