"""Full sheets roll over, on a real worker, Redis and the emulator: tabs fill in order,
every answer lands once, the operator hears once, and Google's own cell-limit refusal
rolls over too (or waits in a dead letter), never FAILED."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pytest
from sqlalchemy import select
from support.forms import EditableForm, by_title, read, sheets_api
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.models import DeadLetterReason, QuestionType, SpreadSheet

#: The test form's row: Answer ID, Submitter, Submitted at and two questions.
WIDTH = 5
#: Each tab holds its header and 20 rows.
ROWS_PER_TAB = 20
LIMIT = WIDTH * (ROWS_PER_TAB + 1)


def _tabs(world, sheet) -> list[tuple[str, int, list[list[str]]]]:
    """(title, gid, values) of every tab of the sheet's spreadsheet, in order."""
    resource = world.admin.spreadsheet(sheet.spreadsheet_id)
    found = []
    for tab in resource["sheets"]:
        gid = tab["properties"]["sheetId"]
        values = world.admin.sheet_values(sheet.spreadsheet_id, gid)
        found.append((tab["properties"]["title"], gid, values))
    return found


def _link(world, sheet) -> SpreadSheet:
    with world.pipeline.sessions() as session:
        return session.scalars(
            select(SpreadSheet).where(SpreadSheet.spread_sheet_id == sheet.spreadsheet_id)
        ).one()


def test_three_tabs_fill_in_order_each_answer_once_and_one_alert(
    world, worker, pipeline_env, alerts
):
    pipeline_env(tab_cell_limit=LIMIT, batch_size=15)
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    sheet = world.sheet(form, "Responses")
    first = world.answers(form, 12)
    rest = world.answers(form, 43, start=13)

    emit_answers_submitted(first)  # a batch that fits
    wait_until(lambda: len(world.ids_in(sheet)) == len(first))
    emit_answers_submitted(rest)  # batches cut and rolled over
    answers = first + rest
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": len(answers)}, timeout=30)

    tabs = _tabs(world, sheet)
    assert [title for title, _, _ in tabs] == ["Responses", "Responses (2)", "Responses (3)"]
    header = tabs[0][2][0]
    assert len(header) == WIDTH and header[0] == "Answer ID"
    ids_by_tab = []
    for _, _, values in tabs:
        assert values[0] == header  # every tab starts with the same header
        ids_by_tab.append([row[0] for row in values[1:]])
    assert [len(ids) for ids in ids_by_tab] == [20, 20, 15]
    assert [i for ids in ids_by_tab for i in ids] == answers  # in order, each once
    assert max(Counter(i for ids in ids_by_tab for i in ids).values()) == 1

    link = _link(world, sheet)
    assert (link.tab_number, link.tab_sheet_id) == (3, tabs[2][1])
    assert link.tab_cells == WIDTH * 16
    wait_until(lambda: alerts.texts)
    [alert] = [text for text in alerts.texts if "cells" in text]
    assert f"link {link.id}" in alert and "80%" in alert
    # A new tab is sized to its data: Google counts grid cells, not values.
    grid = world.admin.spreadsheet(sheet.spreadsheet_id)["sheets"][1]["properties"]
    assert grid["gridProperties"] == {"rowCount": 21, "columnCount": WIDTH}


def test_googles_cell_limit_refusal_rolls_over_instead_of_failing(
    world, worker, pipeline_env, admin
):
    """A person filled the workbook (our own budget is far away): Google refuses the
    append; the link rolls over to a tab sized to our columns, which still fits."""
    pipeline_env(batch_size=10)
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    sheet = world.sheet(form, "Responses")
    answers = world.answers(form, 10)
    # The linked tab is 1000 x 26 = 26,000 cells. The workbook's limit leaves room for
    # a few rows of 5 cells, not for 10 rows of the tab's 26 columns.
    admin.set_settings(max_cells=26_000 + WIDTH * 12)

    emit_answers_submitted(answers)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": len(answers)}, timeout=30)

    tabs = _tabs(world, sheet)
    assert [title for title, _, _ in tabs] == ["Responses", "Responses (2)"]
    assert tabs[0][2][1:] == []  # its row 1 holds the header (written before the append)
    assert [row[0] for row in tabs[1][2][1:]] == answers
    assert _link(world, sheet).tab_number == 2


def test_a_workbook_with_no_room_at_all_parks_the_answers_not_failed(
    world, worker, pipeline_env, admin
):
    pipeline_env(batch_size=10)
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    world.sheet(form, "Responses")
    answers = world.answers(form, 4)
    admin.set_settings(max_cells=26_000)

    emit_answers_submitted(answers)
    wait_until(lambda: world.ledger_counts() == {"DEAD_LETTERED": len(answers)}, timeout=30)
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.SHEET_FULL
    assert entry.status.value == "PENDING"
    assert "cell limit" in (entry.error_message or "")
    assert world.ids_of(entry) == sorted(answers)


def test_a_limit_too_small_for_one_row_is_a_configuration_error(world, worker, pipeline_env):
    """A header and one row of 7 cells cannot fit in 10: the run retries, then parks
    the answers with a CONFIGURATION alert that names the setting."""
    pipeline_env(tab_cell_limit=10, retry_max=0)
    form = world.form(steps=1, questions_per_step=4, pii=0, jumbotrons=0)
    world.sheet(form)
    emit_answers_submitted(world.answers(form, 1))
    wait_until(world.dead_letters, timeout=30)
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.CONFIGURATION
    assert "SHEETSYNC_TAB_CELL_LIMIT" in (entry.error_message or "")


@pytest.mark.slow  # 7-8 s of the whole stack: make test runs it, test-fast does not
def test_an_append_dropped_in_a_new_tab_is_found_there_not_sent_twice(
    world, worker, pipeline_env, admin
):
    """The first append to "<title> (2)" lands but its answer is lost: the intent names
    that tab, and the retry reads it there before appending anything."""
    pipeline_env(tab_cell_limit=LIMIT, batch_size=50)
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    sheet = world.sheet(form, "Responses")
    full = world.answers(form, ROWS_PER_TAB)
    emit_answers_submitted(full)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": ROWS_PER_TAB})

    admin.add_fault("values.append", 1, "drop")
    more = world.answers(form, 3, start=ROWS_PER_TAB + 1)
    emit_answers_submitted(more)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": ROWS_PER_TAB + 3}, timeout=30)

    tabs = _tabs(world, sheet)
    assert [title for title, _, _ in tabs] == ["Responses", "Responses (2)"]
    assert [row[0] for row in tabs[0][2][1:]] == full
    assert [row[0] for row in tabs[1][2][1:]] == more
    assert admin.stats()["requests"]["by_kind"]["values.append"] == 2


def test_a_date_question_added_after_a_roll_over_gets_its_format_on_the_active_tab(
    world, worker, pipeline_env, emulator
):
    """A question added once the link writes to "<title> (2)": its title goes into row 1
    of that tab, and so does its number format (a DATE answer shows as a date there)."""
    rows_per_tab = 4
    pipeline_env(tab_cell_limit=4 * (rows_per_tab + 1), batch_size=50)
    form = EditableForm(world, [("q_text", "Text", QuestionType.SHORT_TEXT)])
    sheet = world.sheet(form.seeded, "Responses")
    first = [form.answer({"q_text": f"t{n}"}) for n in range(rows_per_tab + 1)]
    emit_answers_submitted(first)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": len(first)}, timeout=30)
    assert _link(world, sheet).tab_number == 2

    form.add("q_day", "Day", QuestionType.DATE, position=1)
    later = form.answer({"q_text": "later", "q_day": "2024-03-05"})
    emit_answers_submitted([later])
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": len(first) + 1}, timeout=30)

    api = sheets_api(emulator)
    new_tab = "Responses (2)"
    typed = by_title(read(api, sheet.spreadsheet_id, new_tab))
    assert typed[later]["Day"] == (date(2024, 3, 5) - date(1899, 12, 30)).days
    shown = by_title(read(api, sheet.spreadsheet_id, new_tab, valueRenderOption="FORMATTED_VALUE"))
    assert shown[later]["Day"] == "2024-03-05"
