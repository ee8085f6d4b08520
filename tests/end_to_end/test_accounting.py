"""A mixed-fault run: every (answer, sheet) ends in exactly one place, and no PII leaks."""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import suppress

import pytest
from sqlalchemy import delete, select
from support.waiting import wait_until

from sheetsync import crypto, emit_answer_submitted
from sheetsync.deadletters import store
from sheetsync.errors import CryptoError
from sheetsync.models import (
    DeadLetter,
    DeadLetterStatus,
    QuestionType,
    SheetTransaction,
    SpreadSheet,
    SubmissionAnswer,
    TransactionType,
)

ANSWERS = 1000


def plaintext_pii(pipeline) -> set[str]:
    """Every personal-info value of every answer, decrypted."""
    from sheetsync.models import Question

    with pipeline.sessions() as session:
        pii_questions = set(
            session.scalars(select(Question.id).where(Question.type == QuestionType.PERSONAL_INFO))
        )
        values = set()
        for answer_id, items in session.execute(
            select(SubmissionAnswer.id, SubmissionAnswer.answer)
        ):
            for item in items:
                question_id = item["questionId"]
                if question_id in pii_questions and item.get("value"):
                    with suppress(CryptoError):  # the tampered one
                        values.add(
                            crypto.decrypt_answer_value(
                                item["value"], answer_id=answer_id, question_id=question_id
                            )
                        )
    return values


def redis_dump(client) -> str:
    parts = []
    for key in client.scan_iter("*"):
        parts.append(key.decode(errors="replace"))
        kind = client.type(key).decode()
        if kind == "string":
            parts.append(client.get(key).decode(errors="replace"))
        elif kind == "list":
            parts.extend(v.decode(errors="replace") for v in client.lrange(key, 0, -1))
        elif kind == "hash":
            parts.extend(f"{k}={v}" for k, v in client.hgetall(key).items())
        elif kind == "zset":
            parts.extend(v.decode(errors="replace") for v in client.zrange(key, 0, -1))
        elif kind == "set":
            parts.extend(v.decode(errors="replace") for v in client.smembers(key))
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_mixed_faults_account_for_every_answer_and_leak_no_pii(
    world, pipeline_env, alerts, admin, caplog, db_url
):
    import redis
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES

    caplog.set_level(logging.INFO)
    pipeline_env(flush_threshold=50, batch_size=40, google_timeout_s=1)
    pipeline = world.pipeline
    healthy_form = world.form("healthy")
    healthy = world.sheet(healthy_form)
    gone = world.sheet(healthy_form, "Gone")
    flaky_form = world.form("flaky")
    flaky = world.sheet(flaky_form)
    revoked_form = world.form("revoked")
    revoked = world.sheet(revoked_form)
    admin.delete_spreadsheet(gone.spreadsheet_id)

    forms = [healthy_form, flaky_form, revoked_form]
    ids = []
    for n in range(ANSWERS):
        ids.extend(world.answers(forms[n % 3], 1, prefix="mix", start=n))
    # One answer is deleted before its flush; one has a tampered PII token.
    with pipeline.sessions.begin() as session:
        session.execute(delete(SubmissionAnswer).where(SubmissionAnswer.id == "mix_3"))
        tampered = session.get(SubmissionAnswer, "mix_6")
        tampered.answer = [
            {**item, "value": item["value"][:-4] + "AAAA"}
            if isinstance(item.get("value"), str) and len(item["value"]) > 40
            else item
            for item in tampered.answer
        ]
    admin.add_fault("values.append", 3, "error", status=503, account="google-flaky")
    admin.add_fault("values.append", 1, "drop", account="google-healthy")

    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        for n, answer_id in enumerate(ids):
            if answer_id == "mix_3":
                continue
            emit_answer_submitted(answer_id)
            if n == ANSWERS // 2:
                admin.revoke("google-revoked")

        def quiet() -> bool:
            with pipeline.sessions() as session:
                open_rows = session.scalar(
                    select(SheetTransaction.id)
                    .where(SheetTransaction.type == TransactionType.ENQUEUED)
                    .limit(1)
                )
            return open_rows is None and not world.leftover_keys()

        wait_until(quiet, timeout=120, interval=0.25)

    # -- accounting: each (answer, linked sheet) in exactly one place ----------------------
    in_sheets = {}
    for sheet in (healthy, flaky, revoked):
        landed = world.ids_in(sheet)
        assert len(landed) == len(set(landed)), "no answer twice in a sheet"
        in_sheets[(sheet.spreadsheet_id, sheet.gid)] = set(landed)
    with pipeline.sessions() as session:
        links = session.execute(
            select(SpreadSheet.submission_id, SpreadSheet.spread_sheet_id, SpreadSheet.sheet_id)
        ).all()
        answers = dict(
            session.execute(select(SubmissionAnswer.id, SubmissionAnswer.submission_id)).all()
        )
        ledger = {
            (t.submission_answer_id, t.spread_sheet_id, t.sheet_id): t
            for t in session.scalars(select(SheetTransaction))
        }
        pending = Counter()
        for entry in session.scalars(
            select(DeadLetter).where(DeadLetter.status == DeadLetterStatus.PENDING)
        ):
            for answer_id in store.answer_ids(session, entry.id):
                pending[(answer_id, entry.spread_sheet_id, entry.sheet_id)] += 1
        entries = list(session.scalars(select(DeadLetter)))

    places = Counter()
    emitted = [i for i in ids if i != "mix_3"]
    for answer_id in emitted:
        submission = answers.get(answer_id)
        for form_id, spreadsheet_id, gid in links:
            if form_id != submission:
                continue
            target = (answer_id, spreadsheet_id, gid)
            row = ledger[target]
            where = []
            if answer_id in in_sheets.get((spreadsheet_id, gid), set()):
                where.append("sheet")
            if pending[target]:
                where.append("dead letter")
            if row.type is TransactionType.FAILED:
                assert row.error_message
                where.append("failed")
            assert len(where) == 1, (target, row.type, where)
            assert pending[target] <= 1
            expected = {
                "sheet": TransactionType.COMPLETED,
                "dead letter": TransactionType.DEAD_LETTERED,
                "failed": TransactionType.FAILED,
            }[where[0]]
            assert row.type is expected, (target, row.type, where)
            places[where[0]] += 1
    assert places["sheet"] > 0 and places["dead letter"] > 0 and places["failed"] > 0
    assert ledger[("mix_6", healthy.spreadsheet_id, healthy.gid)].type is TransactionType.FAILED
    pending_entries = [e for e in entries if e.status is DeadLetterStatus.PENDING]
    assert len(pending_entries) == 1, [(e.reason, e.user_id) for e in pending_entries]

    # -- PII audit ------------------------------------------------------------------------
    secrets = plaintext_pii(pipeline)
    assert len(secrets) > 100
    haystacks = {
        "redis": redis_dump(pipeline.redis),
        "broker": redis_dump(redis.Redis.from_url(pipeline.settings.celery_broker_url)),
        "dead letters": " ".join(f"{world.ids_of(e)} {e.error_message}" for e in entries),
        "ledger": " ".join(str(t.error_message) for t in ledger.values()),
        "logs": caplog.text,
        "alerts": " ".join(alerts.texts),
    }
    assert alerts.texts
    for place, text in haystacks.items():
        leaked = [value for value in secrets if value in text]
        assert not leaked, f"personal info in {place}: {len(leaked)} values"
