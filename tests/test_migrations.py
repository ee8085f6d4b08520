"""Migrations on real databases: 0002 on data 0001 allowed (duplicate links merged,
dead-letter ids kept), and a newer schema that accepts this release (a rolling upgrade)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from support.databases import on_both_databases

from sheetsync import db
from sheetsync.migrations import compat
from sheetsync.startup import known_revisions, schema_problem

#: Every test here runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases


@pytest.fixture
def empty_db_url(db_url: str) -> Iterator[str]:
    """A database with no schema at all (the session's PostgreSQL one is migrated)."""
    if not db_url.startswith("postgres"):
        yield db_url
        return
    server = make_url(db.normalize_url(db_url))
    name = f"sheetsync_migration_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def test_0002_merges_duplicate_links_and_moves_dead_letter_ids(empty_db_url: str) -> None:
    db_url = empty_db_url
    db.upgrade(db_url, "0001")
    engine = db.make_engine(db_url)
    try:
        with engine.begin() as connection:
            run = connection.exec_driver_sql
            run(
                "INSERT INTO users (id, email, plan) VALUES ('owner', 'o@x', 'PRO'), "
                "('stranger', 's@x', 'FREE')"
            )
            run("INSERT INTO submission (id, title, owner_id) VALUES ('form', 'F', 'owner')")
            # Three links to one sheet (the stranger's first), one to another sheet.
            run(
                "INSERT INTO spread_sheet (id, submission_id, spread_sheet_id, sheet_id, "
                "create_user_id) VALUES (1, 'form', 'S', 0, 'stranger'), "
                "(2, 'form', 'S', 0, 'owner'), (3, 'form', 'S', 0, 'owner'), "
                "(4, 'form', 'T', 7, 'stranger')"
            )
            connection.execute(
                text(
                    "INSERT INTO dead_letter (user_id, submission_id, spread_sheet_id, sheet_id, "
                    "answer_ids, reason, attempts, status, next_attempt_at, created_at, "
                    "updated_at) VALUES ('owner', 'form', 'S', 0, :ids, 'CREDENTIAL', 0, "
                    "'PENDING', '2024-01-01 00:00:00', '2024-01-01 00:00:00', "
                    "'2024-01-01 00:00:00')"
                ),
                {"ids": json.dumps(["a1", "a2", "a2", "a3"])},
            )
        db.upgrade(db_url)
        with engine.connect() as connection:
            links = connection.execute(
                text("SELECT id, spread_sheet_id FROM spread_sheet ORDER BY id")
            ).all()
            ids = connection.execute(
                text("SELECT answer_id FROM dead_letter_answer ORDER BY answer_id")
            ).all()
        # The owner's oldest link stays for S; T keeps its only link.
        assert links == [(2, "S"), (4, "T")]
        assert [row[0] for row in ids] == ["a1", "a2", "a3"]
    finally:
        engine.dispose()


def test_a_newer_schema_is_taken_only_when_it_accepts_this_release(empty_db_url: str) -> None:
    """The previous release's start-up check during a rolling upgrade: the database at a
    revision it does not know passes only if a migration said it accepts its head."""
    db.upgrade(empty_db_url)
    [head] = known_revisions()[0]
    engine = db.make_engine(empty_db_url)
    try:
        with engine.begin() as connection:
            assert schema_problem(connection, empty_db_url) is None
            assert compat.accepts(connection) == "0007"  # 0008 only expands
            connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
            assert schema_problem(connection, empty_db_url) is None  # it accepts ours
            compat.set_accepts(connection, "0098")  # a contract one after this release
            refused = schema_problem(connection, empty_db_url)
            assert refused is not None and "upgrade sheetsync" in refused
            connection.execute(text(f"DROP TABLE {compat.TABLE}"))  # says nothing
            unknown = schema_problem(connection, empty_db_url)
            assert unknown is not None and "newer than this sheetsync knows" in unknown
            compat.set_accepts(connection, head)
            assert schema_problem(connection, empty_db_url) is None
    finally:
        engine.dispose()
