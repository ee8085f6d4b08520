"""A crash at every step of an edit and of a deletion: the sheet ends showing each
answer once at its latest version, and no row of a deleted one (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import delete
from support.crashes import crash_once
from support.databases import BOTH_DATABASES
from support.waiting import wait_until

from sheetsync import emit_answer_deleted, emit_answer_updated, emit_answers_submitted
from sheetsync.buffers.store import BufferStore
from sheetsync.flush.changes import ChangeWriter
from sheetsync.flush.run import FlushRun
from sheetsync.models import QuestionType, SubmissionAnswer
from sheetsync.recovery import repair
from sheetsync.redis_keys import PREFIX

pytestmark = BOTH_DATABASES


def sent(run, batch, part):
    """A record of what a request of edits or deletions applied (not a finding of no row)."""
    return part.updated or part.deleted


@pytest.fixture
def landed(world, pipeline_env, worker):
    """Five answers in the sheet; returns (form, sheet, ids)."""
    pipeline_env(lease_s=1.5, sweep_grace_s=0.5)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    wait_until(lambda: not world.leftover_keys())
    return form, sheet, ids


def change(world, form, ids, kind):
    """Edit ids[1] (its first text question says "latest") or delete ids[1]."""
    question = next(q for q in form.columns if q.type is QuestionType.SHORT_TEXT)
    with world.pipeline.sessions.begin() as session:
        if kind == "update":
            answer = session.get(SubmissionAnswer, ids[1])
            items = [item for item in answer.answer if item["questionId"] != question.id]
            answer.answer = [*items, {"questionId": question.id, "value": "latest"}]
            emit_answer_updated(ids[1], session=session)
        else:
            emit_answer_deleted(ids[1], session=session)
            session.execute(delete(SubmissionAnswer).where(SubmissionAnswer.id == ids[1]))
    return question


def followed(world, sheet, ids, kind, question):
    """Whether the sheet shows the change exactly: each id once, the edit or no row."""
    rows = world.rows(sheet)
    column = rows[0].index(question.title)
    found = [row[0] for row in rows[1:] if row]
    if kind == "delete":
        return found == [ids[0], *ids[2:]]
    row = next((r for r in rows[1:] if r and r[0] == ids[1]), [])
    return found == ids and len(row) > column and row[column] == "latest"


def settle_all(world):
    """Beat's repairs until nothing is left in Redis."""

    def done():
        repair.sweep(world.pipeline)
        repair.reconcile(world.pipeline)
        return not world.leftover_keys()

    wait_until(done, timeout=30, interval=0.25)


def unchecked_notes(world) -> int:
    """Sheets whose cache holds the note of changes sent and not yet checked."""
    client = world.pipeline.redis
    sheets = [k for k in client.scan_iter(f"{PREFIX}:{{*") if k.endswith(b":sheet")]
    return sum(bool(client.hexists(k, "unchecked")) for k in sheets)


KINDS = pytest.mark.parametrize("kind", ["update", "delete"])


@KINDS
def test_crash_before_the_change_is_sent(landed, world, monkeypatch, kind):
    form, sheet, ids = landed
    name = "_send_updates" if kind == "update" else "_send_deletions"
    fired = crash_once(monkeypatch, ChangeWriter, name)
    question = change(world, form, ids, kind)
    wait_until(lambda: fired)
    settle_all(world)
    wait_until(lambda: followed(world, sheet, ids, kind, question))
    expected = {"COMPLETED": 5} if kind == "update" else {"COMPLETED": 4, "DELETED": 1}
    wait_until(lambda: world.ledger_counts() == expected)


@KINDS
def test_crash_after_the_change_before_the_ledger(landed, world, monkeypatch, kind):
    form, sheet, ids = landed
    fired = crash_once(monkeypatch, FlushRun, "record_followed", when=sent)
    question = change(world, form, ids, kind)
    wait_until(lambda: fired)
    assert followed(world, sheet, ids, kind, question)  # sent, not recorded
    settle_all(world)
    wait_until(lambda: followed(world, sheet, ids, kind, question))
    expected = {"COMPLETED": 5} if kind == "update" else {"COMPLETED": 4, "DELETED": 1}
    wait_until(lambda: world.ledger_counts() == expected)


@KINDS
def test_crash_after_the_ledger_before_the_trim(landed, world, monkeypatch, admin, kind):
    form, sheet, ids = landed
    fired = crash_once(
        monkeypatch, BufferStore, "trim", when=lambda store, key, lease, count, last: count > 0
    )
    question = change(world, form, ids, kind)
    wait_until(lambda: fired)
    writes_before = admin.stats()["requests"]["by_kind"]
    settle_all(world)
    assert followed(world, sheet, ids, kind, question)
    assert admin.stats()["requests"]["by_kind"] == writes_before  # nothing sent again


@KINDS
def test_a_change_whose_push_was_lost_is_pushed_by_the_reconciler(landed, world, monkeypatch, kind):
    form, sheet, ids = landed
    monkeypatch.setattr("sheetsync.emit.changes.push_after_commit", lambda *a, **k: None)
    question = change(world, form, ids, kind)
    assert not world.leftover_keys()  # the id never reached Redis
    report = repair.reconcile(world.pipeline)
    assert report.answers == 1
    wait_until(lambda: followed(world, sheet, ids, kind, question))
    settle_all(world)


@KINDS
def test_a_change_applied_whose_reply_was_lost(landed, world, admin, kind):
    form, sheet, ids = landed
    admin.add_fault(
        "values.batchUpdate" if kind == "update" else "spreadsheets.batchUpdate", 1, "drop"
    )
    question = change(world, form, ids, kind)
    settle_all(world)
    wait_until(lambda: followed(world, sheet, ids, kind, question), timeout=30)
    expected = {"COMPLETED": 5} if kind == "update" else {"COMPLETED": 4, "DELETED": 1}
    wait_until(lambda: world.ledger_counts() == expected)


@KINDS
def test_a_crash_between_the_change_and_its_check_after_a_person_sorted(
    landed, world, monkeypatch, admin, kind
):
    """The change lands on another answer's row (a sort came between the read and the
    write) and the run dies before reading column A again: the next run still sees the
    row that went, by the note the first one kept, and appends it again."""
    form, sheet, ids = landed
    name = "_send_updates" if kind == "update" else "_send_deletions"
    send = getattr(ChangeWriter, name)
    sorted_between: list[bool] = []

    def a_person_sorts_first(self, data):
        if not sorted_between:
            admin.sort_rows(sheet.spreadsheet_id, sheet.gid, 0, descending=True)
            sorted_between.append(True)
        return send(self, data)

    monkeypatch.setattr(ChangeWriter, name, a_person_sorts_first)
    fired = crash_once(monkeypatch, ChangeWriter, "_check")
    question = change(world, form, ids, kind)
    wait_until(lambda: fired)  # the change landed on ids[3]'s row: the sort put it there
    settle_all(world)
    expected = {"COMPLETED": 5} if kind == "update" else {"COMPLETED": 4, "DELETED": 1}
    wait_until(lambda: world.ledger_counts() == expected, timeout=30)
    left = ids if kind == "update" else [ids[0], *ids[2:]]
    wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(left), timeout=30)
    assert unchecked_notes(world) == 0
    if kind == "update":
        rows = world.rows(sheet)
        column = rows[0].index(question.title)
        [row] = [r for r in rows[1:] if r and r[0] == ids[1]]
        assert row[column] == "latest"
