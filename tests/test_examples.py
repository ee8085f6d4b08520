"""examples/minimal.py when the row does not come: it names the cause. The example run as
the docs tell a reader to (their shell block, verbatim) is tests/docs/test_getting_started.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from support.paths import ROOT

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync.crypto import generate_key
from sheetsync.db import make_engine
from sheetsync.settings import NON_SETTING_VARIABLES

EXAMPLE = ROOT / "examples" / "minimal.py"
#: Far above what the example needs with a 0.5 s debounce; only a hang reaches it.
EXAMPLE_TIMEOUT_S = 120


@pytest.fixture
def example_env(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str, redis_url: str, emulator: EmulatorServer
) -> dict[str, str]:
    """The variables the docs have a reader export, and no other SHEETSYNC_* setting."""
    for name in list(os.environ):
        if name.startswith("SHEETSYNC_") and not name.startswith(NON_SETTING_VARIABLES):
            monkeypatch.delenv(name)
    return {
        "SHEETSYNC_DATABASE_URL": sqlite_url,
        "SHEETSYNC_REDIS_URL": redis_url,
        "SHEETSYNC_PII_KEYS": generate_key(),
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "example-client",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "example-secret",
        "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
        "SHEETSYNC_FLUSH_DELAY_S": "0.5",
    }


@pytest.fixture
def example_db(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()


def test_without_a_worker_the_example_says_so(
    example_env: dict[str, str], admin: EmulatorAdmin, example_db: Engine
) -> None:
    """No worker on the example's Redis: after its wait, the example names that cause (not
    a guess among several), and exits 1 with one line."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT,
        env={**os.environ, **example_env, "EXAMPLE_TIMEOUT_S": "2"},
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    [line] = run.stderr.splitlines()
    assert "did not reach the sheet within 2 s: no worker is running on Redis at" in line, line
    assert example_env["SHEETSYNC_REDIS_URL"] in line
    assert "celery -A sheetsync.celery worker" in line
