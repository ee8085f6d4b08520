"""Every failure is one line on stderr with the right exit code, and secrets stay masked."""

from __future__ import annotations

from pathlib import Path

from cli_harness import Cli

from sheetsync.cli import dlq
from sheetsync.models import DeadLetterReason, DeadLetterStatus


def test_a_bad_setting_names_the_variable(cli: Cli) -> None:
    for args in (("status",), ("dlq", "list"), ("db", "upgrade")):
        result = cli(*args, env={"SHEETSYNC_FLUSH_DELAY_S": "abc"})
        assert result.code == 1, args
        assert len(result.error_lines) == 1, result.stderr
        assert result.stderr.startswith("error: SHEETSYNC_FLUSH_DELAY_S: "), result.stderr


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
