"""batchUpdate moveDimension: columns and rows moved as a person drags them, with their
formats, through google-api-python-client."""

from __future__ import annotations

from typing import Any

from sheets_emulator import EmulatorAdmin

HEADER = ["Answer ID", "Submitter", "Submitted at"]


def append(sheets: Any, spreadsheet_id: str, rows: list[list[Any]]) -> Any:
    return (
        sheets.values()
        .append(
            spreadsheetId=spreadsheet_id,
            range="Sheet1!A1",
            valueInputOption="RAW",
            insertDataOption="INSERT_ROWS",
            body={"values": rows},
        )
        .execute()
    )


def batch_update(sheets: Any, spreadsheet_id: str, *requests: dict[str, Any]) -> Any:
    return sheets.batchUpdate(
        spreadsheetId=spreadsheet_id, body={"requests": list(requests)}
    ).execute()


def read(sheets: Any, spreadsheet_id: str) -> list[list[Any]]:
    result = sheets.values().get(spreadsheetId=spreadsheet_id, range="Sheet1").execute()
    values: list[list[Any]] = result.get("values", [])
    return values


def test_move_dimension_moves_columns_and_their_formats(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    date_column = {
        "repeatCell": {
            "range": {"sheetId": 0, "startColumnIndex": 2, "endColumnIndex": 3},
            "cell": {
                "userEnteredFormat": {"numberFormat": {"type": "DATE", "pattern": "yyyy-mm-dd"}}
            },
            "fields": "userEnteredFormat.numberFormat",
        }
    }
    batch_update(sheets, spreadsheet_id, date_column)
    append(sheets, spreadsheet_id, [[*HEADER, "Q1"], ["a-1", "ann", 45352, "yes"]])

    emulator_admin.move_columns(spreadsheet_id, 0, 2, 3, 0)  # C before A, as a person drags it
    after_drag = read(sheets, spreadsheet_id)
    emulator_admin.move_columns(spreadsheet_id, 0, 0, 1, 4)  # A after D
    moved_right = read(sheets, spreadsheet_id)
    noop = batch_update(
        sheets,
        spreadsheet_id,
        {
            "moveDimension": {
                "source": {"sheetId": 0, "dimension": "ROWS", "startIndex": 1, "endIndex": 2},
                "destinationIndex": 2,
            }
        },
    )

    assert after_drag == [
        ["Submitted at", "Answer ID", "Submitter", "Q1"],
        ["2024-03-01", "a-1", "ann", "yes"],
    ]
    assert moved_right == [
        ["Answer ID", "Submitter", "Q1", "Submitted at"],
        ["a-1", "ann", "yes", "2024-03-01"],
    ]
    assert noop["replies"] == [{}]


def test_move_dimension_moves_rows(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    append(sheets, spreadsheet_id, [[HEADER[0]], ["r1"], ["r2"], ["r3"]])

    batch_update(
        sheets,
        spreadsheet_id,
        {
            "moveDimension": {
                "source": {"sheetId": 0, "dimension": "ROWS", "startIndex": 3, "endIndex": 4},
                "destinationIndex": 1,
            }
        },
    )

    assert read(sheets, spreadsheet_id) == [[HEADER[0]], ["r3"], ["r1"], ["r2"]]
