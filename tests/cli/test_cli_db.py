"""`sheetsync db`, through the console script."""

from __future__ import annotations

from pathlib import Path

from support.cli import Cli

from sheetsync.db import alembic_config, upgrade


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def test_db_upgrade_is_idempotent(cli: Cli) -> None:
    result = cli.ok("db", "upgrade")
    assert result.stdout.strip() == (
        f"{cli.database_url}: schema up to date at revision {head_revision()}; nothing to do"
    )


def test_db_upgrade_of_a_new_sqlite_file_says_it_created_it(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    url = f"sqlite:///{path}"
    result = cli.ok("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.stdout.strip() == (
        f"{url}: created the schema at revision {head_revision()} in a new SQLite file "
        "(schema up to date)"
    )
    assert path.is_file()
    # A relative URL: the line names the file in full.
    result = cli.ok(
        "db", "upgrade", env={"SHEETSYNC_DATABASE_URL": "sqlite:///rel.db"}, cwd=tmp_path
    )
    assert result.stdout.strip() == (
        f"sqlite:///rel.db: created the schema at revision {head_revision()} in a new SQLite "
        f"file, {tmp_path / 'rel.db'} (schema up to date)"
    )


def test_db_upgrade_of_an_empty_database_says_it_created_the_schema(
    cli: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "empty.db"
    path.touch()  # as a DBA hands over an empty database
    url = f"sqlite:///{path}"
    result = cli.ok("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.stdout.strip() == (
        f"{url}: created the schema at revision {head_revision()} (schema up to date)"
    )


def test_db_upgrade_of_an_older_schema_says_from_which_revision(cli: Cli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'older.db'}"
    upgrade(url, "0004_column_maps")
    result = cli.ok("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.stdout.strip() == (
        f"{url}: upgraded the schema from revision 0004_column_maps to {head_revision()} "
        "(schema up to date)"
    )


def test_db_upgrade_without_the_setting_refuses_and_creates_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    """Without SHEETSYNC_DATABASE_URL it would migrate sqlite:///sheetsync.db, a new file
    in whatever directory it runs in, and say the schema is up to date: a deploy step
    with a lost variable would leave the real database unmigrated."""
    empty = tmp_path / "fresh"
    empty.mkdir()
    result = cli("db", "upgrade", unset=["SHEETSYNC_DATABASE_URL"], cwd=empty)
    assert result.code == 1
    assert result.error_lines == [
        "error: SHEETSYNC_DATABASE_URL is not set: set it to the database to create or "
        "migrate (sqlite:///path or postgresql://user@host/db); db upgrade does not fall "
        "back to sqlite:///sheetsync.db in the current directory"
    ]
    assert result.stdout == ""
    assert list(empty.iterdir()) == []
