"""examples/minimal.py: when the row comes, it prints it; when it does not, it names the
cause; either way it leaves no key of its own in Redis and no file where it runs. The
example run as the docs tell a reader to (their shell block, verbatim) is
tests/docs/test_getting_started.py; the settings and clean-up that block documents are
checked here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import Engine, select
from support.markdown import code_blocks, page, section
from support.paths import ROOT

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync.crypto import generate_key
from sheetsync.db import make_engine
from sheetsync.models import GoogleCredential, SpreadSheet
from sheetsync.redis_keys import BUFFER_INDEX, DUE_INDEX
from sheetsync.settings import NON_SETTING_VARIABLES

EXAMPLE = ROOT / "examples" / "minimal.py"
#: Far above what the example needs with a 0.5 s debounce; only a hang reaches it.
EXAMPLE_TIMEOUT_S = 120
#: What every process logs at start with SHEETSYNC_DEVELOPMENT=true, as the docs' run sets.
DEVELOPMENT_WARNING = " WARNING sheetsync.startup: SHEETSYNC_DEVELOPMENT=true: "


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


def run_example(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )


def its_own_ids(database: Engine) -> set[str]:
    """The ids the example made up (its owner, form, sheet, Google account): every key it
    owns in Redis holds one of them."""
    with database.connect() as connection:
        links = connection.execute(select(SpreadSheet)).all()
        accounts = connection.scalars(select(GoogleCredential.google_account_id)).all()
    assert links and accounts
    ids = {id_ for link in links for id_ in (link.create_user_id, link.submission_id)}
    return ids | {link.spread_sheet_id for link in links} | set(accounts)


def keys_naming(url: str, ids: set[str]) -> list[str]:
    """The keys (and index members) of the Redis database at ``url`` that name one of ``ids``."""
    with redis.Redis.from_url(url) as client:
        names = [name.decode() for name in client.scan_iter(count=1000)]
        members = [
            f"{index} > {member.decode()}"
            for index in (BUFFER_INDEX, DUE_INDEX)
            for member in client.zrange(index, 0, -1)  # type: ignore[union-attr]
        ]
    return [name for name in names + members if any(id_ in name for id_ in ids)]


def test_without_a_worker_the_example_says_so(
    example_env: dict[str, str], admin: EmulatorAdmin, example_db: Engine, tmp_path: Path
) -> None:
    """No worker on the example's Redis: after its wait, the example names that cause (not
    a guess among several), and exits 1 with one line. It takes back its buffered id,
    and writes nothing where it runs."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    run = run_example({**os.environ, **example_env, "EXAMPLE_TIMEOUT_S": "2"}, workdir)
    assert run.returncode == 1, run.stdout + run.stderr
    # Besides the start-up's warning that SHEETSYNC_DEVELOPMENT=true is on.
    lines = [line for line in run.stderr.splitlines() if DEVELOPMENT_WARNING not in line]
    assert len(lines) == 1, run.stderr
    [line] = lines
    assert "did not reach the sheet within 2 s: no worker is running on Redis at" in line, line
    assert example_env["SHEETSYNC_REDIS_URL"] in line
    assert "celery -A sheetsync.celery worker" in line
    assert keys_naming(example_env["SHEETSYNC_REDIS_URL"], its_own_ids(example_db)) == []
    assert list(workdir.iterdir()) == []


def test_the_example_prints_its_row_then_leaves_no_key_of_its_own(
    pipeline_env: Callable[..., dict[str, str]], worker: Any, engine: Engine, tmp_path: Path
) -> None:
    """With a worker on its Redis the row lands and is printed; then the example removes
    every key named by its ids (its sheet's buffer, its Google account's rate windows,
    its entries in the indexes), once the worker is done with them, and wrote no file
    in its working directory."""
    env = pipeline_env(flush_delay_s=0.5)
    workdir = tmp_path / "run"
    workdir.mkdir()
    run = run_example({**os.environ, **env}, workdir)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^answer answer_\w+ is in spreadsheet ", run.stdout, re.MULTILINE)
    assert "Phone: 010-0000-0000" in run.stdout
    assert keys_naming(env["SHEETSYNC_REDIS_URL"], its_own_ids(engine)) == []
    assert list(workdir.iterdir()) == []


def minimal_integration() -> str:
    blocks = code_blocks(section(page("getting-started.md"), "## A minimal integration to run"))
    return "\n".join(block.text for block in blocks if block.language == "sh")


def test_the_documented_run_names_no_fixed_redis_port_or_file_in_the_checkout() -> None:
    """The shell block readers paste: its Redis URL and the emulator's port are settings
    with defaults (EXAMPLE_REDIS_URL, EXAMPLE_EMULATOR_PORT), its files go to a directory
    of their own (EXAMPLE_DIR), beat's schedule too; and the page says how to clean up."""
    text = minimal_integration()
    assert "export EXAMPLE_REDIS_URL=${EXAMPLE_REDIS_URL:-redis://127.0.0.1:6379/" in text
    assert "export EXAMPLE_EMULATOR_PORT=${EXAMPLE_EMULATOR_PORT:-8085}" in text
    assert "export EXAMPLE_DIR=${EXAMPLE_DIR:-$(mktemp -d" in text
    assert "SHEETSYNC_DATABASE_URL=sqlite:///$EXAMPLE_DIR/" in text
    assert "--schedule $EXAMPLE_DIR/" in text
    assert "sheetsync emulator --port $EXAMPLE_EMULATOR_PORT &" in text
    # No other fixed address, and no file in the working directory.
    without_defaults = re.sub(r"\$\{\w+:-[^}]*\}", "", text)
    assert "6379" not in without_defaults and "8085" not in without_defaults
    assert "$PWD" not in text
    cleanup = section(page("getting-started.md"), "## Cleaning up after the minimal integration")
    [block] = code_blocks(cleanup, "sh")
    assert 'rm -r "$EXAMPLE_DIR"' in block.text
    assert 'redis-cli -u "$EXAMPLE_REDIS_URL" flushdb' in block.text
