"""values.batchUpdate and values.batchClear through google-api-python-client, answered in
the shapes of Google's recorded answers (gspread's WorksheetTest.test_batch_update and
test_batch_clear), all applied or none; and the requests the emulator refuses as Google
does, or says it cannot serve."""

from __future__ import annotations

import json
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin


def http_error(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HttpError) as caught:
        call.execute()
    return caught.value.resp.status, json.loads(caught.value.content)["error"]


@pytest.fixture
def seeded(connect: Any, emulator_admin: EmulatorAdmin) -> tuple[Any, str]:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner", sheets=["Sheet1", "Other"])
    emulator_admin.update_values(spreadsheet_id, "Sheet1!A1", [["a1", "b1"], ["a2", "b2"]])
    return sheets, spreadsheet_id


def test_batch_update_answers_as_google_did(
    seeded: tuple[Any, str], emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded
    body = {
        "valueInputOption": "RAW",
        "data": [
            {"range": "'Sheet1'!A1:D1", "values": [["A1", "B1", "", "D1"]]},
            {"range": "'Sheet1'!A4:D4", "values": [["A4", "B4", "", "D4"]]},
        ],
    }

    answer = sheets.values().batchUpdate(spreadsheetId=spreadsheet_id, body=body).execute()

    # The recorded answer, ids aside: totals, then one values.update answer per range.
    assert answer == {
        "spreadsheetId": spreadsheet_id,
        "totalUpdatedRows": 2,
        "totalUpdatedColumns": 4,
        "totalUpdatedCells": 8,
        "totalUpdatedSheets": 1,
        "responses": [
            {
                "spreadsheetId": spreadsheet_id,
                "updatedRange": f"Sheet1!A{row}:D{row}",
                "updatedRows": 1,
                "updatedColumns": 4,
                "updatedCells": 4,
            }
            for row in (1, 4)
        ],
    }
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [
        ["A1", "B1", "", "D1"],
        ["a2", "b2"],
        [],
        ["A4", "B4", "", "D4"],
    ]


def test_batch_update_counts_each_sheet_and_writes_user_entered(seeded: tuple[Any, str]) -> None:
    sheets, spreadsheet_id = seeded
    body = {
        "valueInputOption": "USER_ENTERED",
        "includeValuesInResponse": True,
        "data": [
            {"range": "Sheet1!C1", "values": [["=1+2"]]},
            {"range": "Other!A1", "majorDimension": "COLUMNS", "values": [["x", "y"]]},
        ],
    }

    answer = sheets.values().batchUpdate(spreadsheetId=spreadsheet_id, body=body).execute()

    assert (answer["totalUpdatedSheets"], answer["totalUpdatedCells"]) == (2, 3)
    assert (answer["totalUpdatedRows"], answer["totalUpdatedColumns"]) == (3, 2)
    assert answer["responses"][0]["updatedData"]["values"] == [["3"]]
    assert answer["responses"][1]["updatedRange"] == "Other!A1:A2"


def test_a_batch_update_with_one_bad_range_writes_nothing(
    seeded: tuple[Any, str], emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded
    body = {
        "valueInputOption": "RAW",
        "data": [
            {"range": "Sheet1!A1", "values": [["changed"]]},
            {"range": "Sheet1!A1200", "values": [["grows the grid"]]},
            {"range": "Nowhere!A1", "values": [["x"]]},
        ],
    }

    status, error = http_error(sheets.values().batchUpdate(spreadsheetId=spreadsheet_id, body=body))

    assert (status, error["message"]) == (400, "Unable to parse range: Nowhere!A1")
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["a1", "b1"], ["a2", "b2"]]
    [sheet] = [
        s
        for s in emulator_admin.spreadsheet(spreadsheet_id)["sheets"]
        if s["properties"]["sheetId"] == 0
    ]
    assert sheet["properties"]["gridProperties"]["rowCount"] == 1000


def test_a_batch_update_needs_a_value_input_option(seeded: tuple[Any, str]) -> None:
    sheets, spreadsheet_id = seeded
    body = {"data": [{"range": "Sheet1!A1", "values": [["x"]]}]}

    status, error = http_error(sheets.values().batchUpdate(spreadsheetId=spreadsheet_id, body=body))

    assert (status, error["message"]) == (
        400,
        "Invalid valueInputOption: INPUT_VALUE_OPTION_UNSPECIFIED",
    )


def test_batch_clear_answers_as_google_did(
    seeded: tuple[Any, str], emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded
    body = {"ranges": ["'Sheet1'!A1:A2", "'Other'!A1:B3"]}

    answer = sheets.values().batchClear(spreadsheetId=spreadsheet_id, body=body).execute()

    assert answer == {
        "spreadsheetId": spreadsheet_id,
        "clearedRanges": ["Sheet1!A1:A2", "Other!A1:B3"],
    }
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["", "b1"], ["", "b2"]]


def test_a_batch_clear_with_one_bad_range_clears_nothing(
    seeded: tuple[Any, str], emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded
    body = {"ranges": ["Sheet1!A1:B1", "Nowhere!A1"]}

    status, error = http_error(sheets.values().batchClear(spreadsheetId=spreadsheet_id, body=body))

    assert (status, error["message"]) == (400, "Unable to parse range: Nowhere!A1")
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["a1", "b1"], ["a2", "b2"]]


def test_values_that_are_not_a_list_get_googles_words(seeded: tuple[Any, str]) -> None:
    sheets, spreadsheet_id = seeded
    # The body of gspread's recording WorksheetTest.test_add_validation, and its answer.
    update = sheets.values().update(
        spreadsheetId=spreadsheet_id,
        range="'Sheet1'!A1",
        valueInputOption="RAW",
        body={"values": "X", "majorDimension": None},
    )

    status, error = http_error(update)

    message = (
        "Invalid value at 'data.values' (type.googleapis.com/google.protobuf.ListValue), \"X\""
    )
    assert (status, error["message"]) == (400, message)
    assert error["details"][0]["fieldViolations"] == [
        {"field": "data.values", "description": message}
    ]


def test_grid_data_is_refused_in_words_not_answered_empty(seeded: tuple[Any, str]) -> None:
    sheets, spreadsheet_id = seeded

    for options in (
        {"includeGridData": True},
        {"ranges": ["Sheet1!A1"], "fields": "sheets.data.rowData.values.note"},
        {"ranges": ["Sheet1!A1"], "fields": "sheets(data(rowData))"},
    ):
        status, error = http_error(sheets.get(spreadsheetId=spreadsheet_id, **options))
        assert (status, error["status"]) == (501, "NOT_IMPLEMENTED"), options
        assert "does not serve grid data" in error["message"]

    plain = sheets.get(spreadsheetId=spreadsheet_id, includeGridData=False).execute()
    assert [sheet["properties"]["title"] for sheet in plain["sheets"]] == ["Sheet1", "Other"]
