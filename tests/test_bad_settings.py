"""A bad setting is one line on stderr and exit 1, from the worker, beat and the CLI alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("sheetsync")

BAD_SETTINGS = {
    "empty key list": ({"SHEETSYNC_PII_KEYS": ","}, "SHEETSYNC_PII_KEYS: "),
    "unsupported database": (
        {"SHEETSYNC_DATABASE_URL": "mysql://app@db/forms"},
        "SHEETSYNC_DATABASE_URL: ",
    ),
    "not a number": ({"SHEETSYNC_FLUSH_THRESHOLD": "abc"}, "SHEETSYNC_FLUSH_THRESHOLD: "),
    "delay past the visibility timeout": (
        {"SHEETSYNC_FLUSH_DELAY_S": "7200"},
        "SHEETSYNC_FLUSH_DELAY_S: ",
    ),
    "broker that is not Redis": (
        {"SHEETSYNC_BROKER_URL": "amqp://guest@localhost//"},
        "SHEETSYNC_BROKER_URL: ",
    ),
    "a key that is not urlsafe base64": (
        {"SHEETSYNC_PII_KEYS": "not a key!"},
        "SHEETSYNC_PII_KEYS: ",
    ),
    "an all-zero key": (
        {"SHEETSYNC_PII_KEYS": "A" * 43 + "="},
        "SHEETSYNC_PII_KEYS: ",
    ),
    "a webhook that is a file": (
        {"SHEETSYNC_ALERT_WEBHOOK_URL": "file:///etc/passwd"},
        "SHEETSYNC_ALERT_WEBHOOK_URL: ",
    ),
    "a console token too short to guard the console": (
        {"SHEETSYNC_WEB_TOKEN": "0123456789abcdef"},
        "SHEETSYNC_WEB_TOKEN: ",
    ),
    "a client secret sent to a plain-http endpoint": (
        {
            "SHEETSYNC_GOOGLE_CLIENT_SECRET": "real-secret",
            "SHEETSYNC_GOOGLE_API_ENDPOINT": "http://emulator:8085",
        },
        "SHEETSYNC_GOOGLE_API_ENDPOINT: ",
    ),
}

COMMANDS = {
    "worker": [sys.executable, "-m", "celery", "-A", "sheetsync.celery", "worker"],
    "beat": [sys.executable, "-m", "celery", "-A", "sheetsync.celery", "beat"],
    "cli": [str(SCRIPT), "status"],
}


@pytest.mark.parametrize("process", list(COMMANDS))
@pytest.mark.parametrize("case", list(BAD_SETTINGS))
def test_a_bad_setting_is_one_line(case: str, process: str, tmp_path: Path) -> None:
    variables, expected_start = BAD_SETTINGS[case]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    env.update(variables)
    result = subprocess.run(
        COMMANDS[process],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {expected_start}"), lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran
