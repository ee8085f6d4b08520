"""Schema and engine behaviour, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Engine, Integer, MetaData, inspect, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session
from support.databases import on_both_databases

from sheetsync import db
from sheetsync.dev.seed import seed_answers, seed_form
from sheetsync.errors import ConfigError
from sheetsync.migrations import compat
from sheetsync.models import (
    Base,
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    Plan,
    Question,
    SheetTransaction,
    Step,
    Submission,
    SubmissionAnswer,
    TransactionType,
    User,
)

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

KST = timezone(timedelta(hours=9))


def _schema_snapshot(engine: Engine) -> dict[str, object]:
    inspector = inspect(engine)
    snapshot: dict[str, object] = {}
    for table in sorted(inspector.get_table_names()):
        snapshot[table] = (
            [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)],
            sorted(
                (i["name"] or "", tuple(i["column_names"])) for i in inspector.get_indexes(table)
            ),
            sorted(str(u["column_names"]) for u in inspector.get_unique_constraints(table)),
        )
    return snapshot


def test_upgrade_twice_changes_nothing(db_url: str) -> None:
    db.upgrade(db_url)
    engine = db.make_engine(db_url)
    try:
        before = _schema_snapshot(engine)
        db.upgrade(db_url)
        assert _schema_snapshot(engine) == before
        with engine.connect() as connection:
            versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
        head = ScriptDirectory.from_config(db.alembic_config()).get_current_head()
        assert versions == [(head,)]
        assert set(before) >= {t.name for t in Base.metadata.sorted_tables}
    finally:
        engine.dispose()


def _autogenerate_diff(engine: Engine, metadata: MetaData) -> list[object]:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_name": compat.include_name,
            },
        )
        return list(compare_metadata(context, metadata))


def test_migration_matches_models(engine: Engine) -> None:
    assert _autogenerate_diff(engine, Base.metadata) == []


def test_autogenerate_comparison_would_catch_drift(engine: Engine) -> None:
    drifted = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["dead_letter"].append_column(Column("extra", Integer))
    assert _autogenerate_diff(engine, drifted)


def test_answers_are_plain_json_on_postgres(engine: Engine) -> None:
    """``json`` keeps the text as sent, so reading a batch needs no conversion."""
    if not db.is_postgres(engine):
        pytest.skip("PostgreSQL only: SQLite stores JSON as text anyway")
    columns = {
        (table, column["name"]): str(column["type"])
        for table in ("submission_answer", "sheet_intent")
        for column in inspect(engine).get_columns(table)
    }
    assert columns[("submission_answer", "answer")] == "JSON"
    assert columns[("sheet_intent", "answer_ids")] == "JSON"
    # And autogenerate tells the two apart, so the migration cannot drift back unseen.
    drifted = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["submission_answer"].c.answer.type = JSONB()
    assert _autogenerate_diff(engine, drifted)


def test_sheet_transaction_is_unique_per_answer_and_sheet(session: Session) -> None:
    def transaction(sheet_id: int) -> SheetTransaction:
        return SheetTransaction(
            submission_answer_id="ans_1",
            spread_sheet_id="sheet-abc",
            sheet_id=sheet_id,
            type=TransactionType.ENQUEUED,
        )

    session.add_all([transaction(0), transaction(1)])
    session.commit()
    session.add(transaction(0))
    with pytest.raises(IntegrityError):
        session.commit()


def test_timestamps_round_trip_aware_in_utc(session: Session) -> None:
    seoul_noon = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=KST)
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="f1", title="form", owner_id="u1"))
    session.add(
        SubmissionAnswer(id="a1", submission_id="f1", user_name="홍길동", submitted_at=seoul_noon)
    )
    session.commit()
    session.expunge_all()

    loaded = session.get(SubmissionAnswer, "a1")
    assert loaded is not None
    assert loaded.submitted_at == seoul_noon
    assert loaded.submitted_at.tzinfo is not None
    assert loaded.submitted_at.utcoffset() == timedelta(0)
    assert loaded.submitted_at.hour == 3

    earlier = session.scalars(
        select(SubmissionAnswer.id).where(
            SubmissionAnswer.submitted_at < datetime(2024, 5, 1, 3, 0, 1, tzinfo=UTC)
        )
    ).all()
    assert earlier == ["a1"]


def test_naive_datetime_is_refused(session: Session) -> None:
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="f1", title="form", owner_id="u1"))
    session.add(
        SubmissionAnswer(id="a1", submission_id="f1", submitted_at=datetime(2024, 5, 1, 12, 0))
    )
    with pytest.raises(StatementError, match="naive datetime"):
        session.flush()


def test_enums_are_stored_as_readable_names(session: Session) -> None:
    session.add(User(id="u1", email="u1@example.com", plan=Plan.PRO_PLUS))
    session.commit()
    stored = session.execute(text("SELECT plan FROM users WHERE id = 'u1'")).scalar_one()
    assert stored == "PRO_PLUS"
    assert session.get(User, "u1").plan is Plan.PRO_PLUS  # type: ignore[union-attr]


def test_answer_json_round_trips_exactly(session: Session) -> None:
    items = [
        {"questionId": "q1", "value": "홍길동 🎉 =SUM(A1)"},
        {"questionId": "q2", "value": ["AI", "데이터"]},
        {"questionId": "q3", "value": None},
        {"questionId": "q4", "value": []},
    ]
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="f1", title="form", owner_id="u1"))
    session.add(SubmissionAnswer(id="a1", submission_id="f1", answer=items))
    session.commit()
    session.expunge_all()
    assert session.get(SubmissionAnswer, "a1").answer == items  # type: ignore[union-attr]


def test_dead_letter_defaults(session: Session) -> None:
    letters = [
        DeadLetter(
            user_id="u1",
            submission_id="f1",
            spread_sheet_id="sheet-abc",
            sheet_id=0,
            reason=DeadLetterReason.CREDENTIAL,
        )
        for _ in range(2)
    ]
    session.add_all(letters)
    session.commit()
    first, second = letters
    assert isinstance(first.id, int)
    assert second.id == first.id + 1
    assert first.status is DeadLetterStatus.PENDING
    assert first.attempts == 0
    assert first.created_at.tzinfo is not None
    assert first.next_attempt_at <= datetime.now(UTC)


def test_deleting_a_form_cascades(session: Session, pii_keys: tuple[bytes, bytes]) -> None:
    form = seed_form(session)
    seed_answers(session, form, 3)
    session.commit()
    session.delete(session.get(Submission, form.submission_id))
    session.commit()
    for model in (Step, Question, SubmissionAnswer):
        assert session.scalars(select(model)).all() == []


def test_session_scope_commits_or_rolls_back(engine: Engine) -> None:
    with db.session_scope() as session:
        session.add(User(id="kept", email="kept@example.com"))
    with pytest.raises(RuntimeError), db.session_scope() as session:
        session.add(User(id="dropped", email="dropped@example.com"))
        session.flush()
        raise RuntimeError("boom")
    with db.session_scope() as session:
        assert session.scalars(select(User.id)).all() == ["kept"]


def test_default_engine_follows_settings_and_can_be_disposed(engine: Engine) -> None:
    first = db.get_engine()
    assert first.url == engine.url
    assert db.get_sessionmaker().kw["bind"] is first
    db.dispose_engine()
    assert db.get_engine() is not first


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgres://u@h/d", "postgresql+psycopg://u@h/d"),
        ("postgresql://u@h:5432/d", "postgresql+psycopg://u@h:5432/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
        ("sqlite:///sheetsync.db", "sqlite:///sheetsync.db"),
    ],
)
def test_normalize_url(url: str, expected: str) -> None:
    assert db.normalize_url(url) == expected


def test_backend_helpers(engine: Engine, db_url: str) -> None:
    assert db.is_postgres(engine) is db_url.startswith("postgresql")
    assert db.is_sqlite(engine) is db_url.startswith("sqlite")


def test_sqlite_connections_use_wal_and_foreign_keys(sqlite_url: str) -> None:
    engine = db.make_engine(sqlite_url, create=True)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    finally:
        engine.dispose()


def test_only_a_migration_creates_a_sqlite_file(sqlite_url: str, tmp_path: Path) -> None:
    """An engine opens a SQLite file without creating it: a missing one is one line that
    says what to run, even when it disappears after the engine was made, and nothing
    (no -wal, no -shm) is left behind; a migration makes it."""
    assert Path(make_url(sqlite_url).database or "").parent == tmp_path
    engine = db.make_engine(sqlite_url)
    try:
        for _ in range(2):
            with pytest.raises(ConfigError) as caught, engine.connect():
                pass
            assert str(caught.value) == (
                f"no database at {sqlite_url}: run `sheetsync db upgrade` first "
                "(or set SHEETSYNC_DATABASE_URL)"
            )
            assert list(tmp_path.iterdir()) == []
        db.upgrade(sqlite_url)
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT count(*) FROM dead_letter").scalar() == 0
        engine.dispose()
        for leftover in tmp_path.iterdir():
            leftover.unlink()  # deleted under a running process
        with pytest.raises(ConfigError), engine.connect():
            pass
        assert list(tmp_path.iterdir()) == []
    finally:
        engine.dispose()


def test_sqlite_concurrent_read_modify_write_loses_nothing(sqlite_url: str) -> None:
    """Every transaction takes the write lock at BEGIN, so increments serialize."""
    db.upgrade(sqlite_url)
    engine = db.make_engine(sqlite_url)
    factory = db.session_factory(engine)
    with factory.begin() as session:
        letter = DeadLetter(
            user_id="u1",
            submission_id="f1",
            spread_sheet_id="s",
            sheet_id=0,
            reason=DeadLetterReason.TRANSIENT_EXHAUSTED,
        )
        session.add(letter)
    errors: list[BaseException] = []

    def bump(times: int) -> None:
        try:
            for _ in range(times):
                with factory.begin() as session:
                    row = session.get(DeadLetter, letter.id)
                    assert row is not None
                    row.attempts = row.attempts + 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=bump, args=(40,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        with factory() as session:
            assert session.get(DeadLetter, letter.id).attempts == 160  # type: ignore[union-attr]
    finally:
        engine.dispose()
