"""Nothing stranded: a bad answer, a deleted form or a removed link never blocks a buffer.

Every (answer, sheet) ends COMPLETED, in a PENDING dead letter, or FAILED with a reason
that names the answer and the error class, never the value; the rest of the batch lands.
"""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select, text
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import (
    DeadLetterReason,
    DeadLetterStatus,
    SheetTransaction,
    SpreadSheet,
    Submission,
    SubmissionAnswer,
    TransactionType,
)


def ledger(world):
    with world.pipeline.sessions() as session:
        return {
            row.submission_answer_id: (row.type, row.error_message)
            for row in session.scalars(select(SheetTransaction))
        }


def set_raw_answer(world, answer_id, raw_json):
    with world.pipeline.sessions.begin() as session:
        session.execute(
            text("UPDATE submission_answer SET answer = :raw WHERE id = :id"),
            {"raw": raw_json, "id": answer_id},
        )


def set_item_value(world, form, answer_id, question_id, value):
    with world.pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, answer_id)
        items = [i for i in answer.answer if i.get("questionId") != question_id]
        answer.answer = [*items, {"questionId": question_id, "value": value}]


@pytest.mark.parametrize(
    "raw",
    ["null", "42", '"just text"', '{"questionId": "x"}', '{"broken": ', "[1, 2]"],
    ids=["null", "number", "string", "object", "malformed", "list-of-numbers"],
)
def test_a_malformed_answer_fails_alone(world, worker, raw):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    set_raw_answer(world, ids[2], raw)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    good = [i for i in ids if i != ids[2]]
    assert world.ids_in(sheet) == good
    states = ledger(world)
    state, reason = states[ids[2]]
    assert state is TransactionType.FAILED
    assert ids[2] in reason
    assert all(states[i][0] is TransactionType.COMPLETED for i in good)


@pytest.mark.parametrize("value", [12345, True, {"nested": "x"}, [1, 2]])
def test_a_personal_info_value_of_the_wrong_type_fails_alone(world, worker, value):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 4)
    [pii_question, *_] = form.pii_question_ids
    set_item_value(world, form, ids[1], pii_question, value)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ids_in(sheet) == [ids[0], *ids[2:]]
    state, reason = ledger(world)[ids[1]]
    assert state is TransactionType.FAILED
    assert ids[1] in reason and pii_question in reason
    assert str(value) not in reason.replace(ids[1], "").replace(pii_question, "")


def test_a_question_of_an_unknown_type_is_written_as_text(world, worker):
    form = world.form(pii=0)
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    rated = form.columns[0].id
    with world.pipeline.sessions.begin() as session:
        session.execute(text("UPDATE question SET type = 'RATING' WHERE id = :id"), {"id": rated})
    set_item_value(world, form, ids[0], rated, "5")
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ids_in(sheet) == ids
    assert "5" in world.rows(sheet)[1]


def test_a_deleted_form_fails_its_buffered_answers_and_writes_nothing(world, pipeline_env):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES

    pipeline_env(flush_delay_s=1)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 6)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    with world.pipeline.sessions.begin() as session:
        session.execute(delete(Submission).where(Submission.id == form.submission_id))
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.rows(sheet) == []
    states = ledger(world)
    assert {states[i][0] for i in ids} == {TransactionType.FAILED}
    assert all("form" in states[i][1] and "deleted" in states[i][1] for i in ids)


def test_a_removed_link_fails_its_buffered_answers_and_writes_nothing(world, pipeline_env):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES

    pipeline_env(flush_delay_s=1)
    form = world.form()
    kept, removed = world.sheet(form, "Kept"), world.sheet(form, "Removed")
    ids = world.answers(form, 6)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    with world.pipeline.sessions.begin() as session:
        session.execute(
            delete(SpreadSheet).where(SpreadSheet.spread_sheet_id == removed.spreadsheet_id)
        )
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ids_in(kept) == ids
    assert world.rows(removed) == []  # an owner who unlinked gets no new personal info
    with world.pipeline.sessions() as session:
        removed_states = session.execute(
            select(SheetTransaction.type, SheetTransaction.error_message).where(
                SheetTransaction.spread_sheet_id == removed.spreadsheet_id
            )
        ).all()
    assert len(removed_states) == 6
    assert all(t is TransactionType.FAILED and "link removed" in m for t, m in removed_states)


def test_a_replayed_dead_letter_with_a_malformed_answer_does_not_strand(world, worker):
    from sheetsync.deadletters import replay, store
    from sheetsync.redis_keys import BufferKey

    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 4)
    set_raw_answer(world, ids[1], "null")
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    with world.pipeline.sessions.begin() as session:
        store.park(session, key, ids, DeadLetterReason.CREDENTIAL, "test", delay_s=0)
    assert replay.dispatch_due(world.pipeline) == 1
    wait_until(lambda: world.ids_in(sheet) == [ids[0], *ids[2:]], timeout=30)
    wait_until(
        lambda: (
            world.complete_replays() and world.dead_letters()[0].status is DeadLetterStatus.DONE
        ),
        timeout=30,
    )
    assert ledger(world)[ids[1]][0] is TransactionType.FAILED


def test_an_unforeseen_run_failure_ends_in_a_dead_letter_with_an_alert(
    world, alerts, worker, monkeypatch
):
    """A bug or an unknown exception is retried RETRY_MAX times, then dead-lettered."""
    import sheetsync.flush.hydrate

    def broken(*args, **kwargs):
        raise RuntimeError("an unforeseen bug")

    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    monkeypatch.setattr(sheetsync.flush.hydrate, "fetch_answers", broken)
    monkeypatch.setattr("sheetsync.flush.batches.fetch_answers", broken, raising=False)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(world.dead_letters, timeout=60)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    [entry] = world.dead_letters()
    assert entry.status is DeadLetterStatus.PENDING
    assert world.ids_of(entry) == sorted(ids)
    assert world.ids_in(sheet) == []  # row 1 is written before rows are built: no answer
    wait_until(lambda: any("RuntimeError" in t for t in alerts.texts))
