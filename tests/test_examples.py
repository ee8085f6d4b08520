"""examples/minimal.py, run the way README.md tells a reader to: the README's commands in
its order (read from its text), with the SHEETSYNC_* environment of the README, against
the emulator and a real worker process."""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from support.paths import ROOT
from support.processes import WorkerProcesses

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync.crypto import decrypt_answer_value, generate_key
from sheetsync.db import make_engine, session_factory
from sheetsync.models import (
    Question,
    QuestionType,
    SheetTransaction,
    SpreadSheet,
    SubmissionAnswer,
    TransactionType,
)
from sheetsync.settings import NON_SETTING_VARIABLES

EXAMPLE = ROOT / "examples" / "minimal.py"
SCRIPT = Path(sys.executable).with_name("sheetsync")
#: Far above what the example needs with a 0.5 s debounce; only a hang reaches it.
EXAMPLE_TIMEOUT_S = 120
WORKER_COMMAND = "celery -A sheetsync.celery worker"


def readme_commands() -> list[str]:
    """The commands README.md's "A minimal integration to run" has a reader run, in its
    order: the shell block's lines without exports, comments and a trailing ``&``."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### A minimal integration to run") :]
    block = section[section.index("```sh\n") + len("```sh\n") :]
    block = block[: block.index("```")]
    commands = []
    for line in block.splitlines():
        command = line.split("#", 1)[0].strip().removesuffix("&").strip()
        if command and not command.startswith(("source ", "export ")):
            commands.append(command)
    return commands


@pytest.fixture
def readme_env(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str, redis_url: str, emulator: EmulatorServer
) -> dict[str, str]:
    """The variables the README has a reader export, and no other SHEETSYNC_* setting."""
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


def test_minimal_example_lands_its_answer_in_the_sheet(
    readme_env: dict[str, str], admin: EmulatorAdmin, example_db: Engine, tmp_path: Path
) -> None:
    commands = readme_commands()
    [worker_line] = [c for c in commands if c.startswith(WORKER_COMMAND)]
    upgrade, worker, example = (
        commands.index(c)
        for c in ("sheetsync db upgrade", worker_line, "python examples/minimal.py")
    )
    assert upgrade < worker < example, commands  # a worker refuses a database without schema
    worker_args = shlex.split(worker_line.removeprefix(WORKER_COMMAND))
    assert worker_args == ["-B"], worker_line  # beat inside, so run the same here
    migrate = subprocess.run(
        [str(SCRIPT), "db", "upgrade"],
        env={**os.environ, **readme_env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stderr
    workers = WorkerProcesses(readme_env, tmp_path)
    workers.start(extra_args=(*worker_args, "--schedule", str(tmp_path / "beat-schedule")))
    try:
        run = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            cwd=ROOT,
            env={**os.environ, **readme_env},
            capture_output=True,
            text=True,
            timeout=EXAMPLE_TIMEOUT_S,
            check=False,
        )
    finally:
        workers.stop()
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\n{workers.logs()}"

    with session_factory(example_db)() as session:
        answer = session.scalars(select(SubmissionAnswer)).one()
        link = session.scalars(select(SpreadSheet)).one()
        questions = {q.type: q for q in session.scalars(select(Question))}
        ledger = session.scalars(select(SheetTransaction)).one()
    assert (ledger.submission_answer_id, ledger.type) == (answer.id, TransactionType.COMPLETED)
    assert f"answer {answer.id} is in spreadsheet {link.spread_sheet_id}" in run.stdout

    header, *rows = admin.sheet_values(link.spread_sheet_id, link.sheet_id)
    assert [row[0] for row in rows] == [answer.id]
    assert questions[QuestionType.JUMBOTRON].title not in header

    personal_info = questions[QuestionType.PERSONAL_INFO]
    stored = next(item["value"] for item in answer.answer if item["questionId"] == personal_info.id)
    cell = rows[0][header.index(personal_info.title)]
    assert cell != stored, "the sheet got the stored token, not the value"
    key = base64.urlsafe_b64decode(readme_env["SHEETSYNC_PII_KEYS"])
    assert cell == decrypt_answer_value(
        stored, answer_id=answer.id, question_id=personal_info.id, keys=[key]
    )


def test_without_a_worker_the_example_says_so(
    readme_env: dict[str, str], admin: EmulatorAdmin, example_db: Engine
) -> None:
    """No worker on the README's Redis: after its wait, the example names that cause (not
    a guess among several), and exits 1 with one line."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT,
        env={**os.environ, **readme_env, "EXAMPLE_TIMEOUT_S": "2"},
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    [line] = run.stderr.splitlines()
    assert "did not reach the sheet within 2 s: no worker is running on Redis at" in line, line
    assert readme_env["SHEETSYNC_REDIS_URL"] in line
    assert "celery -A sheetsync.celery worker" in line
