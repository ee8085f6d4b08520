"""The schema page's views (docs/integration/schema.md, "Views, on PostgreSQL"), run as
written: a database at head, the reader's own tables holding what sheetsync's held, the
page's SQL block swapping sheetsync's tables for views over them, then the pipeline on
top. Every answer lands through the views, and a revoked owner's credential is marked
INVALID through the ``google_credential`` view, in the reader's table."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.engine import make_url
from support.markdown import code_blocks, page
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.db import dispose_engine, make_engine, normalize_url
from sheetsync.db import upgrade as upgrade_schema
from sheetsync.models import GoogleCredential, Question, Step, Submission, User

pytestmark = pytest.mark.postgres

POSTGRES_URL_VARIABLE = "SHEETSYNC_TEST_POSTGRES_URL"
PAGE = "integration/schema.md"

#: The reader's own tables, as the page's views expect them, filled from the tables
#: sheetsync made (so the pipeline's test helpers could seed them first).
READERS_TABLES = """
CREATE TABLE accounts AS
  SELECT id AS account_id, email, plan <> 'FREE' AS paid FROM users;
CREATE TABLE forms AS SELECT id AS form_id, title AS name, owner_id AS account_id FROM submission;
CREATE TABLE form_pages AS
  SELECT id AS page_id, submission_id AS form_id, position AS page_no, title AS heading FROM step;
CREATE TABLE form_fields AS
  SELECT id AS field_id, step_id AS page_id, position AS field_no, title AS label,
         lower(type) AS kind
  FROM question;
CREATE TABLE oauth_tokens AS
  SELECT user_id AS account_id, google_account_id AS google_sub, refresh_token AS token_enc,
         scopes AS scope, status AS state, updated_at AS changed_at
  FROM google_credential;
ALTER TABLE oauth_tokens ADD PRIMARY KEY (account_id);
"""


def views_block() -> str:
    [block] = [b.text for b in code_blocks(page(PAGE), "sql") if "CREATE VIEW" in b.text]
    return block


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """A database of its own (its tables become views), the pipeline's engine."""
    server_url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not server_url:
        pytest.skip(f"{POSTGRES_URL_VARIABLE} is not set")
    server = make_url(normalize_url(server_url))
    name = f"sheetsync_views_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = server.set(database=name).render_as_string(hide_password=False)
    try:
        upgrade_schema(url)
        monkeypatch.setenv("SHEETSYNC_DATABASE_URL", url)
        engine = make_engine(url)
        yield engine
        engine.dispose()
    finally:
        dispose_engine()  # the process's default engine, if anything made one on it
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def test_the_pages_views_carry_the_pipeline(
    engine: Engine,
    world: Any,
    worker: Any,
    pipeline_env: Callable[..., dict[str, str]],
    admin: Any,
) -> None:
    pipeline_env()
    form = world.form("viewer")
    sheet = world.sheet(form)
    first = world.answers(form, 3)
    with engine.begin() as connection:
        connection.exec_driver_sql(READERS_TABLES)
        connection.exec_driver_sql(views_block())
        kinds = dict(
            connection.execute(
                text("SELECT table_name, table_type FROM information_schema.tables")
            ).all()
        )
    assert {kinds[name] for name in ("users", "submission", "step", "question")} == {"VIEW"}
    assert kinds["google_credential"] == "VIEW"
    assert kinds["spread_sheet"] == kinds["submission_answer"] == "BASE TABLE"
    with world.pipeline.sessions() as session:  # every column the models select
        for model in (User, Submission, Step, Question, GoogleCredential):
            assert session.scalars(select(model)).all()

    emit_answers_submitted(first)
    wait_until(lambda: world.ids_in(sheet) == first, timeout=30)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 3}, timeout=30)
    [header, *rows] = world.rows(sheet)
    assert header[:3] == ["Answer ID", "Submitter", "Submitted at"]
    assert len(header) == len(form.columns) + 3
    assert all(len(row) > 3 for row in rows)

    # Google refuses the owner's token: sheetsync marks the credential through the view.
    admin.revoke("google-viewer")
    later = world.answers(form, 2, start=10)
    emit_answers_submitted(later)
    wait_until(lambda: len(world.dead_letters()) == 1, timeout=30)
    with engine.connect() as connection:
        state = connection.scalar(
            text("SELECT state FROM oauth_tokens WHERE account_id = 'viewer'")
        )
    assert state == "INVALID"
    assert world.ids_in(sheet) == first
