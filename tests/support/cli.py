"""Running the real ``sheetsync`` command line from tests, and seeding dead letters.

A command runs in this process by default: ``sheetsync.cli.main``, what the console
script calls, with the command's environment, working directory, stdout and stderr, and
every per-process cache (settings, keys, engine, services, consoles, logging) fresh, as a
new process has them. A new process cost about a second of CPU per command (a quarter of
the parallel tier's CPU). :func:`installed_script` runs the installed console script
instead, for what only a process shows (its start-up, its exit code as the shell sees it).
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import redis
from celery import Celery
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import cli, dispatch
from sheetsync import db as db_module
from sheetsync import services as services_module
from sheetsync.celery.config import config_for
from sheetsync.celery.dispatcher import CeleryDispatcher
from sheetsync.cli import output
from sheetsync.crypto import reset_keyring
from sheetsync.db import dispose_engine, make_engine
from sheetsync.dispatch import Dispatcher
from sheetsync.models import (
    DeadLetter,
    DeadLetterAnswer,
    DeadLetterReason,
    DeadLetterStatus,
    utcnow,
)
from sheetsync.services import reset_services
from sheetsync.settings import get_settings, reset_settings
from sheetsync.settings import model as settings_model

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
    """Runs ``sheetsync`` commands with this test's environment, in this process."""

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
        return self.run(list(args), variables, cwd)

    def run(self, args: list[str], variables: dict[str, str], cwd: Path | None) -> Result:
        return run_here(args, variables, cwd)

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


class ScriptCli(Cli):
    """Runs the installed console script in a subprocess, for what only a process shows
    (its start-up, and its exit as the shell sees it)."""

    def run(self, args: list[str], variables: dict[str, str], cwd: Path | None) -> Result:
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


def installed_script(cli: Cli) -> ScriptCli:
    """``cli``'s environment and database, through the installed console script (a test
    that calls this is marked ``process``; one that only takes ``cli`` is not)."""
    return ScriptCli(cli.env, cli.database_url, cli.sessions, cli.redis)


def run_here(args: list[str], variables: dict[str, str], cwd: Path | None) -> Result:
    """``sheetsync *args`` in this process, as a new process would run it."""
    stdout, stderr = io.StringIO(), io.StringIO()
    dispatcher, registered = _NewProcessDispatcher(), dispatch._dispatcher
    with _as_a_new_process(variables, cwd), redirect_stdout(stdout), redirect_stderr(stderr):
        _fresh_consoles()
        dispatch.set_dispatcher(cast(Dispatcher, dispatcher))
        try:
            code = cli.main(args)
        except SystemExit as exc:  # what the console script's sys.exit would do
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            dispatch.set_dispatcher(registered)  # the test's own, if it set one
            dispatcher.close()
    _fresh_consoles()
    return Result(code, stdout.getvalue(), stderr.getvalue())


@contextmanager
def _as_a_new_process(variables: dict[str, str], cwd: Path | None) -> Iterator[None]:
    saved_environ, saved_cwd = dict(os.environ), os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    os.environ.clear()
    os.environ.update(variables)
    _forget_process_state()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with _services_of_its_own():
            yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        _forget_process_state()


def _forget_process_state() -> None:
    reset_settings()
    settings_model._warned.clear()  # a new process warns about an unknown variable again
    reset_keyring()


@contextmanager
def _services_of_its_own() -> Iterator[None]:
    """The command builds its own services and engine, closed when it ends; the test's
    are set aside meanwhile, not closed: an in-process worker (the ``worker`` fixture)
    may be in the middle of a flush on them, and closing its Redis client under it
    broke that flush (a ConnectionError between its dead letter and its trim)."""
    with services_module._lock:
        saved_services, services_module._current = services_module._current, None
    with db_module._default.lock:
        saved_engine = db_module._default.engine, db_module._default.sessionmaker
        db_module._default.engine = db_module._default.sessionmaker = None
    try:
        yield
    finally:
        reset_services()
        dispose_engine()
        with services_module._lock:
            services_module._current = saved_services
        with db_module._default.lock:
            db_module._default.engine, db_module._default.sessionmaker = saved_engine


class _NewProcessDispatcher:
    """What a new process's Celery app would be: configured from the command's settings
    on first use (this process's app stays as the test set it up)."""

    def __init__(self) -> None:
        self._app: Celery | None = None
        self._dispatcher: CeleryDispatcher | None = None

    def __getattr__(self, name: str) -> Any:
        if self._dispatcher is None:
            self._app = Celery("sheetsync")
            self._app.conf.update(config_for(get_settings()))
            self._dispatcher = CeleryDispatcher(self._app)
        return getattr(self._dispatcher, name)

    def close(self) -> None:
        if self._app is not None:
            self._app.close()


def _fresh_consoles() -> None:
    """The consoles the commands print with, set up again for the streams and environment
    of now (modules hold them by name, so they are renewed in place)."""
    for console, stderr in ((output.out, False), (output.err, True)):
        vars(console).update(vars(output.new_console(stderr=stderr)))


def upgraded_engine(env: dict[str, str]) -> Engine:
    """`sheetsync db upgrade` on the environment's database; an engine on it."""
    result = run_here(["db", "upgrade"], env, None)
    assert result.code == 0, result.stderr
    assert "schema up to date" in result.stdout
    return make_engine(env["SHEETSYNC_DATABASE_URL"])
