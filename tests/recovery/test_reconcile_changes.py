"""The reconciler and pending edits and deletions: a change whose push Redis lost is pushed
again, unless a PENDING dead letter holds it (its replay will); a REPLAYING one's ids are
back in circulation, so their lost pushes are the reconciler's."""

from __future__ import annotations

import pytest

from sheetsync import emit_answer_deleted, emit_answers_submitted
from sheetsync.models import DeadLetter, DeadLetterAnswer, DeadLetterReason, DeadLetterStatus
from sheetsync.recovery import repair
from sheetsync.redis_keys import BufferKey


def _hold(world, form, sheet, answer_id, status):
    with world.pipeline.sessions.begin() as session:
        entry = DeadLetter(
            user_id=form.owner_id,
            submission_id=form.submission_id,
            spread_sheet_id=sheet.spreadsheet_id,
            sheet_id=sheet.gid,
            reason=DeadLetterReason.TRANSIENT_EXHAUSTED,
            status=status,
        )
        session.add(entry)
        session.flush()
        session.add(DeadLetterAnswer(dead_letter_id=entry.id, answer_id=answer_id))


@pytest.mark.parametrize(
    ("status", "pushed"), [(DeadLetterStatus.REPLAYING, 1), (DeadLetterStatus.PENDING, 0)]
)
def test_a_lost_deletion_is_pushed_again_unless_a_pending_dead_letter_holds_it(
    world, status, pushed
):
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    emit_answers_submitted([answer_id])  # no worker: it stays ENQUEUED
    emit_answer_deleted(answer_id)
    _hold(world, form, sheet, answer_id, status)
    world.pipeline.redis.flushdb()  # Redis lost the buffer

    report = repair.reconcile(world.pipeline)
    assert report.answers == pushed
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    held = [raw.decode() for raw in world.pipeline.redis.lrange(key.buf, 0, -1)]
    assert held == [answer_id] * pushed
