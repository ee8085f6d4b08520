"""Google's details the recordings show: the ``fields`` mask of every call, ``null``
cells and ``"majorDimension": null`` in values.update, values.clear, and the details of
a 400."""

from __future__ import annotations

import json
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin


def test_the_fields_mask_keeps_only_what_it_names(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner", sheets=["A", "B"])

    narrow = sheets.get(
        spreadsheetId=spreadsheet_id, fields="properties(title,timeZone),sheets.properties.sheetId"
    ).execute()
    slashes = sheets.get(spreadsheetId=spreadsheet_id, fields="sheets/properties/title").execute()

    assert narrow == {
        "properties": {"title": "Untitled spreadsheet", "timeZone": "Etc/GMT"},
        "sheets": [{"properties": {"sheetId": gids["A"]}}, {"properties": {"sheetId": gids["B"]}}],
    }
    assert slashes == {"sheets": [{"properties": {"title": "A"}}, {"properties": {"title": "B"}}]}


def test_null_cells_are_left_alone_and_not_counted(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    values = sheets.values()
    values.update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1",
        valueInputOption="RAW",
        body={"values": [["a", "b", "c"], ["d", "e", "f"]]},
    ).execute()

    result = values.update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1:C2",
        valueInputOption="RAW",
        body={"values": [[None, "B", ""], [None, None, None]], "majorDimension": None},
    ).execute()

    assert result == {
        "spreadsheetId": spreadsheet_id,
        "updatedRange": "Sheet1!A1:C2",
        "updatedRows": 1,
        "updatedColumns": 2,
        "updatedCells": 2,
    }
    read = values.get(spreadsheetId=spreadsheet_id, range="Sheet1").execute()
    assert read["values"] == [["a", "B"], ["d", "e", "f"]]
    nothing = values.update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1",
        valueInputOption="RAW",
        body={"values": [[None, None]]},
    ).execute()
    assert nothing == {"spreadsheetId": spreadsheet_id, "updatedRange": "Sheet1!A1:B1"}


def test_clear_empties_the_range_and_names_it(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    values = sheets.values()
    values.update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1",
        valueInputOption="RAW",
        body={"values": [["a", "b"], ["c", "d"]]},
    ).execute()

    partial = values.clear(spreadsheetId=spreadsheet_id, range="Sheet1!B1:B2", body={}).execute()
    assert values.get(spreadsheetId=spreadsheet_id, range="Sheet1").execute()["values"] == [
        ["a"],
        ["c"],
    ]
    whole = values.clear(spreadsheetId=spreadsheet_id, range="'Sheet1'", body={}).execute()

    assert partial == {"spreadsheetId": spreadsheet_id, "clearedRange": "Sheet1!B1:B2"}
    assert whole == {"spreadsheetId": spreadsheet_id, "clearedRange": "Sheet1!A1:Z1000"}
    assert "values" not in values.get(spreadsheetId=spreadsheet_id, range="Sheet1").execute()


def test_a_request_google_cannot_parse_carries_bad_request_details(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    with pytest.raises(HttpError) as unknown:
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id, body={"requests": [{"frobnicate": {}}]}
        ).execute()
    with pytest.raises(HttpError) as unparsable:
        sheets.values().get(spreadsheetId=spreadsheet_id, range="Nope!A1").execute()

    error = json.loads(unknown.value.content)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": "requests[0]", "description": error["message"]}],
        }
    ]
    assert json.loads(unparsable.value.content) == {
        "error": {
            "code": 400,
            "message": "Unable to parse range: Nope!A1",
            "status": "INVALID_ARGUMENT",
        }
    }
