"""What people read: tables piped whole, help pages without type placeholders."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from support.cli import Cli, installed_script
from typer.main import get_command
from typer.testing import CliRunner

from sheetsync.cli import app
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services

#: Ids as long as sheetsync accepts (128 characters): far wider than 80 columns.
LONG_OWNER = "pro_owner_" + "o" * 118
LONG_FORM = "form_" + "f" * 123
#: ``<bool>``, ``<str>``, ``<int range>``, ``<list[int]>``: how Typer names a type.
TYPE_PLACEHOLDER = re.compile(r"<[a-z][a-z _|,\[\]]*>")


def _push_long_buffer() -> None:
    pipeline = Services.build()
    try:
        pipeline.store.push(
            [(BufferKey(LONG_OWNER, LONG_FORM, "sheet_abc", 0), "sheetsync_priority")], ["a_1"]
        )
    finally:
        pipeline.close()


def test_piped_tables_keep_long_ids_whole(cli: Cli) -> None:
    _push_long_buffer()
    cli.add_dead_letter(user_id=LONG_OWNER, submission_id=LONG_FORM)

    for args in (("status",), ("dlq", "list")):
        # Piped, with no COLUMNS: what `sheetsync status | less` or a log collector sees.
        text = cli.ok(*args, unset=["COLUMNS"]).stdout
        assert LONG_OWNER in text, args
        assert LONG_FORM in text, args


def test_columns_is_respected_and_ids_fold_instead_of_being_cut(cli: Cli) -> None:
    _push_long_buffer()
    text = cli.ok("status", env={"COLUMNS": "100"}).stdout
    table_lines = [line for line in text.splitlines() if line.startswith(("┃", "│", "┏", "└"))]
    assert table_lines
    assert max(len(line) for line in table_lines) <= 100
    assert "…" not in text
    # Folded over several lines, every character of the owner id is still there.
    assert "o" * 118 in re.sub(r"[^o]", "", text)


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def test_help_pages_show_no_type_placeholders(cli: Cli) -> None:
    paths = list(_command_paths(get_command(app)))
    assert ("dlq", "replay") in paths and ("health",) in paths
    # Every page rendered in this process (the same Typer app the script runs, at the
    # script's width): one subprocess per page took 30 to 50 s.
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(
            app, [*path, "--help"], prog_name="sheetsync", env=cli.env, catch_exceptions=False
        )
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        assert text.startswith(f"Usage: {' '.join(('sheetsync', *path))} "), path
        assert not TYPE_PLACEHOLDER.search(text), (path, TYPE_PLACEHOLDER.findall(text))

    # And through the installed console script itself.
    cli = installed_script(cli)
    status = cli.ok("status", "--help").stdout
    assert re.search(r"^  --json +Print JSON", status, re.MULTILINE)
    assert "--limit N " in status
    replay = cli.ok("dlq", "replay", "--help").stdout
    assert "Usage: sheetsync dlq replay [OPTIONS] [ID]..." in replay
    assert "--user USER " in replay
    assert "Usage: sheetsync health [OPTIONS] NAME..." in cli.ok("health", "--help").stdout
