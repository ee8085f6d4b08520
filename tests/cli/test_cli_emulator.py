"""`sheetsync emulator` (and `sheetsync demo` without the emulator package), through
the console script."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from support.cli import SCRIPT, Cli


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_emulator_serves_until_stopped(cli: Cli) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [str(SCRIPT), "emulator", "--port", str(port), "--write-per-account", "7"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stats = None
        deadline = time.monotonic() + 30
        while stats is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/_emulator/stats", timeout=2
                ) as response:
                    stats = json.loads(response.read())
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.2)
        assert stats is not None, "the emulator never answered"
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/_emulator/quotas", timeout=2
        ) as response:
            assert json.loads(response.read())["write_per_account"] == 7
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert f"SHEETSYNC_GOOGLE_API_ENDPOINT=http://127.0.0.1:{port}" in stderr


def test_emulator_on_a_taken_port_says_so_in_one_line(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("emulator", "--port", str(port))
    assert result.code == 1
    [line] = result.error_lines
    assert f"cannot serve on 127.0.0.1:{port}" in line


@pytest.mark.parametrize("command", ["emulator", "demo"])
def test_without_the_emulator_package_one_line_names_the_install(cli: Cli, command: str) -> None:
    # None in sys.modules is how Python blocks an import: as if it were not installed.
    code = (
        "import sys; sys.modules['sheets_emulator'] = None; "
        f"from sheetsync.cli import main; sys.exit(main([{command!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.endswith(
        "the Sheets API emulator is not installed: "
        "pip install sheetsync-emulator (from a checkout: pip install ./emulator)"
    )
