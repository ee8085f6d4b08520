"""Typed cells, end to end: NUMBER answers sum, DATE answers and "Submitted at" sort as
dates (serials read back with UNFORMATTED_VALUE), and text that looks like a formula or
a number stays text exactly as typed. Real worker, the emulator read back through
google-api-python-client."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from support.forms import EditableForm, by_title, read, sheets_api
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import QuestionType

#: Serial day 0 of Sheets' dates.
DAY_ZERO = date(1899, 12, 30)
TYPED_AS_TEXT = ["=1+1", "+1 555", "0012", "@x"]


def serial(moment: datetime) -> float:
    """Days since 1899-12-30 (naive: already in the zone wanted)."""
    days = (moment.date() - DAY_ZERO).days
    return days + (moment.hour * 3600 + moment.minute * 60 + moment.second) / 86_400


@pytest.fixture(params=["the spreadsheet's zone", "forced"])
def zone(request, pipeline_env):
    """The spreadsheet's own zone wins (New York, UTC-4 in May); SHEETSYNC_TIMEZONE is
    only a fallback, unless SHEETSYNC_FORCE_TIMEZONE is set. Returns (its offset in
    hours, the spreadsheet's zone)."""
    forced = request.param == "forced"
    pipeline_env(timezone="Asia/Seoul", force_timezone=str(forced).lower())
    return (9 if forced else -4), "America/New_York"


def test_numbers_sum_dates_sort_and_text_stays_text(zone, world, worker, emulator, admin):
    form = EditableForm(
        world,
        [
            ("q_amount", "Amount", QuestionType.NUMBER),
            ("q_day", "Day", QuestionType.DATE),
            ("q_text", "Text", QuestionType.SHORT_TEXT),
        ],
    )
    sheet = world.sheet(form.seeded)
    offset_h, sheet_zone = zone
    admin.set_time_zone(sheet.spreadsheet_id, sheet_zone)
    submitted = [
        datetime(2024, 5, 1, 10, 0, 5, tzinfo=UTC),
        datetime(2024, 4, 30, 23, 30, tzinfo=UTC),
        datetime(2024, 5, 2, 0, 15, tzinfo=UTC),
        datetime(2024, 5, 1, 16, 0, tzinfo=UTC),
    ]
    days = ["2024-03-05", "2023-12-31", "2024-01-15", "not a date"]
    amounts = ["10", "2.5", "-1", "0012"]
    ids = [
        form.answer({"q_amount": amount, "q_day": day, "q_text": text}, submitted_at=submitted_at)
        for amount, day, text, submitted_at in zip(
            amounts, days, TYPED_AS_TEXT, submitted, strict=True
        )
    ]
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(ids))

    api = sheets_api(emulator)
    values = by_title(read(api, sheet.spreadsheet_id))
    row = [values[answer_id] for answer_id in ids]
    numbers = [cells["Amount"] for cells in row[:3]]
    assert numbers == [10, 2.5, -1] and sum(numbers) == 11.5
    assert row[3]["Amount"] == "0012"  # not a plain decimal: text, as typed
    assert [cells["Day"] for cells in row] == [
        (date(2024, 3, 5) - DAY_ZERO).days,
        (date(2023, 12, 31) - DAY_ZERO).days,
        (date(2024, 1, 15) - DAY_ZERO).days,
        "not a date",
    ]
    assert [cells["Submitted at"] for cells in row] == pytest.approx(
        [serial(moment.replace(tzinfo=None)) + offset_h / 24 for moment in submitted], abs=1e-9
    )
    assert [cells["Text"] for cells in row] == TYPED_AS_TEXT
    formulas = by_title(read(api, sheet.spreadsheet_id, valueRenderOption="FORMULA"))
    assert [formulas[answer_id]["Text"] for answer_id in ids] == TYPED_AS_TEXT

    # Sorted as a person sorts: by date, then by the time of submission.
    admin.sort_rows(sheet.spreadsheet_id, sheet.gid, column_index=4)
    assert world.ids_in(sheet)[:3] == [ids[1], ids[2], ids[0]]
    admin.sort_rows(sheet.spreadsheet_id, sheet.gid, column_index=2)
    assert world.ids_in(sheet) == [ids[1], ids[0], ids[3], ids[2]]
    # As Sheets shows them: the columns' number formats, set when they were created.
    shown = by_title(read(api, sheet.spreadsheet_id, valueRenderOption="FORMATTED_VALUE"))
    assert shown[ids[0]]["Day"] == "2024-03-05"
    local = 10 + offset_h
    assert shown[ids[0]]["Submitted at"] == f"2024-05-01 {local:02d}:00:05"
