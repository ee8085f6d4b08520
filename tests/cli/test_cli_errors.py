"""Every failure is one line on stderr with the right exit code, and secrets stay masked."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import Cli, installed_script

from sheetsync.cli import dlq
from sheetsync.cli.runtime import TRACEBACK_VARIABLE
from sheetsync.models import DeadLetterReason, DeadLetterStatus
from sheetsync.ops.explain import describe
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services


def test_a_bad_setting_names_the_variable(cli: Cli) -> None:
    cli = installed_script(cli)  # what the shell sees, from the installed console script
    for args in (("status",), ("dlq", "list"), ("db", "upgrade")):
        result = cli(*args, env={"SHEETSYNC_FLUSH_DELAY_S": "abc"})
        assert result.code == 1, args
        assert len(result.error_lines) == 1, result.stderr
        assert result.stderr.startswith("error: SHEETSYNC_FLUSH_DELAY_S: "), result.stderr


def test_an_unknown_variable_is_warned_about_once(cli: Cli) -> None:
    result = cli.ok("dlq", "list", env={"SHEETSYNC_FLUSH_DELAYS": "1"})
    warning = (
        "WARNING sheetsync.settings: SHEETSYNC_FLUSH_DELAYS is not a sheetsync setting and is "
        "ignored (did you mean SHEETSYNC_FLUSH_DELAY_S?)"
    )
    assert result.stderr.splitlines() == [warning]


def test_unreachable_redis_is_one_line_with_the_password_masked(cli: Cli) -> None:
    result = cli("status", env={"SHEETSYNC_REDIS_URL": "redis://:hunter2@127.0.0.1:1/0"})
    assert result.code == 1
    assert len(result.error_lines) == 1, result.stderr
    assert result.stderr.startswith("error: cannot reach Redis at redis://:***@127.0.0.1:1/0")
    assert "hunter2" not in result.stderr


def test_unreachable_database_is_one_line_with_the_password_masked(cli: Cli) -> None:
    url = "postgresql://sheetsync:s3cret@127.0.0.1:1/sheetsync"
    for args in (("dlq", "list"), ("db", "upgrade")):
        result = cli(*args, env={"SHEETSYNC_DATABASE_URL": url})
        assert result.code == 1, args
        assert len(result.error_lines) == 1, result.stderr
        assert result.stderr.startswith(
            "error: cannot reach the database at postgresql://sheetsync:***@127.0.0.1:1/sheetsync"
        ), result.stderr
        assert "s3cret" not in result.stderr


def test_a_database_without_schema_says_to_upgrade(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    empty = f"sqlite:///{tmp_path}/empty.db"
    result = cli("dlq", "list", env={"SHEETSYNC_DATABASE_URL": empty})
    assert result.code == 1
    assert result.error_lines == [
        f"error: the database at {empty} has no sheetsync schema: run `sheetsync db upgrade`"
    ]


def test_usage_errors_exit_2_in_one_line(cli: Cli) -> None:
    for args in (("frobnicate",), ("dlq", "show", "abc"), ("dlq", "list", "--limit", "0")):
        result = cli(*args)
        assert result.code == 2, args
        assert len(result.error_lines) == 1, result.stderr
        assert result.stderr.startswith("error: ")
        assert "--help`)" in result.stderr


def test_a_group_without_a_command_shows_its_help(cli: Cli) -> None:
    result = cli("dlq")
    assert result.code == 2
    shown = result.stdout + result.stderr
    assert "replay" in shown and "purge" in shown


def test_help_answers_without_the_library(cli: Cli) -> None:
    result = cli.ok("dlq", "replay", "--help", env={"SHEETSYNC_FLUSH_DELAY_S": "abc"})
    assert "--now" in result.stdout


def test_the_choices_spelled_out_match_the_models() -> None:
    assert tuple(member.value for member in DeadLetterStatus) == dlq.STATUSES
    assert tuple(member.value for member in DeadLetterReason) == dlq.REASONS


#: Commands that read the database, and one that reads Redis alone.
DATABASE_COMMANDS = (("status",), ("dlq", "list"), ("dlq", "show", "1"))
ALL_COMMANDS = (*DATABASE_COMMANDS, ("health", "worker@host"))


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SHEETSYNC_PII_KEYS", ","),
        ("SHEETSYNC_DATABASE_URL", "mysql://u@h/db"),
        ("SHEETSYNC_FLUSH_THRESHOLD", "abc"),
    ],
)
def test_each_bad_setting_is_exactly_one_line(cli: Cli, variable: str, value: str) -> None:
    for args in ALL_COMMANDS:
        result = cli(*args, env={variable: value})
        assert result.code == 1, args
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"error: {variable}: "), result.stderr
        assert TRACEBACK_VARIABLE not in result.stderr
        assert result.stdout == ""


def test_a_missing_sqlite_file_is_one_line_and_stays_missing(cli: Cli, tmp_path: Path) -> None:
    absent = tmp_path / "nowhere" / "sheetsync.db"
    url = f"sqlite:///{absent}"
    for args in DATABASE_COMMANDS:
        result = cli(*args, env={"SHEETSYNC_DATABASE_URL": url})
        assert result.code == 1, args
        assert result.stderr.splitlines() == [
            f"error: no database at {url}: run `sheetsync db upgrade` first "
            "(or set SHEETSYNC_DATABASE_URL)"
        ], args
    assert not absent.parent.exists()


@pytest.mark.slow
def test_read_only_commands_create_nothing_in_an_empty_directory(cli: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "fresh"
    empty.mkdir()
    commands = (
        *DATABASE_COMMANDS,
        ("dlq", "replay", "--all"),
        ("dlq", "purge", "1", "--yes"),
        ("credentials", "reconnect", "owner_1"),
        ("pii", "rotate"),
    )
    for args in commands:
        # The default URL, sqlite:///sheetsync.db, is relative to the working directory.
        result = cli(*args, unset=["SHEETSYNC_DATABASE_URL"], cwd=empty)
        assert result.code == 1, args
        assert result.error_lines == [
            "error: no database at sqlite:///sheetsync.db: run `sheetsync db upgrade` first "
            "(or set SHEETSYNC_DATABASE_URL)"
        ], args
        assert list(empty.iterdir()) == [], args


def test_an_in_memory_database_is_refused_in_one_line(cli: Cli) -> None:
    for url in ("sqlite://", "sqlite:///:memory:"):
        for args in (("status",), ("db", "upgrade")):
            result = cli(*args, env={"SHEETSYNC_DATABASE_URL": url})
            assert result.code == 1, (url, args)
            assert len(result.error_lines) == 1, result.stderr
            assert result.stderr.startswith(
                f"error: SHEETSYNC_DATABASE_URL={url} is an in-memory SQLite database"
            )


def test_db_upgrade_into_a_missing_directory_is_one_line(cli: Cli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing/sheetsync.db"
    result = cli("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.code == 1
    assert result.error_lines == [
        f"error: cannot create the database at {url}: no directory {tmp_path}/missing"
    ]


def test_known_failures_never_suggest_the_traceback_variable() -> None:
    missing_module = ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
    message = describe(missing_module)
    assert message is not None
    assert "psycopg" in message
    assert TRACEBACK_VARIABLE not in message


def test_an_unexpected_error_suggests_the_traceback_variable_and_shows_it(cli: Cli) -> None:
    # A bug stand-in: a job hash whose retry count is not a number breaks `status`.
    key = BufferKey("owner_1", "form_1", "sheet_abc", 0)
    pipeline = Services.build()
    try:
        pipeline.store.push([(key, "sheetsync_default")], ["a_1"])
    finally:
        pipeline.close()
    cli.redis.hset(key.job, "attempts", "many")

    result = cli("status")
    assert result.code == 1
    assert len(result.error_lines) == 1, result.stderr
    assert result.stderr.startswith("error: unexpected ValueError: ")
    assert f"(set {TRACEBACK_VARIABLE}=1 for the traceback)" in result.stderr

    shown = cli("status", env={TRACEBACK_VARIABLE: "1"})
    assert shown.code == 1
    assert "Traceback (most recent call last)" in shown.stderr
