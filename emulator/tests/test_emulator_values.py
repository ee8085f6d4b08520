"""The Sheets API values endpoints, through google-api-python-client as a user calls them."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin

TRICKY_INPUTS = [
    '=HYPERLINK("http://x","y")',
    "=1+1",
    "+1 555 0100",
    "0012",
    "@SUM(A1)",
    "-2",
    "",
    "설문 응답입니다",
    "🎉👍🏽",
    "  spaces kept  ",
    "'quoted",
]


def append(sheets: Any, spreadsheet_id: str, rows: list[list[Any]], **options: Any) -> Any:
    options.setdefault("valueInputOption", "RAW")
    options.setdefault("insertDataOption", "INSERT_ROWS")
    return (
        sheets.values()
        .append(spreadsheetId=spreadsheet_id, range="Sheet1!A1", body={"values": rows}, **options)
        .execute()
    )


def read(sheets: Any, spreadsheet_id: str, range_: str, **options: Any) -> Any:
    return sheets.values().get(spreadsheetId=spreadsheet_id, range=range_, **options).execute()


def http_error(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HttpError) as caught:
        call.execute()
    return caught.value.resp.status, json.loads(caught.value.content)


def test_a_row_1_read_of_an_empty_sheet_has_no_values_key(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner", "Answers")

    result = read(sheets, spreadsheet_id, "Sheet1!A1:Z1")

    assert result == {"range": "Sheet1!A1:Z1", "majorDimension": "ROWS"}


def test_raw_keeps_text_that_user_entered_would_parse(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    append(sheets, spreadsheet_id, [["=1+1", "0012"]], valueInputOption="RAW")
    append(sheets, spreadsheet_id, [["=1+1", "0012"]], valueInputOption="USER_ENTERED")

    assert read(sheets, spreadsheet_id, "Sheet1")["values"] == [["=1+1", "0012"], ["2", "12"]]
    formulas = read(sheets, spreadsheet_id, "Sheet1", valueRenderOption="FORMULA")
    assert formulas["values"] == [["=1+1", "0012"], ["=1+1", 12]]
    unformatted = read(sheets, spreadsheet_id, "Sheet1", valueRenderOption="UNFORMATTED_VALUE")
    assert unformatted["values"] == [["=1+1", "0012"], [2, 12]]


def test_tricky_inputs_round_trip_raw_exactly(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    row = ["id-1", *TRICKY_INPUTS, "end"]  # "end" keeps the empty cell from being trailing

    append(sheets, spreadsheet_id, [row])

    assert read(sheets, spreadsheet_id, "Sheet1!A1:Z1")["values"] == [row]
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [row]


def test_append_fills_the_table_like_google(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    first = [[f"r{n}", "b", "c", "d", "e", "f"] for n in range(1, 11)]
    second = [[f"s{n}", "b", "c", "d", "e", "f"] for n in range(1, 11)]

    one = append(sheets, spreadsheet_id, first)
    two = append(sheets, spreadsheet_id, second)

    assert "tableRange" not in one
    assert one["updates"] == {
        "spreadsheetId": spreadsheet_id,
        "updatedRange": "Sheet1!A1:F10",
        "updatedRows": 10,
        "updatedColumns": 6,
        "updatedCells": 60,
    }
    assert two["tableRange"] == "Sheet1!A1:F10"
    assert two["updates"]["updatedRange"] == "Sheet1!A11:F20"
    assert read(sheets, spreadsheet_id, "Sheet1!A1:F20")["values"] == first + second
    grid = sheets.get(spreadsheetId=spreadsheet_id).execute()
    assert grid["sheets"][0]["properties"]["gridProperties"]["rowCount"] == 1020


def test_append_quotes_titles_that_need_it(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner", sheets=["My Sheet", "It's"])

    result = (
        sheets.values()
        .append(
            spreadsheetId=spreadsheet_id,
            range="'It''s'!A1",
            valueInputOption="RAW",
            body={"values": [["a", "b"], ["c", "d"]]},
        )
        .execute()
    )

    assert result["updates"]["updatedRange"] == "'It''s'!A1:B2"
    assert emulator_admin.sheet_values(spreadsheet_id, gids["It's"]) == [["a", "b"], ["c", "d"]]
    assert read(sheets, spreadsheet_id, "'My Sheet'!A:A")["range"] == "'My Sheet'!A1:A1000"


@pytest.mark.parametrize(
    ("range_", "expected"),
    [
        ("Sheet1", [["a1", "b1", "c1"], ["a2", "", "c2"], ["", "b3"]]),
        ("Sheet1!A1", [["a1"]]),
        ("Sheet1!A:A", [["a1"], ["a2"]]),
        ("Sheet1!B2:B", [[], ["b3"]]),
        ("Sheet1!2:2", [["a2", "", "c2"]]),
        ("B1:C2", [["b1", "c1"], ["", "c2"]]),
        ("Sheet1!D1:E5", None),
    ],
)
def test_reads_trim_blanks_like_google(
    connect: Any, emulator_admin: EmulatorAdmin, range_: str, expected: Any
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    append(sheets, spreadsheet_id, [["a1", "b1", "c1"], ["a2", "", "c2"], ["", "b3"]])

    assert read(sheets, spreadsheet_id, range_).get("values") == expected


def test_update_writes_in_place_and_respects_the_range(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    update = sheets.values().update

    result = update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!B2",
        valueInputOption="RAW",
        body={"values": [["x", "y"]]},
    ).execute()
    status, body = http_error(
        update(
            spreadsheetId=spreadsheet_id,
            range="Sheet1!A1:A1",
            valueInputOption="RAW",
            body={"values": [["1"], ["2"]]},
        )
    )

    assert result["updatedRange"] == "Sheet1!B2:C2"
    assert result["updatedCells"] == 2
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [[], ["", "x", "y"]]
    assert status == 400
    assert "tried writing to row [2]" in body["error"]["message"]


def test_value_input_option_is_required(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    status, body = http_error(
        sheets.values().append(spreadsheetId=spreadsheet_id, range="A1", body={"values": [[1]]})
    )

    assert status == 400
    assert body["error"]["status"] == "INVALID_ARGUMENT"


def test_unknown_sheet_and_garbage_ranges_are_unparsable(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    for range_ in ("Nope!A1", "Sheet1!A1:?", "!!"):
        status, body = http_error(sheets.values().get(spreadsheetId=spreadsheet_id, range=range_))
        assert status == 400
        assert body == {
            "error": {
                "code": 400,
                "message": f"Unable to parse range: {range_}",
                "status": "INVALID_ARGUMENT",
            }
        }


def test_deleted_spreadsheet_is_not_found(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.delete_spreadsheet(spreadsheet_id)

    status, body = http_error(sheets.values().get(spreadsheetId=spreadsheet_id, range="A1"))

    assert status == 404
    assert body == {
        "error": {
            "code": 404,
            "message": "Requested entity was not found.",
            "status": "NOT_FOUND",
        }
    }


def test_another_accounts_spreadsheet_is_forbidden(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    connect("alice")
    mallory = connect("mallory")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("alice")

    status, body = http_error(mallory.get(spreadsheetId=spreadsheet_id))

    assert status == 403
    assert body["error"] == {
        "code": 403,
        "message": "The caller does not have permission",
        "status": "PERMISSION_DENIED",
    }


def test_a_cell_over_50000_characters_is_refused(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    append(sheets, spreadsheet_id, [["x" * 50_000]])

    status, body = http_error(
        sheets.values().append(
            spreadsheetId=spreadsheet_id,
            range="Sheet1",
            valueInputOption="RAW",
            body={"values": [["ok", "x" * 50_001]]},
        )
    )

    assert status == 400
    assert body["error"]["message"] == (
        "Your input contains more than the maximum of 50000 characters in a single cell."
    )
    assert len(emulator_admin.sheet_values(spreadsheet_id, 0)) == 1


def test_concurrent_appends_never_overlap(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    ranges: list[str] = []

    clients = [connect("owner", register=False) for _ in range(4)]

    def writer(number: int) -> None:
        for batch in range(5):
            rows = [[f"w{number}-b{batch}-r{row}"] for row in range(3)]
            ranges.append(append(clients[number], spreadsheet_id, rows)["updates"]["updatedRange"])

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    cells = [row[0] for row in emulator_admin.sheet_values(spreadsheet_id, 0)]
    assert len(cells) == len(set(cells)) == 60
    assert len(set(ranges)) == 20
