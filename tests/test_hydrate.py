"""Hydrating a batch of answers in one SELECT, then turning them into rows."""

from __future__ import annotations

import gc
from datetime import timedelta

import pytest
from factories import DEFAULT_FIRST_SUBMITTED_AT, seed_answers, seed_form
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from sheetsync.hydrate import AnswerRecord, fetch_answers, gc_paused
from sheetsync.models import QuestionType, SubmissionAnswer
from sheetsync.rows import RowBuilder, load_layout


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
        3 + i for i, c in enumerate(layout.columns) if c.type is QuestionType.PERSONAL_INFO
    ]
    pii_cells = [row[i] for row in rows for i in pii_columns if row[i]]
    assert pii_cells
    assert all(cell.startswith("010-") or cell.endswith("@example.co.kr") for cell in pii_cells)
    multi_index = 3 + next(
        i for i, c in enumerate(layout.columns) if c.type is QuestionType.MULTI_CHOICE
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
