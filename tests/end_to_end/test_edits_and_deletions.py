"""The sheet follows the answer: edits and deletions, end to end on real Redis, a real
worker and the emulator through the real client, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import delete, select, update
from support.databases import BOTH_DATABASES
from support.waiting import wait_until

from sheetsync import (
    emit_answer_deleted,
    emit_answer_submitted,
    emit_answer_updated,
    emit_answers_deleted,
    emit_answers_submitted,
    emit_answers_updated,
)
from sheetsync.flush.changes import ChangeWriter
from sheetsync.models import QuestionType, SheetTransaction, SpreadSheet, SubmissionAnswer

pytestmark = BOTH_DATABASES


def text_question(form):
    """The first plain-text question of the form (its column title and id)."""
    return next(q for q in form.columns if q.type is QuestionType.SHORT_TEXT)


def edit(world, answer_id, question, value):
    """Change one answer's reply to ``question``, as the web app does."""
    with world.pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, answer_id)
        items = [item for item in answer.answer if item["questionId"] != question.id]
        answer.answer = [*items, {"questionId": question.id, "value": value}]


def cell(world, sheet, answer_id, title):
    """The cell of ``answer_id``'s row under the header ``title`` (None: no such row)."""
    rows = world.rows(sheet)
    column = rows[0].index(title)
    for row in rows[1:]:
        if row and row[0] == answer_id:
            return row[column] if column < len(row) else ""
    return None


def ledger(world, answer_id):
    with world.pipeline.sessions() as session:
        row = session.scalars(
            select(SheetTransaction).where(SheetTransaction.submission_answer_id == answer_id)
        ).one()
        return row.type.value, row.change


def served(admin) -> dict[str, int]:
    """Sheets requests the emulator served, by kind (counted as each is served, so a test
    reading them after the sheet changed sees every request that changed it)."""
    return dict(admin.stats()["requests"]["by_kind"])


def sent_since(admin, before: dict[str, int]) -> dict[str, int]:
    now = served(admin)
    return {kind: n - before.get(kind, 0) for kind, n in now.items() if n != before.get(kind, 0)}


def test_an_edit_rewrites_the_row_in_place_at_its_latest_version(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    before = served(admin)
    question = text_question(form)
    for n in range(5):  # five edits before the run: written once, at the latest
        edit(world, ids[1], question, f"edited {n}")
        emit_answer_updated(ids[1])
    wait_until(lambda: cell(world, sheet, ids[1], question.title) == "edited 4")
    wait_until(lambda: ledger(world, ids[1]) == ("COMPLETED", None))
    assert sent_since(admin, before).get("values.batchUpdate") == 1  # five edits, one write
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 3}
    wait_until(lambda: not world.leftover_keys())


def test_an_edit_finds_its_row_after_people_sorted_and_inserted_rows(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 6)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    admin.sort_rows(sheet.spreadsheet_id, sheet.gid, 0, descending=True)
    admin.insert_rows(sheet.spreadsheet_id, sheet.gid, 1, 3)
    admin.update_values(sheet.spreadsheet_id, "Responses!A2", [["a note of the owner's"]])
    before = world.rows(sheet)
    question = text_question(form)
    edit(world, ids[2], question, "after the sort")
    emit_answer_updated(ids[2])
    wait_until(lambda: cell(world, sheet, ids[2], question.title) == "after the sort")
    after = world.rows(sheet)
    changed = [n for n, (old, new) in enumerate(zip(before, after, strict=True)) if old != new]
    assert len(changed) == 1 and after[changed[0]][0] == ids[2]


def test_an_edit_leaves_the_owners_own_columns_alone(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    emit_answer_submitted(answer_id)
    wait_until(lambda: world.ids_in(sheet) == [answer_id])
    width = len(world.rows(sheet)[0])
    column = chr(ord("A") + width)  # right of sheetsync's columns
    notes = f"Responses!{column}1:{column}2"
    admin.update_values(sheet.spreadsheet_id, notes, [["Notes"], ["vip"]])
    question = text_question(form)
    edit(world, answer_id, question, "changed")
    emit_answer_updated(answer_id)
    wait_until(lambda: cell(world, sheet, answer_id, question.title) == "changed")
    assert cell(world, sheet, answer_id, "Notes") == "vip"


def test_a_deletion_removes_the_row_and_only_it(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    admin.sort_rows(sheet.spreadsheet_id, sheet.gid, 0, descending=True)
    with world.pipeline.sessions.begin() as session:
        emit_answers_deleted([ids[1], ids[3]], session=session)  # before the row's delete
        session.execute(delete(SubmissionAnswer).where(SubmissionAnswer.id.in_(ids[1:4:2])))
    wait_until(lambda: sorted(world.ids_in(sheet)) == sorted([ids[0], ids[2], ids[4]]))
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 3, "DELETED": 2})
    wait_until(lambda: not world.leftover_keys())


def a_person_sorts_before(monkeypatch, world, admin, sheet, sending: str) -> list[list[str]]:
    """Reverse the rows once, after column A was read and before the change's first
    request ``sending`` (``_send_updates``: an edit's cells or a blanked deletion's;
    ``_send_deletions``); returns the ids the sort left."""
    send = getattr(ChangeWriter, sending)
    sorted_between: list[list[str]] = []

    def sort_first(self, data):
        if not sorted_between:
            admin.sort_rows(sheet.spreadsheet_id, sheet.gid, 0, descending=True)
            sorted_between.append(world.ids_in(sheet))
        return send(self, data)

    monkeypatch.setattr(ChangeWriter, sending, sort_first)
    return sorted_between


def test_a_deletion_whose_rows_a_person_moved_meanwhile_loses_no_other_row(
    world, worker, admin, monkeypatch
):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 6)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    sorted_between = a_person_sorts_before(monkeypatch, world, admin, sheet, "_send_deletions")
    emit_answer_deleted(ids[1])
    # The deletion hit the row the sort moved into ids[1]'s place; the check after it
    # sees both: ids[1] deleted again, the other row appended again.
    left = sorted(ids[:1] + ids[2:])
    wait_until(lambda: sorted(world.ids_in(sheet)) == left, timeout=30)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 5, "DELETED": 1}, timeout=30)
    assert sorted_between == [ids[::-1]]
    assert sorted(world.ids_in(sheet)) == left  # each once
    assert ledger(world, ids[1]) == ("DELETED", None)


def test_an_edit_whose_rows_a_person_moved_meanwhile_loses_no_other_row(
    world, worker, admin, monkeypatch
):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 6)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    sorted_between = a_person_sorts_before(monkeypatch, world, admin, sheet, "_send_updates")
    question = text_question(form)
    edit(world, ids[1], question, "edited while a person sorted")
    emit_answer_updated(ids[1])
    # The edit landed on the row the sort moved into ids[1]'s place (ids[4]'s): the check
    # sees ids[4] gone (appended again) and ids[1] twice (one row kept, the other deleted).
    wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(ids), timeout=30)
    wait_until(lambda: ledger(world, ids[1]) == ("COMPLETED", None), timeout=30)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 6}, timeout=30)
    assert sorted_between == [ids[::-1]]
    assert sorted(world.ids_in(sheet)) == sorted(ids)  # each once
    assert cell(world, sheet, ids[1], question.title) == "edited while a person sorted"
    wait_until(lambda: not world.leftover_keys())


def test_a_row_a_person_deletes_while_an_edit_is_written_stays_deleted(
    world, worker, admin, monkeypatch
):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 6)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    send_updates = ChangeWriter._send_updates
    deleted_between: list[bool] = []

    def a_person_deletes_a_row_first(self, data):
        if not deleted_between:  # ids[4]'s row, below the edited one: nothing moves onto it
            admin.delete_rows(sheet.spreadsheet_id, sheet.gid, 5, 6)
            deleted_between.append(True)
        return send_updates(self, data)

    monkeypatch.setattr(ChangeWriter, "_send_updates", a_person_deletes_a_row_first)
    question = text_question(form)
    edit(world, ids[1], question, "edited while a person deleted a row")
    emit_answer_updated(ids[1])
    wait_until(lambda: ledger(world, ids[1]) == ("COMPLETED", None), timeout=30)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert deleted_between
    assert world.ids_in(sheet) == ids[:4] + ids[5:]  # the person's deletion is kept
    assert cell(world, sheet, ids[1], question.title) == "edited while a person deleted a row"
    assert ledger(world, ids[4]) == ("COMPLETED", None)


def test_a_blanked_deletion_whose_rows_a_person_moved_meanwhile_loses_no_other_row(
    world, worker, admin, monkeypatch
):
    form = world.form(pii=1)
    sheet = world.sheet(form)
    with world.pipeline.sessions.begin() as session:
        session.execute(update(SpreadSheet).values(blank_on_delete=True))
    ids = world.answers(form, 6)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    personal = next(q for q in form.columns if q.type is QuestionType.PERSONAL_INFO)
    kept = {i: cell(world, sheet, i, personal.title) for i in ids}
    assert all(kept.values())
    sorted_between = a_person_sorts_before(monkeypatch, world, admin, sheet, "_send_updates")
    emit_answer_deleted(ids[1])
    wait_until(lambda: ledger(world, ids[1]) == ("DELETED", None), timeout=30)
    wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(ids), timeout=30)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert sorted_between == [ids[::-1]]
    assert cell(world, sheet, ids[1], personal.title) == ""  # its one row, blanked
    for other in ids[:1] + ids[2:]:  # every other row as it was
        assert cell(world, sheet, other, personal.title) == kept[other]


def test_an_answer_deleted_before_its_run_is_never_written(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    with world.pipeline.sessions.begin() as session:
        emit_answers_submitted(ids, session=session)
        session.execute(delete(SubmissionAnswer).where(SubmissionAnswer.id == ids[0]))
        emit_answer_deleted(ids[0], session=session)  # after the row's delete
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 2, "DELETED": 1})
    assert world.ids_in(sheet) == ids[1:]
    assert "values.batchGet" not in served(admin)


def test_an_edit_of_a_deleted_answer_changes_nothing(world, worker):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 2)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    emit_answer_deleted(ids[0])
    result = emit_answer_updated(ids[0])
    assert result.enqueued == ()
    wait_until(lambda: world.ids_in(sheet) == ids[1:])
    wait_until(lambda: ledger(world, ids[0]) == ("DELETED", None))  # recorded after the send


def test_edits_and_deletions_of_many_answers_take_few_requests(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 60)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    before = served(admin)
    question = text_question(form)
    with world.pipeline.sessions.begin() as session:
        for answer_id in ids[:30]:
            answer = session.get(SubmissionAnswer, answer_id)
            items = [item for item in answer.answer if item["questionId"] != question.id]
            answer.answer = [*items, {"questionId": question.id, "value": f"v2 {answer_id}"}]
        emit_answers_updated(ids[:30], session=session)
        emit_answers_deleted(ids[30:], session=session)
    wait_until(lambda: world.ids_in(sheet) == ids[:30])
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 30, "DELETED": 30})
    assert all(cell(world, sheet, i, question.title) == f"v2 {i}" for i in ids[:30])
    assert sent_since(admin, before) == {
        "values.batchGet": 2,  # column A, and again after the deletions (the check)
        "values.batchUpdate": 1,  # the edits
        "spreadsheets.batchUpdate": 1,  # the deletions
    }


def rolled_over(world, pipeline_env):
    """25 answers landed in three tabs of 10 rows (and the header) each: the linked
    "Responses", then "Responses (2)" and "Responses (3)". Returns (form, sheet, ids)."""
    pipeline_env(tab_cell_limit=5 * 11, batch_size=10)
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    sheet = world.sheet(form, "Responses")
    ids = world.answers(form, 25)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 25}, timeout=30)
    return form, sheet, ids


def test_edits_and_deletions_reach_rows_in_the_tabs_a_link_rolled_over_from(
    world, worker, pipeline_env, admin
):
    form, sheet, ids = rolled_over(world, pipeline_env)
    tabs = admin.spreadsheet(sheet.spreadsheet_id)["sheets"]
    gids = {t["properties"]["title"]: t["properties"]["sheetId"] for t in tabs}
    assert list(gids) == ["Responses", "Responses (2)", "Responses (3)"]
    question = text_question(form)
    first, second = ids[3], ids[14]  # in tab 1 and tab 2
    edit(world, first, question, "edited in tab 1")
    emit_answer_updated(first)
    emit_answers_deleted([second, ids[24]])
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 23, "DELETED": 2}, timeout=30)
    wait_until(lambda: ledger(world, first) == ("COMPLETED", None))

    def ids_of(title):
        return [row[0] for row in admin.sheet_values(sheet.spreadsheet_id, gids[title])[1:]]

    assert ids_of("Responses") == ids[:10]
    assert ids_of("Responses (2)") == [i for i in ids[10:20] if i != second]
    assert ids_of("Responses (3)") == ids[20:24]
    assert cell(world, sheet, first, question.title) == "edited in tab 1"


def test_an_edit_of_a_row_a_person_deleted_does_not_bring_it_back(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    admin.delete_rows(sheet.spreadsheet_id, sheet.gid, 2, 3)  # ids[1]'s row, by hand
    edit(world, ids[1], text_question(form), "edited after the owner removed it")
    emit_answer_updated(ids[1])
    wait_until(lambda: ledger(world, ids[1]) == ("COMPLETED", None))
    assert world.ids_in(sheet) == [ids[0], ids[2]]
    wait_until(lambda: not world.leftover_keys())


def test_an_edit_that_cannot_become_a_row_keeps_the_rows_last_version(world, worker):
    form = world.form(pii=1)
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    emit_answer_submitted(answer_id)
    wait_until(lambda: world.ids_in(sheet) == [answer_id])
    before = world.rows(sheet)[1]
    pii = next(q for q in form.columns if q.type is QuestionType.PERSONAL_INFO)
    edit(world, answer_id, pii, "not a token: plain text where personal info goes")
    emit_answer_updated(answer_id)
    wait_until(lambda: ledger(world, answer_id) == ("COMPLETED", None))
    assert world.rows(sheet)[1] == before
    with world.pipeline.sessions() as session:
        reason = session.scalars(
            select(SheetTransaction.error_message).where(
                SheetTransaction.submission_answer_id == answer_id
            )
        ).one()
    assert reason and answer_id in reason and "not a token" not in reason


def test_a_deletion_whose_roll_over_tab_was_renamed_away_stays_pending(
    world, worker, pipeline_env, admin
):
    from sheetsync.emit.erasure import erasure_status
    from sheetsync.recovery import repair

    _form, sheet, ids = rolled_over(world, pipeline_env)

    def rename(title):
        properties = {"sheetId": sheet.gid, "title": title}
        admin.batch_update(
            sheet.spreadsheet_id,
            [{"updateSheetProperties": {"properties": properties, "fields": "title"}}],
        )

    rename("Answers")  # "Responses (2)" is no longer "Answers (2)": sheetsync cannot tell
    emit_answers_deleted([ids[14]])  # in tab 2
    wait_until(lambda: not world.leftover_keys())
    [place] = erasure_status([ids[14]], services=world.pipeline).places
    assert place.outcome == "pending" and "was not found by its title" in place.detail
    assert ledger(world, ids[14]) == ("COMPLETED", "DELETE")  # nothing says it is gone

    rename("Responses")
    repair.reconcile(world.pipeline)  # beat's reconciler pushes the pending deletion again
    wait_until(lambda: ledger(world, ids[14]) == ("DELETED", None))
    [place] = erasure_status([ids[14]], services=world.pipeline).places
    assert (place.outcome, place.detail) == ("erased", "its row was removed")
