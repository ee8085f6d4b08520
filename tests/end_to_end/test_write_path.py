"""The write path under Google's and a person's surprises: a refused row, a reply that
does not say where the rows went, rows deleted above the last one we wrote, a PII key
that is missing, and a FAILED answer sent again on purpose."""

from __future__ import annotations

import base64

import pytest
from sqlalchemy import select
from support.waiting import wait_until

from sheetsync import emit_answer_submitted, emit_answers_submitted, resend_failed
from sheetsync.crypto import generate_key
from sheetsync.deadletters import replay, store
from sheetsync.flush.run import FlushRun
from sheetsync.flush.writer import REFUSED_REASON
from sheetsync.models import (
    DeadLetterReason,
    DeadLetterStatus,
    SheetTransaction,
    SubmissionAnswer,
    TransactionType,
)
from sheetsync.recovery import repair

POISON = "a value Google refuses"


class Crash(Exception):
    """Stands for the process dying at this point."""


def ledger(world, sheet):
    with world.pipeline.sessions() as session:
        rows = session.scalars(
            select(SheetTransaction).where(SheetTransaction.spread_sheet_id == sheet.spreadsheet_id)
        )
        return {row.submission_answer_id: (row.type, row.error_message) for row in rows}


def set_value(world, answer_id, question_id, value):
    with world.pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, answer_id)
        items = [i for i in answer.answer if i.get("questionId") != question_id]
        answer.answer = [*items, {"questionId": question_id, "value": value}]


def test_a_row_google_refuses_fails_alone_and_the_rest_lands(world, worker, admin):
    form = world.form(pii=0)
    sheet = world.sheet(form)
    ids = world.answers(form, 9)
    text_question = form.columns[0].id
    set_value(world, ids[5], text_question, POISON)
    admin.refuse(POISON, count=100)  # every append that carries it

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == [i for i in ids if i != ids[5]]
    states = ledger(world, sheet)
    assert states[ids[5]] == (TransactionType.FAILED, f"answer {ids[5]}: {REFUSED_REASON}")
    assert {states[i][0] for i in ids if i != ids[5]} == {TransactionType.COMPLETED}
    assert world.dead_letters() == []


def test_a_reply_without_a_parseable_range_still_counts_as_landed(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    first, second = world.answers(form, 5), world.answers(form, 5, start=6)
    admin.garble(1)  # the rows are written; updatedRange says 'Sheet1'

    emit_answers_submitted(first)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    emit_answers_submitted(second)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == first + second
    assert world.ledger_counts() == {"COMPLETED": 10}
    assert admin.stats()["requests"]["by_kind"]["values.append"] == 2


def test_recovery_finds_rows_that_moved_above_the_last_known_row(
    world, pipeline_env, worker, monkeypatch, admin
):
    """Batch 2 lands and its run dies before COMPLETED; a person then deletes two rows
    of batch 1, so batch 2's rows move up, above where the intent says the sheet ended.
    Recovery reads the whole id column and appends none of them again."""
    pipeline_env(lease_s=1.5, sweep_grace_s=0.5)
    form = world.form()
    sheet = world.sheet(form)
    first, second = world.answers(form, 5), world.answers(form, 5, start=6)
    emit_answers_submitted(first)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    fired = []
    original = FlushRun.settle

    def crash(run, batch, *args, **kwargs):
        if batch.rows and not fired:
            fired.append(True)
            admin.delete_rows(sheet.spreadsheet_id, sheet.gid, 1, 3)  # a person, meanwhile
            raise Crash("the process dies here")
        return original(run, batch, *args, **kwargs)

    monkeypatch.setattr(FlushRun, "settle", crash)
    emit_answers_submitted(second)
    wait_until(lambda: fired, timeout=30)

    def settled():
        repair.sweep(world.pipeline)
        return not world.leftover_keys()

    wait_until(settled, timeout=30, interval=0.25)
    assert world.ids_in(sheet) == first[2:] + second
    assert world.ledger_counts() == {"COMPLETED": 10}
    assert admin.stats()["requests"]["by_kind"]["values.append"] == 2


def test_a_missing_pii_key_dead_letters_then_a_replay_delivers_once_it_is_back(
    world, pipeline_env, alerts, worker, pii_keys
):
    """A token under a key that was removed from SHEETSYNC_PII_KEYS is a configuration
    error, not a bad answer: the buffer is retried, parked with an alert, and replayed
    once the key is back."""
    removed = generate_key()
    pipeline_env(pii_keys=f"{removed},{base64.urlsafe_b64encode(pii_keys[0]).decode()}")
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 4)  # encrypted under ``removed``, the first key
    current = ",".join(base64.urlsafe_b64encode(k).decode() for k in pii_keys)
    pipeline_env(pii_keys=current, retry_max=2)

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(world.dead_letters, timeout=30)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.CONFIGURATION
    assert entry.status is DeadLetterStatus.PENDING
    assert world.ids_of(entry) == sorted(ids)
    assert world.rows(sheet) == []
    assert world.ledger_counts() == {"DEAD_LETTERED": 4}
    wait_until(lambda: any("SHEETSYNC_PII_KEYS" in text for text in alerts.texts))

    pipeline_env(pii_keys=f"{current},{removed}")  # the key is back, as an old one
    store.make_due(world.pipeline.sessions, ids=[entry.id])
    assert replay.dispatch_due(world.pipeline) == 1
    wait_until(lambda: world.ids_in(sheet) == ids, timeout=30)
    wait_until(
        lambda: (
            world.complete_replays() and world.dead_letters()[0].status is DeadLetterStatus.DONE
        ),
        timeout=30,
    )
    assert world.ledger_counts() == {"COMPLETED": 4}


def test_a_failed_answer_is_sent_again_only_when_asked(world, worker):
    form = world.form(pii=0)
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    with world.pipeline.sessions.begin() as session:
        session.get(SubmissionAnswer, ids[1]).answer = None  # a broken answer
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ids_in(sheet) == [ids[0], ids[2]]
    assert emit_answer_submitted(ids[1]).enqueued == ()  # emitting again changes nothing

    with world.pipeline.sessions.begin() as session:  # the web app repairs it
        session.get(SubmissionAnswer, ids[1]).answer = [
            {"questionId": form.columns[0].id, "value": "fixed"}
        ]
    result = resend_failed([ids[1]])
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert (result.resent, result.unlinked) == (1, 0)
    assert world.ids_in(sheet) == [ids[0], ids[2], ids[1]]
    assert world.ledger_counts() == {"COMPLETED": 3}
    assert resend_failed([ids[1]]).resent == 0  # COMPLETED now: nothing to resend


@pytest.mark.timing
def test_no_sheets_request_outlives_the_runs_lease(world, pipeline_env, admin):
    """Google hangs longer than the lease on the first read; the request is given up
    before the lease ends (not after GOOGLE_TIMEOUT_S), and the run retries."""
    import time

    from sheetsync.flush.entry import flush
    from sheetsync.redis_keys import BufferKey
    from sheetsync.services import get_services

    pipeline_env(lease_s=2, google_timeout_s=6, flush_delay_s=60, flush_idle_s=0.1)
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    emit_answer_submitted(answer_id)
    admin.add_fault("spreadsheets.getByDataFilter", 1, "hang", seconds=4)
    time.sleep(0.2)  # past FLUSH_IDLE_S: a lone answer, not a burst to wait for

    started = time.monotonic()
    outcome = flush(pipeline, pipeline.store.job_state(key)["token"])
    elapsed = time.monotonic() - started

    assert outcome.status == "retry"
    # Given up at the lease's end (2 s from the renewal before the read), long before
    # the hang (4 s) or GOOGLE_TIMEOUT_S (6 s) would have ended it.
    assert 1.5 < elapsed < 3
    assert admin.stats()["faults_fired"]
    assert flush(pipeline, pipeline.store.job_state(key)["token"]).status in {"done", "again"}
    assert world.ids_in(sheet) == [answer_id]
