"""Number formats and serial dates, row 1 writes and values.batchGet, through
google-api-python-client as a client that writes rows calls them."""

from __future__ import annotations

from typing import Any

from sheets_emulator import EmulatorAdmin

DATE = {"type": "DATE", "pattern": "yyyy-mm-dd"}
DATE_TIME = {"type": "DATE_TIME", "pattern": "yyyy-mm-dd hh:mm:ss"}
#: 2024-03-01 and 2024-03-01 13:45:30 as Sheets' serial numbers.
MARCH_1 = 45352
MARCH_1_AFTERNOON = 45352 + (13 * 3600 + 45 * 60 + 30) / 86400


def batch_update(sheets: Any, spreadsheet_id: str, *requests: dict[str, Any]) -> Any:
    return sheets.batchUpdate(
        spreadsheetId=spreadsheet_id, body={"requests": list(requests)}
    ).execute()


def column_format(column: int, number_format: dict[str, str], gid: int = 0) -> dict[str, Any]:
    return {
        "repeatCell": {
            "range": {"sheetId": gid, "startColumnIndex": column, "endColumnIndex": column + 1},
            "cell": {"userEnteredFormat": {"numberFormat": number_format}},
            "fields": "userEnteredFormat.numberFormat",
        }
    }


def write(sheets: Any, spreadsheet_id: str, range_: str, rows: list[list[Any]], how: str) -> Any:
    return (
        sheets.values()
        .update(
            spreadsheetId=spreadsheet_id,
            range=range_,
            valueInputOption=how,
            body={"values": rows},
        )
        .execute()
    )


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


def read(sheets: Any, spreadsheet_id: str, range_: str, **options: Any) -> list[list[Any]]:
    result = sheets.values().get(spreadsheetId=spreadsheet_id, range=range_, **options).execute()
    values: list[list[Any]] = result.get("values", [])
    return values


def test_row_1_is_written_raw_and_user_entered(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    write(sheets, spreadsheet_id, "Sheet1!A1:B1", [["Answer ID", "Q"]], "RAW")
    append(sheets, spreadsheet_id, [["a-1", "ann", "=1+1"]])

    raw = write(sheets, spreadsheet_id, "Sheet1!A1:C1", [["Answer ID", "=1+1", "0012"]], "RAW")
    typed = write(sheets, spreadsheet_id, "Sheet1!D1", [["=1+1", "0012"]], "USER_ENTERED")

    assert raw["updatedRange"] == "Sheet1!A1:C1"
    assert typed["updatedRange"] == "Sheet1!D1:E1"
    assert read(sheets, spreadsheet_id, "Sheet1!1:1", valueRenderOption="UNFORMATTED_VALUE") == [
        ["Answer ID", "=1+1", "0012", 2, 12]
    ]
    assert read(sheets, spreadsheet_id, "Sheet1!A2:C2") == [["a-1", "ann", "=1+1"]]


def test_a_whole_row_range_takes_a_header_of_any_width(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    header = [f"Question {n}" for n in range(30)]

    result = write(sheets, spreadsheet_id, "Sheet1!1:1", [header], "RAW")

    assert result["updatedRange"] == "Sheet1!A1:AD1"
    assert read(sheets, spreadsheet_id, "Sheet1!1:1") == [header]


def test_batch_get_answers_each_range_in_order(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner", sheets=["Sheet1", "Other"])
    write(sheets, spreadsheet_id, "Sheet1!A1", [["A1", "B1"], ["A2"]], "RAW")
    write(sheets, spreadsheet_id, "Other!B2", [["x"]], "RAW")

    result = (
        sheets.values()
        .batchGet(spreadsheetId=spreadsheet_id, ranges=["Sheet1!1:1", "Other!A1:C3", "Sheet1!Z9"])
        .execute()
    )

    assert result == {
        "spreadsheetId": spreadsheet_id,
        "valueRanges": [
            {"range": "Sheet1!A1:Z1", "majorDimension": "ROWS", "values": [["A1", "B1"]]},
            {"range": "Other!A1:C3", "majorDimension": "ROWS", "values": [[], ["", "x"]]},
            {"range": "Sheet1!Z9", "majorDimension": "ROWS"},
        ],
    }


def test_a_date_column_shows_serials_as_dates(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    batch_update(sheets, spreadsheet_id, column_format(1, DATE), column_format(2, DATE_TIME))

    append(sheets, spreadsheet_id, [["a-1", MARCH_1, MARCH_1_AFTERNOON], ["a-2", "not a date", 1]])

    assert read(sheets, spreadsheet_id, "Sheet1") == [
        ["a-1", "2024-03-01", "2024-03-01 13:45:30"],
        ["a-2", "not a date", "1899-12-31 00:00:00"],
    ]
    assert read(sheets, spreadsheet_id, "Sheet1", valueRenderOption="UNFORMATTED_VALUE") == [
        ["a-1", MARCH_1, MARCH_1_AFTERNOON],
        ["a-2", "not a date", 1],
    ]
    as_strings = read(
        sheets,
        spreadsheet_id,
        "Sheet1!A1:C1",
        valueRenderOption="UNFORMATTED_VALUE",
        dateTimeRenderOption="FORMATTED_STRING",
    )
    assert as_strings == [["a-1", "2024-03-01", "2024-03-01 13:45:30"]]


def test_a_format_over_a_column_reaches_rows_added_later(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    batch_update(
        sheets,
        spreadsheet_id,
        {
            "updateSheetProperties": {
                "properties": {"sheetId": 0, "gridProperties": {"rowCount": 2}},
                "fields": "gridProperties.rowCount",
            }
        },
        column_format(0, DATE),
    )

    append(sheets, spreadsheet_id, [[MARCH_1 + day] for day in range(5)])

    assert read(sheets, spreadsheet_id, "Sheet1!A4:A5") == [["2024-03-04"], ["2024-03-05"]]


def test_number_patterns_and_default_patterns(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    batch_update(
        sheets,
        spreadsheet_id,
        column_format(0, {"type": "NUMBER", "pattern": "0.00"}),
        column_format(1, {"type": "NUMBER"}),
        column_format(2, {"type": "DATE"}),
        column_format(3, {"type": "DATE_TIME"}),
    )

    append(sheets, spreadsheet_id, [[1234.5, 1234.5, MARCH_1, MARCH_1_AFTERNOON]])

    assert read(sheets, spreadsheet_id, "Sheet1") == [
        ["1234.50", "1,234.50", "3/1/2024", "3/1/2024 13:45:30"]
    ]


def test_user_entered_dates_become_serials_in_their_own_style(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    # As recorded (WorksheetTest.test_get_all_records_value_render_options).
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    write(
        sheets,
        spreadsheet_id,
        "Sheet1!A1",
        [["2020-01-01", "3/1/2024", "2020-01-01x"]],
        "USER_ENTERED",
    )
    write(sheets, spreadsheet_id, "Sheet1!A2", [["2020-01-01"]], "RAW")

    assert read(sheets, spreadsheet_id, "Sheet1") == [
        ["2020-01-01", "3/1/2024", "2020-01-01x"],
        ["2020-01-01"],
    ]
    assert read(sheets, spreadsheet_id, "Sheet1", valueRenderOption="FORMULA") == [
        [43831, MARCH_1, "2020-01-01x"],
        ["2020-01-01"],
    ]


def test_formats_move_with_inserted_and_deleted_columns(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    batch_update(sheets, spreadsheet_id, column_format(1, DATE))
    append(sheets, spreadsheet_id, [["a", MARCH_1]])
    span = {"sheetId": 0, "dimension": "COLUMNS", "startIndex": 0, "endIndex": 1}

    batch_update(sheets, spreadsheet_id, {"insertDimension": {"range": span}})
    assert read(sheets, spreadsheet_id, "Sheet1") == [["", "a", "2024-03-01"]]
    batch_update(sheets, spreadsheet_id, {"deleteDimension": {"range": span}})
    assert read(sheets, spreadsheet_id, "Sheet1") == [["a", "2024-03-01"]]


def test_the_sheet_view_shows_formatted_values(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    batch_update(sheets, spreadsheet_id, column_format(1, DATE))
    append(sheets, spreadsheet_id, [["a-1", MARCH_1, 0.5]])

    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["a-1", "2024-03-01", "0.5"]]
    page = emulator_admin.sheet_html(spreadsheet_id, 0)
    assert "<td>a-1</td><td class='n'>2024-03-01</td><td class='n'>0.5</td>" in page
