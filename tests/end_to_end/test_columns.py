"""A column map per link, end to end: the form edited between batches, row 1 edited by
hand, a paused link resumed by the CLI. Real worker, Redis, the emulator read back
through google-api-python-client (docs/ARCHITECTURE.md, "Columns")."""

from __future__ import annotations

import json
import subprocess

import pytest
from sqlalchemy import select
from support.alerts import AlertSink
from support.cli import SCRIPT
from support.databases import BOTH_DATABASES
from support.forms import EditableForm, by_title, read, sheets_api
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.deadletters import store
from sheetsync.deadletters.replay import dispatch_due
from sheetsync.models import (
    DeadLetterReason,
    DeadLetterStatus,
    QuestionType,
    SheetColumn,
    SpreadSheet,
    TransactionType,
)
from sheetsync.redis_keys import BufferKey

TEXT, NUMBER, JUMBO = QuestionType.SHORT_TEXT, QuestionType.NUMBER, QuestionType.JUMBOTRON
FIXED = ["Answer ID", "Submitter", "Submitted at"]


def _form(world):
    form = EditableForm(
        world,
        [
            ("q_team", "Team", TEXT),
            ("q_intro", "Welcome!", JUMBO),
            ("q_count", "Count", NUMBER),
            ("q_note", "Note", TEXT),
        ],
    )
    return form, world.sheet(form.seeded)


def _send(world, sheet, ids):
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: set(ids) <= set(world.ids_in(sheet)))


def _key(form, sheet):
    return BufferKey(form.seeded.owner_id, form.form_id, sheet.spreadsheet_id, sheet.gid)


def _forget_header_check(world, form, sheet):
    """What a day without writes (the cache's lifetime) does: row 1 is checked again."""
    world.pipeline.store.forget_sheet(_key(form, sheet), "header_ok")


@BOTH_DATABASES
def test_form_edits_between_batches_keep_every_value_under_its_title(world, worker, emulator):
    form, sheet = _form(world)
    first = [form.answer({"q_team": "red", "q_intro": None, "q_count": "3", "q_note": "hi"})]
    _send(world, sheet, first)
    assert read(sheets_api(emulator), sheet.spreadsheet_id)[0] == [*FIXED, "Team", "Count", "Note"]

    # Parked before the edit: its answer to the question about to be deleted must land.
    parked = form.answer({"q_team": "blue", "q_count": "4", "q_note": "from the dead letter"})
    with world.pipeline.sessions.begin() as session:
        store.park(
            session,
            _key(form, sheet),
            [parked],
            DeadLetterReason.TRANSIENT_EXHAUSTED,
            "Sheets API 503",
            delay_s=0,
        )

    form.add("q_age", "Age", NUMBER, position=1)  # in the middle of the form
    form.delete("q_note")
    form.reorder(["q_count", "q_age", "q_intro", "q_team"])
    form.rename("q_team", "Department")
    # Submitted before the edit, still buffered after it: answers the deleted question.
    buffered = form.answer({"q_team": "green", "q_count": "5", "q_note": "still here"})
    after = form.answer({"q_team": "gold", "q_count": "6", "q_age": "41"})
    _send(world, sheet, [buffered, after])
    assert dispatch_due(world.pipeline) == 1
    wait_until(lambda: parked in world.ids_in(sheet))

    rows = read(sheets_api(emulator), sheet.spreadsheet_id)
    assert rows[0] == [*FIXED, "Department", "Count", "Note", "Age"]
    values = by_title(rows)
    assert {k: {t: v for t, v in row.items() if t not in FIXED} for k, row in values.items()} == {
        first[0]: {"Department": "red", "Count": 3, "Note": "hi"},
        parked: {"Department": "blue", "Count": 4, "Note": "from the dead letter"},
        buffered: {"Department": "green", "Count": 5, "Note": "still here"},
        after: {"Department": "gold", "Count": 6, "Age": 41},
    }
    wait_until(world.complete_replays)
    assert world.ledger_counts() == {"COMPLETED": 4}
    with world.pipeline.sessions() as session:
        mapped = {
            row.question_id: row.position
            for row in session.execute(select(SheetColumn.question_id, SheetColumn.position))
        }
    # Fixed columns first; a JUMBOTRON never gets a column; the new question the next
    # free one; the deleted one keeps its own.
    assert mapped == {
        "#answer_id": 0,
        "#submitter": 1,
        "#submitted_at": 2,
        "q_team": 3,
        "q_count": 4,
        "q_note": 5,
        "q_age": 6,
    }


def test_a_moved_column_is_followed(world, worker, emulator, admin):
    form, sheet = _form(world)
    _send(world, sheet, [form.answer({"q_team": "red", "q_count": "1", "q_note": "a"})])
    # A person inserts a column of their own before "Count", and types its title.
    admin.insert_columns(sheet.spreadsheet_id, sheet.gid, 4, 5)
    admin.update_values(sheet.spreadsheet_id, "'Responses'!E1", [["My notes"]])
    _forget_header_check(world, form, sheet)

    second = form.answer({"q_team": "blue", "q_count": "2", "q_note": "b"})
    _send(world, sheet, [second])
    rows = read(sheets_api(emulator), sheet.spreadsheet_id)
    assert rows[0] == [*FIXED, "Team", "My notes", "Count", "Note"]
    assert {t: v for t, v in by_title(rows)[second].items() if t not in FIXED} == {
        "Team": "blue",
        "Count": 2,
        "Note": "b",
    }

    # Checked once: the next batches cost one append each, and no read of row 1.
    before = admin.stats()["requests"]["by_kind"]
    _send(world, sheet, [form.answer({"q_team": "x"})])
    after = admin.stats()["requests"]["by_kind"]
    for read_or_header in ("spreadsheets.getByDataFilter", "spreadsheets.batchUpdate"):
        assert after.get(read_or_header, 0) == before.get(read_or_header, 0), read_or_header
    assert after["values.append"] == before["values.append"] + 1


def test_a_cleared_sheet_gets_its_header_back(world, worker, emulator, admin):
    form, sheet = _form(world)
    _send(world, sheet, [form.answer({"q_team": "red", "q_count": "1"})])
    admin.update_values(sheet.spreadsheet_id, "'Responses'!A1:F2", [[""] * 6, [""] * 6])
    assert world.rows(sheet) == []
    _forget_header_check(world, form, sheet)

    second = form.answer({"q_team": "blue", "q_count": "2", "q_note": "b"})
    _send(world, sheet, [second])
    rows = read(sheets_api(emulator), sheet.spreadsheet_id)
    assert rows[0] == [*FIXED, "Team", "Count", "Note"]
    assert [row[0] for row in rows[1:]] == [second]
    assert {t: v for t, v in by_title(rows)[second].items() if t not in FIXED} == {
        "Team": "blue",
        "Count": 2,
        "Note": "b",
    }


def _link(world, sheet) -> SpreadSheet:
    with world.pipeline.sessions() as session:
        return session.scalars(
            select(SpreadSheet).where(SpreadSheet.spread_sheet_id == sheet.spreadsheet_id)
        ).one()


def _sheetsync(*args: str) -> subprocess.CompletedProcess[str]:
    """The real console script, with this test's environment."""
    done = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


@BOTH_DATABASES
def test_an_unmatchable_header_pauses_the_link_until_resumed(
    world, worker, emulator, admin, alerts, pipeline_env
):
    owner_hook = AlertSink()  # the owner's webhook: told of the pause and of the replay
    pipeline_env(owner_hook=owner_hook.url)
    form, sheet = _form(world)
    first = form.answer({"q_team": "red", "q_count": "1"})
    _send(world, sheet, [first])
    # A person retypes the "Count" heading: no column holds it any more.
    admin.update_values(sheet.spreadsheet_id, "'Responses'!E1", [["How many"]])
    _forget_header_check(world, form, sheet)

    waiting = [form.answer({"q_team": "blue", "q_count": "2"}) for _ in range(3)]
    for answer_id in waiting:
        emit_answer_submitted(answer_id)
    wait_until(lambda: world.ledger_counts().get("DEAD_LETTERED") == 3)
    link = _link(world, sheet)
    assert link.paused_reason is not None and "'Count'" in link.paused_reason
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.PAUSED and world.ids_of(entry) == sorted(waiting)
    assert world.ids_in(sheet) == [first]  # nothing written
    [alert] = [text for text in alerts.texts if "paused" in text]
    assert f"link {link.id}" in alert and "'Count'" in alert and "links resume" in alert
    wait_until(lambda: owner_hook.received)
    [paused] = owner_hook.received
    assert (paused["topic"], paused["link_id"]) == ("link_paused", link.id)
    listed = json.loads(_sheetsync("links", "list", "--paused", "--json").stdout)["links"]
    assert [row["id"] for row in listed] == [link.id]

    # Nothing is written while paused, even when the beat comes round.
    assert dispatch_due(world.pipeline) == 0
    admin.update_values(sheet.spreadsheet_id, "'Responses'!E1", [["Count"]])  # fixed
    resumed = json.loads(_sheetsync("links", "resume", str(link.id), "--json").stdout)
    assert resumed == {"link_id": link.id, "was_paused": True, "due_dead_letters": 1}
    assert dispatch_due(world.pipeline) == 1
    wait_until(lambda: set(waiting) <= set(world.ids_in(sheet)))
    rows = read(sheets_api(emulator), sheet.spreadsheet_id)
    assert all(by_title(rows)[i]["Count"] == 2 for i in waiting)
    wait_until(world.complete_replays)
    assert world.ledger_counts() == {TransactionType.COMPLETED.value: 4}
    assert world.dead_letters()[0].status is DeadLetterStatus.DONE
    assert _link(world, sheet).paused_reason is None
    wait_until(lambda: len(owner_hook.received) == 2)
    assert owner_hook.received[1]["topic"] == "dead_letters_replayed"
    owner_hook.close()


@pytest.mark.parametrize("edit", ["note", "blank row", "sparse row 1"])
def test_rows_stay_in_their_columns_whatever_a_person_did(world, worker, emulator, admin, edit):
    form, sheet = _form(world)
    first = [form.answer({"q_team": f"t{n}", "q_count": str(n), "q_note": "n"}) for n in range(2)]
    _send(world, sheet, first)
    if edit == "note":  # typed to the right of the data, and below it further right
        admin.update_values(sheet.spreadsheet_id, "'Responses'!H2", [["call back"]])
        admin.update_values(sheet.spreadsheet_id, "'Responses'!J9", [["total?"]])
    elif edit == "blank row":  # in the middle of the data
        admin.insert_rows(sheet.spreadsheet_id, sheet.gid, 2, 3)
    else:  # row 1 with a gap and a heading of the person's own further right
        admin.update_values(sheet.spreadsheet_id, "'Responses'!I1", [["checked by"]])
        _forget_header_check(world, form, sheet)

    second = [form.answer({"q_team": f"u{n}", "q_count": str(n), "q_note": "m"}) for n in range(3)]
    _send(world, sheet, second)
    rows = read(sheets_api(emulator), sheet.spreadsheet_id)
    assert rows[0][:6] == [*FIXED, "Team", "Count", "Note"]
    values = by_title(rows)
    assert sorted(values) == sorted(first + second)
    for n, answer_id in enumerate(second):
        assert {t: v for t, v in values[answer_id].items() if t not in FIXED} == {
            "Team": f"u{n}",
            "Count": n,
            "Note": "m",
        }
    assert world.ledger_counts() == {"COMPLETED": 5}


def test_a_crash_between_the_header_write_and_the_map_record_repeats_nothing(
    world, worker, emulator, monkeypatch
):
    """The titles are in row 1 but the map does not say so: the next run adopts them
    (no second "Age" column), and every answer lands once."""
    from sheetsync.flush import columns

    form, sheet = _form(world)
    _send(world, sheet, [form.answer({"q_team": "red", "q_count": "1"})])
    form.add("q_age", "Age", NUMBER, position=9)
    real_save = columns.save
    crashes = []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise RuntimeError("worker died after writing row 1")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(columns, "save", crash_once)
    second = form.answer({"q_team": "blue", "q_count": "2", "q_age": "30"})
    _send(world, sheet, [second])
    assert crashes == [1]
    rows = read(sheets_api(emulator), sheet.spreadsheet_id)
    assert rows[0] == [*FIXED, "Team", "Count", "Note", "Age"]
    assert by_title(rows)[second]["Age"] == 30
    assert world.ledger_counts() == {"COMPLETED": 2}
