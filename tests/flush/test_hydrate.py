"""Hydrating a batch of answers in one SELECT, then turning them into rows."""

from __future__ import annotations

import gc
import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session
from support.databases import on_both_databases

from sheetsync.db import is_postgres
from sheetsync.dev.seed import DEFAULT_FIRST_SUBMITTED_AT, seed_answers, seed_form
from sheetsync.flush.hydrate import AnswerRecord, decode_json, fetch_answers, gc_paused
from sheetsync.flush.layout import load_layout
from sheetsync.flush.rows import RowBuilder
from sheetsync.models import QuestionType, Submission, SubmissionAnswer, User

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases


def test_fetch_answers_returns_existing_ones_by_id(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 5)
    session.commit()

    records = fetch_answers(session, [ids[3], "ans_missing", ids[0], ids[3]])

    assert set(records) == {ids[0], ids[3]}
    record = records[ids[3]]
    assert isinstance(record, AnswerRecord)
    assert record.id == ids[3]
    assert record.submission_id == form.submission_id
    assert record.user_name
    assert record.submitted_at == DEFAULT_FIRST_SUBMITTED_AT + timedelta(seconds=7 * 3)
    assert record.submitted_at.utcoffset() == timedelta(0)
    stored = session.get(SubmissionAnswer, ids[3])
    assert stored is not None
    assert record.answer == stored.answer


def test_records_follow_the_order_asked_for(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 20)
    session.commit()
    asked = [ids[7], ids[2], "ans_missing", ids[19], ids[2], ids[0], ids[11]]

    records = fetch_answers(session, asked)

    assert list(records) == [ids[7], ids[2], ids[19], ids[0], ids[11]]


def test_fetch_nothing(session: Session) -> None:
    assert fetch_answers(session, []) == {}
    assert fetch_answers(session, ["ans_nope"]) == {}


def test_a_full_batch_is_one_select(
    engine: Engine, session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 5000)
    session.commit()
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", count)
    try:
        records = fetch_answers(session, ids)
    finally:
        event.remove(engine, "before_cursor_execute", count)

    assert len(records) == 5000
    queries = [s for s in statements if not s.startswith("BEGIN")]  # SQLite's BEGIN IMMEDIATE
    assert len(queries) == 1
    assert queries[0].lstrip().upper().startswith("SELECT")


def test_hydrated_answers_become_rows(session: Session, pii_keys: tuple[bytes, bytes]) -> None:
    form = seed_form(session, steps=3, questions_per_step=4, pii=2, jumbotrons=1)
    ids = seed_answers(session, form, 50)
    session.commit()

    layout = load_layout(session, form.submission_id)
    builder = RowBuilder(layout)
    records = fetch_answers(session, ids)
    rows = [builder.build(r.id, r.user_name, r.submitted_at, r.answer) for r in records.values()]

    assert len(rows) == 50
    assert all(len(row) == 3 + 12 for row in rows)
    pii_columns = [
        3 + i for i, c in enumerate(layout.questions) if c.type is QuestionType.PERSONAL_INFO
    ]
    pii_cells = [row[i] for row in rows for i in pii_columns if row[i]]
    assert pii_cells
    assert all(cell.startswith("010-") or cell.endswith("@example.co.kr") for cell in pii_cells)
    multi_index = 3 + next(
        i for i, c in enumerate(layout.questions) if c.type is QuestionType.MULTI_CHOICE
    )
    assert any(", " in row[multi_index] for row in rows)


@pytest.mark.parametrize("count", [1, 999, 1000, 33_000])
def test_many_ids_fit_in_one_statement(session: Session, count: int) -> None:
    ids = [f"ans_{n}" for n in range(count)]
    assert fetch_answers(session, ids) == {}


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()

    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()

    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()


def _store_raw_answer(session: Session, answer_id: str, json_text: str) -> None:
    """Overwrite an answer's JSON with exactly ``json_text``, as another writer might."""
    cast = "CAST(:answer AS json)" if is_postgres(session.get_bind()) else ":answer"
    session.execute(
        text(f"UPDATE submission_answer SET answer = {cast} WHERE id = :id"),
        {"answer": json_text, "id": answer_id},
    )


def test_korean_and_emoji_decode_however_they_were_written(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    value = '홍길동 님 🎉👍🏽 "따옴표" \\ 줄\n바꿈 =SUM(A1)'
    items = [{"questionId": "q1", "value": value}, {"questionId": "q2", "value": ["AI", "데이터"]}]
    _store_raw_answer(session, ids[0], json.dumps(items, ensure_ascii=False))  # UTF-8 as is
    _store_raw_answer(session, ids[1], json.dumps(items))  # \\uXXXX escapes, surrogate pairs
    _store_raw_answer(session, ids[2], json.dumps(items, ensure_ascii=False, indent=2))
    session.commit()

    records = fetch_answers(session, ids)

    assert [records[i].answer for i in ids] == [items, items, items]


def test_decode_json_reads_what_json_loads_reads() -> None:
    for document in [
        '[{"questionId": "q", "value": "홍길동 🎉"}]',
        '[{"questionId": "q", "value": "\\ud64d\\uae38\\ub3d9 \\ud83c\\udf89"}]',
        '{"a": 1, "a": 2}',
        "[1.5, -0.0, 1e300, 18446744073709551615, -9223372036854775808, true, null]",
        '["\\u0000", "\\ud800"]',  # a lone surrogate: orjson refuses it, json takes it
        "[NaN, Infinity, -Infinity]",  # json.dumps writes these; orjson refuses them
    ]:
        decoded = decode_json(document)
        assert repr(decoded) == repr(json.loads(document))
        assert repr(decode_json(document.encode())) == repr(decoded)
    with pytest.raises(json.JSONDecodeError):
        decode_json("[1,")


def test_decode_json_reads_integers_beyond_64_bits_as_floats() -> None:
    """The one documented difference from json.loads (orjson's): out-of-contract anyway."""
    assert decode_json("[123456789012345678901234567890]") == [1.2345678901234568e29]


def test_sqlite_answers_orjson_refuses_still_load(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    if is_postgres(session.get_bind()):
        pytest.skip("PostgreSQL's json refuses NaN on the way in")
    form = seed_form(session, pii=0)
    ids = seed_answers(session, form, 1)
    _store_raw_answer(session, ids[0], '[{"questionId": "q", "value": NaN}]')
    session.commit()

    (record,) = fetch_answers(session, ids).values()

    assert math.isnan(record.answer[0]["value"])


def test_ids_are_matched_exactly_whatever_their_characters(session: Session) -> None:
    odd_ids = ["NULL", "a,b", 'quote"d', "back\\slash", "{brace}", "공백 있음", "a", "b"]
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="f1", title="form", owner_id="u1"))
    session.add_all(SubmissionAnswer(id=i, submission_id="f1") for i in odd_ids)
    session.commit()

    assert set(fetch_answers(session, odd_ids)) == set(odd_ids)
    assert set(fetch_answers(session, ["a,b", "null", "quote", "{brace}"])) == {"a,b", "{brace}"}


def test_timestamps_come_back_in_utc_whatever_the_session_time_zone(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 2)
    exact = datetime(2024, 5, 1, 3, 4, 5, 123_456, tzinfo=UTC)
    stored = session.get(SubmissionAnswer, ids[1])
    assert stored is not None
    stored.submitted_at = exact
    session.commit()
    if is_postgres(session.get_bind()):
        # Printed as 2024-05-01 00:34:05.123456-02:30 in this session.
        session.execute(text("SET LOCAL TimeZone = 'America/St_Johns'"))

    records = fetch_answers(session, ids)

    assert records[ids[0]].submitted_at == DEFAULT_FIRST_SUBMITTED_AT
    assert records[ids[1]].submitted_at == exact
    for record in records.values():
        assert record.submitted_at.tzinfo is UTC


def test_postgres_timestamps_in_another_date_style_go_to_the_driver(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    """Only ISO text is parsed here; anything else gets psycopg's own loader (and error)."""
    if not is_postgres(session.get_bind()):
        pytest.skip("PostgreSQL only")
    form = seed_form(session, pii=0)
    ids = seed_answers(session, form, 1)
    session.commit()
    session.execute(text("SET LOCAL DateStyle = 'SQL, DMY'"))

    with pytest.raises(NotImplementedError, match="DateStyle"):
        fetch_answers(session, ids)


def test_sqlite_timestamps_written_by_hand_read_as_sqlalchemy_reads_them(
    session: Session,
) -> None:
    if is_postgres(session.get_bind()):
        pytest.skip("SQLite only: PostgreSQL types its timestamps")
    written = [
        "2024-05-01 00:00:07.000000",  # what SQLAlchemy writes
        "2024-05-01 00:00:07",
        "2024-05-01T00:00:07.5",
        "2024-05-01T09:00:07+09:00",
        "2024-05-01 00:00:07Z",
        "2024-05-01",
    ]
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="f1", title="form", owner_id="u1"))
    ids = [f"a{n}" for n in range(len(written))]
    session.add_all(SubmissionAnswer(id=i, submission_id="f1") for i in ids)
    session.flush()
    for answer_id, when in zip(ids, written, strict=True):
        session.execute(
            text("UPDATE submission_answer SET submitted_at = :t WHERE id = :id"),
            {"t": when, "id": answer_id},
        )
    session.commit()
    session.expunge_all()

    records = fetch_answers(session, ids)

    for answer_id in ids:
        reference = session.get(SubmissionAnswer, answer_id)
        assert reference is not None
        assert records[answer_id].submitted_at == reference.submitted_at
        assert records[answer_id].submitted_at.tzinfo is UTC
