"""Running the real ``sheetsync`` console script from tests, and seeding dead letters."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sheetsync.db import make_engine
from sheetsync.models import (
    DeadLetter,
    DeadLetterAnswer,
    DeadLetterReason,
    DeadLetterStatus,
    utcnow,
)

#: The console script under test, next to the interpreter running the tests.
SCRIPT = Path(sys.executable).with_name("sheetsync")
#: Seconds any one command may take.
COMMAND_TIMEOUT_S = 60


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@dataclass
class Cli:
    """Runs the console script with this test's environment."""

    env: dict[str, str]
    database_url: str
    sessions: sessionmaker[Session]
    redis: redis.Redis
    calls: list[list[str]] = field(default_factory=list)

    def __call__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        unset: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> Result:
        """Run ``sheetsync *args`` with ``env`` added and the ``unset`` variables removed."""
        self.calls.append(list(args))
        variables = {**self.env, **(env or {})}
        for name in unset:
            variables.pop(name, None)
        completed = subprocess.run(
            [str(SCRIPT), *args],
            env=variables,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return Result(completed.returncode, completed.stdout, completed.stderr)

    def ok(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        unset: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> Result:
        """Run and insist on exit 0 (showing stderr when it is not)."""
        result = self(*args, env=env, unset=unset, cwd=cwd)
        assert result.code == 0, f"sheetsync {' '.join(args)} -> {result.code}: {result.stderr}"
        return result

    def add_dead_letter(self, **fields: Any) -> int:
        """Insert one DeadLetter row (defaults: a PENDING credential entry due in 7 days)."""
        now = utcnow()
        values: dict[str, Any] = {
            "user_id": "user_1",
            "submission_id": "form_1",
            "spread_sheet_id": "sheet_abc",
            "sheet_id": 0,
            "reason": DeadLetterReason.CREDENTIAL,
            "error_message": "invalid_grant: Token has been expired or revoked.",
            "attempts": 0,
            "status": DeadLetterStatus.PENDING,
            "next_attempt_at": now + timedelta(days=7),
            "created_at": now,
            "updated_at": now,
        }
        values.update(fields)
        answer_ids = values.pop("answer_ids", ["ans_1", "ans_2"])
        with self.sessions.begin() as session:
            entry = DeadLetter(**values)
            session.add(entry)
            session.flush()
            for answer_id in answer_ids:
                session.add(DeadLetterAnswer(dead_letter_id=entry.id, answer_id=answer_id))
            return entry.id

    def entry(self, entry_id: int) -> DeadLetter:
        with self.sessions() as session:
            found = session.get(DeadLetter, entry_id)
            assert found is not None
            return found


def upgraded_engine(env: dict[str, str]) -> Engine:
    """`sheetsync db upgrade` on the environment's database; an engine on it."""
    result = subprocess.run(
        [str(SCRIPT), "db", "upgrade"],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "schema up to date" in result.stdout
    return make_engine(env["SHEETSYNC_DATABASE_URL"])
