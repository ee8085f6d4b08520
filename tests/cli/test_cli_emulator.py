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

from sheets_emulator import __version__ as emulator_version
from sheets_emulator.cli import parser


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


def test_emulator_takes_every_option_of_the_emulators_own_command(cli: Cli) -> None:
    """The arguments go to sheets-emulator's parser: each quota option reaches the server."""
    quotas = {
        "read_per_account": 11,
        "write_per_account": 12,
        "read_per_project": 13,
        "write_per_project": 14,
        "window_s": 2.5,
    }
    options = [f"--{name.replace('_', '-')}={value}" for name, value in quotas.items()]
    process = subprocess.Popen(
        [str(SCRIPT), "emulator", "--host", "127.0.0.1", "--port", "0", *options],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # Sheets API emulator listening on http://...
        url = first.split()[-1]
        assert url.startswith("http://127.0.0.1:"), first
        with urllib.request.urlopen(f"{url}/_emulator/quotas", timeout=5) as response:
            assert json.loads(response.read()) == quotas
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_emulator_help_lists_the_emulators_own_options(cli: Cli, flag: str) -> None:
    result = cli.ok("emulator", flag)
    assert result.stdout.startswith("Usage: sheetsync emulator [OPTIONS]")
    assert "Run the Sheets API emulator (in memory) until interrupted." in result.stdout
    assert "--host HOST" in result.stdout and "[default: 127.0.0.1]" in result.stdout
    for action in parser()._actions:
        for option in action.option_strings:
            assert option in result.stdout, option


def test_emulator_version_is_the_emulators(cli: Cli) -> None:
    result = cli.ok("emulator", "--version")
    assert result.stdout.strip() == f"sheetsync emulator {emulator_version}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "argument --port: must be 0 to 65535, got 70000"),
        (["--window-s", "0"], "argument --window-s: must be above 0, got 0.0"),
        (["--read-per-account", "none"], "argument --read-per-account: invalid"),
        (["--nope"], "unrecognized arguments: --nope"),
    ],
)
def test_emulator_usage_errors_are_one_line(cli: Cli, args: list[str], message: str) -> None:
    result = cli("emulator", *args)
    assert result.code == 2
    [line] = result.error_lines
    assert line.startswith(f"error: {message}")
    assert line.endswith("(see `sheetsync emulator --help`)")
    assert result.stdout == ""


def test_emulator_help_without_the_emulator_package_still_answers(cli: Cli) -> None:
    code = (
        "import sys; sys.modules['sheets_emulator'] = None; "
        "from sheetsync.cli import main; sys.exit(main(['emulator', '--help']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert "Run the Sheets API emulator (in memory) until interrupted." in result.stdout
    assert result.stderr == ""
