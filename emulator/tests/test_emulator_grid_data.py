"""spreadsheets.getByDataFilter (grid data of the ranges data filters name) and
batchUpdate updateCells, through google-api-python-client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin

ROW1_FIELDS = (
    "properties.timeZone,sheets(properties(sheetId,title),data.rowData.values.formattedValue)"
)


def row1_filter(gid: int) -> dict[str, Any]:
    return {"gridRange": {"sheetId": gid, "startRowIndex": 0, "endRowIndex": 1}}


def by_filter(sheets: Any, spreadsheet_id: str, body: dict[str, Any], **query: Any) -> Any:
    return sheets.getByDataFilter(spreadsheetId=spreadsheet_id, body=body, **query).execute()


def update_cells(sheets: Any, spreadsheet_id: str, *requests: dict[str, Any]) -> Any:
    return sheets.batchUpdate(
        spreadsheetId=spreadsheet_id, body={"requests": [{"updateCells": r} for r in requests]}
    ).execute()


def texts(*cells: str) -> dict[str, Any]:
    return {"values": [{"userEnteredValue": {"stringValue": cell}} for cell in cells]}


def refused(call: Any) -> tuple[int, str]:
    with pytest.raises(HttpError) as caught:
        call()
    message = json.loads(caught.value.content)["error"]["message"]
    return caught.value.resp.status, str(message)


def test_row_1_title_and_time_zone_of_one_sheet_in_one_read(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet(
        "owner", "Book", ["Other", "Answers"], time_zone="Europe/Paris"
    )
    emulator_admin.update_values(spreadsheet_id, "Answers!A1:D2", [["id", "", "3", ""], ["x"]])
    emulator_admin.update_values(spreadsheet_id, "Other!A1", [["elsewhere"]])
    emulator_admin.reset_stats()

    reply = by_filter(
        sheets, spreadsheet_id, {"dataFilters": [row1_filter(gids["Answers"])]}, fields=ROW1_FIELDS
    )

    assert reply == {
        "properties": {"timeZone": "Europe/Paris"},
        "sheets": [
            {
                "properties": {"sheetId": gids["Answers"], "title": "Answers"},
                # The empty B1 is an empty CellData; the trailing empty D1 is left out.
                "data": [
                    {
                        "rowData": [
                            {"values": [{"formattedValue": "id"}, {}, {"formattedValue": "3"}]}
                        ]
                    }
                ],
            }
        ],
    }
    stats = emulator_admin.stats()
    assert stats["requests"]["by_kind"] == {"spreadsheets.getByDataFilter": 1}
    assert stats["requests"]["reads"] == 1 and stats["requests"]["writes"] == 0


def test_an_empty_row_1_has_no_row_data_and_full_cell_data_without_a_mask(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner")
    empty = by_filter(
        sheets, spreadsheet_id, {"dataFilters": [row1_filter(gids["Sheet1"])]}, fields=ROW1_FIELDS
    )
    assert empty["sheets"][0]["data"] == [{}]

    emulator_admin.update_values(spreadsheet_id, "Sheet1!B2", [["=1+1"]])
    body = {"dataFilters": [{"a1Range": "Sheet1!B2:C3"}], "includeGridData": True}
    (data,) = by_filter(sheets, spreadsheet_id, body)["sheets"][0]["data"]
    assert data == {
        "startRow": 1,
        "startColumn": 1,
        "rowData": [
            {
                "values": [
                    {
                        "userEnteredValue": {"formulaValue": "=1+1"},
                        "effectiveValue": {"numberValue": 2},
                        "formattedValue": "2",
                    }
                ]
            }
        ],
    }
    without = by_filter(sheets, spreadsheet_id, {"dataFilters": [row1_filter(gids["Sheet1"])]})
    assert "data" not in without["sheets"][0]


def test_a_filter_on_a_missing_sheet_is_refused(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    status, message = refused(
        lambda: by_filter(sheets, spreadsheet_id, {"dataFilters": [row1_filter(424242)]})
    )
    assert (status, message) == (400, "No grid with id: 424242")


def test_update_cells_writes_from_start_and_clears_what_a_range_leaves_out(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner")
    emulator_admin.update_values(spreadsheet_id, "Sheet1!A1:D1", [["keep", "b", "c", "d"]])

    update_cells(
        sheets,
        spreadsheet_id,
        {
            "start": {"sheetId": gids["Sheet1"], "rowIndex": 0, "columnIndex": 1},
            "rows": [texts("B", "007")],
            "fields": "userEnteredValue",
        },
    )
    assert emulator_admin.sheet_values(spreadsheet_id, gids["Sheet1"]) == [
        ["keep", "B", "007", "d"]
    ]

    update_cells(
        sheets,
        spreadsheet_id,
        {
            "range": {
                "sheetId": gids["Sheet1"],
                "startRowIndex": 0,
                "endRowIndex": 1,
                "startColumnIndex": 2,
                "endColumnIndex": 4,
            },
            "rows": [texts("C")],
            "fields": "userEnteredValue",
        },
    )
    assert emulator_admin.sheet_values(spreadsheet_id, gids["Sheet1"]) == [["keep", "B", "C"]]


def test_append_dimension_widens_the_grid_for_update_cells(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner")
    gid = gids["Sheet1"]
    emulator_admin.update_values(spreadsheet_id, "Sheet1!Z1", [["z"]])
    widen = {"appendDimension": {"sheetId": gid, "dimension": "COLUMNS", "length": 2}}
    write = {
        "updateCells": {
            "start": {"sheetId": gid, "rowIndex": 0, "columnIndex": 26},
            "rows": [texts("aa", "ab")],
            "fields": "userEnteredValue",
        }
    }
    sheets.batchUpdate(spreadsheetId=spreadsheet_id, body={"requests": [widen, write]}).execute()

    grid = sheets.get(spreadsheetId=spreadsheet_id).execute()["sheets"][0]["properties"]
    assert grid["gridProperties"]["columnCount"] == 28
    assert emulator_admin.sheet_values(spreadsheet_id, gid)[0][25:] == ["z", "aa", "ab"]
    status, message = refused(
        lambda: sheets.batchUpdate(
            spreadsheetId=spreadsheet_id,
            body={"requests": [{"appendDimension": {**widen["appendDimension"], "length": 0}}]},
        ).execute()
    )
    assert status == 400 and "length" in message


def test_update_cells_refusals_leave_the_batch_unapplied(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner")
    start = {"sheetId": gids["Sheet1"], "rowIndex": 0, "columnIndex": 0}
    good = {"start": start, "rows": [texts("written")], "fields": "userEnteredValue"}
    beyond = {"start": {**start, "columnIndex": 25}, "rows": [texts("y", "z")], "fields": "*"}

    status, message = refused(lambda: update_cells(sheets, spreadsheet_id, good, beyond))
    assert status == 400
    assert message.startswith(
        "Invalid requests[1].updateCells: Range (Sheet1!Z1:AA1) exceeds grid limits"
    )
    status, message = refused(
        lambda: update_cells(sheets, spreadsheet_id, {"start": start, "rows": [texts("x")]})
    )
    assert status == 400 and "fields" in message
    assert emulator_admin.sheet_values(spreadsheet_id, gids["Sheet1"]) == []
