"""The web app's call: outbox semantics, validation, Redis down, one round trip."""

from __future__ import annotations

import logging

import pytest
import redis
from sqlalchemy import select
from support.waiting import wait_until

from sheetsync import emit_answer_submitted, wait_for_pushes
from sheetsync.buffers.store import BufferStore
from sheetsync.dev.seed import link_sheet, seed_form
from sheetsync.errors import NotFoundError, ValidationError
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    SheetTransaction,
    SpreadSheet,
    TransactionType,
)
from sheetsync.recovery import repair
from sheetsync.services import Services, get_services
from sheetsync.settings import Settings


def redis_keys(pipeline) -> list[bytes]:
    return list(pipeline.redis.scan_iter("*"))


def test_a_form_with_no_link_writes_nothing(world, pipeline):
    with pipeline.sessions.begin() as session:
        form = seed_form(session, owner_id="lonely")
    [answer_id] = world.answers(form, 1)
    result = emit_answer_submitted(answer_id)
    assert result.enqueued == () and not result.pushed
    assert world.ledger_counts() == {}
    assert redis_keys(pipeline) == []


def test_bad_ids_fail_before_anything_is_written(world, pipeline):
    with pytest.raises(ValidationError, match="answer id must match"):
        emit_answer_submitted("bad id; DROP TABLE")
    with pytest.raises(NotFoundError, match="answer nope does not exist"):
        emit_answer_submitted("nope")
    assert redis_keys(pipeline) == []


def test_inside_the_callers_transaction_push_waits_for_commit(world, pipeline):
    form = world.form()
    sheet = world.sheet(form)
    first, second = world.answers(form, 2)

    with pipeline.sessions() as session:
        result = emit_answer_submitted(first, session=session)
        assert len(result.enqueued) == 1 and not result.pushed
        assert redis_keys(pipeline) == []  # nothing before commit
        session.rollback()
    assert redis_keys(pipeline) == []  # a rolled-back answer is never pushed
    assert world.ledger_counts() == {}

    with pipeline.sessions() as session:
        emit_answer_submitted(second, session=session)
        assert redis_keys(pipeline) == []
        session.commit()
    assert wait_for_pushes()  # the push left the request's path for the push thread
    key = result.enqueued[0]
    assert [v.decode() for v in pipeline.redis.lrange(key.buf, 0, -1)] == [second]
    assert world.ledger_counts() == {"ENQUEUED": 1}
    assert sheet.spreadsheet_id == key.spread_sheet_id


def test_redis_down_never_fails_the_caller_and_the_reconciler_catches_up(
    world, pipeline, worker, monkeypatch
):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)

    def refuse(*args, **kwargs):
        raise redis.ConnectionError("Connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(BufferStore, "push", refuse)
        results = [emit_answer_submitted(answer_id) for answer_id in ids]
    assert [r.pushed for r in results] == [False, False, False]
    assert world.ledger_counts() == {"ENQUEUED": 3}

    report = repair.reconcile(get_services())  # RECONCILE_AFTER_S is 0 in tests
    assert report.answers == 3
    wait_until(lambda: world.ids_in(sheet) == ids)


def test_redis_down_warns_which_redis_and_what_happens_next(world, pipeline, caplog):
    """The warning of a skipped push names the Redis (password masked) and says that the
    reconciler pushes the id, and when: not "is a worker running?"."""
    form = world.form()
    world.sheet(form)
    [answer_id] = world.answers(form, 1)
    settings = Settings.load(
        redis_url="redis://:hunter2@127.0.0.1:1/0",
        reconcile_after_s=600,
        reconcile_interval_s=300,
    )
    down = Services.build(settings, engine=pipeline.engine)
    try:
        with caplog.at_level(logging.WARNING, logger="sheetsync.buffers.push"):
            result = emit_answer_submitted(answer_id, services=down)
    finally:
        down.redis.close()
    assert not result.pushed
    [message] = [r.getMessage() for r in caplog.records if r.name == "sheetsync.buffers.push"]
    assert message.startswith(
        "push of 1 ids skipped: Redis at redis://:***@127.0.0.1:1/0 unavailable (ConnectionError); "
        "they stay ENQUEUED in the database, and beat's reconciler pushes them within about "
        "15m 0s (SHEETSYNC_RECONCILE_AFTER_S + SHEETSYNC_RECONCILE_INTERVAL_S)"
    ), message
    assert "hunter2" not in message
    assert world.ledger_counts() == {"ENQUEUED": 1}


def test_malformed_link_is_validation_failed_and_alerted_others_flow(world, alerts, pipeline):
    form = world.form()
    good = world.sheet(form)
    with pipeline.sessions.begin() as session:
        link_sheet(session, form, "not a valid id!", 0)
    [answer_id] = world.answers(form, 1)

    result = emit_answer_submitted(answer_id)

    assert len(result.enqueued) == 1 and result.enqueued[0].spread_sheet_id == good.spreadsheet_id
    assert len(result.invalid) == 1 and "malformed" in result.invalid[0]
    with pipeline.sessions() as session:
        states = dict(
            session.execute(select(SheetTransaction.spread_sheet_id, SheetTransaction.type)).all()
        )
        bad_link = session.scalar(
            select(SpreadSheet.id).where(SpreadSheet.spread_sheet_id == "not a valid id!")
        )
    assert states == {
        good.spreadsheet_id: TransactionType.ENQUEUED,
        "not a valid id!": TransactionType.VALIDATION_FAILED,
    }
    assert [text for text in alerts.texts if f"link {bad_link}" in text]

    # Every later answer of the form fails the same way; the operator hears it once.
    [another] = world.answers(form, 1, prefix="again")
    assert len(emit_answer_submitted(another).invalid) == 1
    assert len([text for text in alerts.texts if f"link {bad_link}" in text]) == 1


def test_an_invalid_credential_parks_the_answers_without_asking_google(
    world, pipeline, worker, admin
):
    """Emit does not look at credentials (one statement per emit); the flush finds the
    owner's credential INVALID in the database and parks the ids, calling nobody."""
    form = world.form("broken", credential_status=CredentialStatus.INVALID)
    world.sheet(form)
    ids = world.answers(form, 2)
    admin.reset_stats()
    for answer_id in ids:
        assert len(emit_answer_submitted(answer_id).enqueued) == 1
    wait_until(lambda: world.dead_letters() and not world.leftover_keys(), timeout=30)
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.CREDENTIAL and world.ids_of(entry) == sorted(ids)
    assert world.ledger_counts() == {"DEAD_LETTERED": 2}
    assert admin.stats()["requests"]["total"] == 0


@pytest.mark.parametrize("sheets", [1, 3])
def test_one_redis_round_trip_per_emit(world, pipeline, monkeypatch, sheets):
    form = world.form()
    for n in range(sheets):
        world.sheet(form, f"T{n}")
    first, second = world.answers(form, 2)
    emit_answer_submitted(first)  # the first id of a burst also sends the task

    sent = []
    connection_class = redis.connection.Connection
    original = connection_class.send_packed_command
    buffer_db = pipeline.redis.connection_pool.connection_kwargs.get("db", 0)
    handshake = (b"HELLO", b"PING", b"CLIENT", b"SELECT")

    def counting(self, command, check_health=True):
        first = b"".join(command)[:40]
        if self.db == buffer_db and not any(word in first for word in handshake):
            sent.append(command)
        return original(self, command, check_health)

    monkeypatch.setattr(connection_class, "send_packed_command", counting)
    emit_answer_submitted(second)
    assert len(sent) == 1


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("sheets", [1, 3])
def test_one_sql_statement_per_emit_given_the_answer(world, pipeline, db_url, sheets):
    """In the steady state (the form's routes cached) an emit inside the app's
    transaction is one statement; given only the id, two."""
    from sqlalchemy import event

    from sheetsync.models import SubmissionAnswer

    form = world.form()
    for n in range(sheets):
        world.sheet(form, f"T{n}")
    first, by_object, by_id = world.answers(form, 3)
    emit_answer_submitted(first)  # reads the form's routes once

    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args):
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            statements.append(statement)

    with pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, by_object)
        event.listen(pipeline.engine, "before_cursor_execute", count)
        try:
            result = emit_answer_submitted(answer, session=session)
        finally:
            event.remove(pipeline.engine, "before_cursor_execute", count)
    assert len(result.enqueued) == sheets
    assert len(statements) == 1, statements

    statements.clear()
    with pipeline.sessions.begin() as session:
        event.listen(pipeline.engine, "before_cursor_execute", count)
        try:
            emit_answer_submitted(by_id, session=session)
        finally:
            event.remove(pipeline.engine, "before_cursor_execute", count)
    assert len(statements) == 2, statements
    wait_until(lambda: world.ledger_counts() == {"ENQUEUED": 3 * sheets})


def test_a_batch_emit_takes_one_statement_and_one_push_per_buffer(world, pipeline, monkeypatch):
    from sheetsync import emit_answers_submitted

    form = world.form()
    for n in range(2):
        world.sheet(form, f"T{n}")
    ids = world.answers(form, 40)
    pushes = []
    original = BufferStore.push

    def counting(self, targets, answer_ids):
        pushes.append((list(targets), list(answer_ids)))
        return original(self, targets, answer_ids)

    monkeypatch.setattr(BufferStore, "push", counting)
    results = emit_answers_submitted(ids)
    assert [r.answer_id for r in results] == ids
    assert all(len(r.enqueued) == 2 for r in results)
    assert len(pushes) == 1 and len(pushes[0][0]) == 2 and pushes[0][1] == ids
    assert world.ledger_counts() == {"ENQUEUED": 80}
    assert emit_answers_submitted(ids)[0].enqueued == ()  # again: nothing
