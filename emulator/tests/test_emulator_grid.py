"""batchUpdate requests that move cells (deleteDimension, insertDimension, sortRange), and
where values.append lands afterwards, through google-api-python-client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin

HEADER = ["Answer ID", "Submitter", "Submitted at"]


def append(
    sheets: Any, spreadsheet_id: str, rows: list[list[Any]], range_: str = "Sheet1!A1"
) -> Any:
    return (
        sheets.values()
        .append(
            spreadsheetId=spreadsheet_id,
            range=range_,
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


def refused(sheets: Any, spreadsheet_id: str, *requests: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(HttpError) as caught:
        batch_update(sheets, spreadsheet_id, *requests)
    assert caught.value.resp.status == 400
    body: dict[str, Any] = json.loads(caught.value.content)
    return body


def dimension(kind: str, start: int, end: int, gid: int = 0, dim: str = "ROWS") -> dict[str, Any]:
    span = {"sheetId": gid, "dimension": dim, "startIndex": start, "endIndex": end}
    return {kind: {"range": span}}


def grid(sheets: Any, spreadsheet_id: str) -> dict[str, int]:
    resource = sheets.get(spreadsheetId=spreadsheet_id).execute()
    sizes: dict[str, int] = resource["sheets"][0]["properties"]["gridProperties"]
    return sizes


def answers(count: int, first: int = 1) -> list[list[str]]:
    return [[f"a-{n}", f"user-{n}", f"2024-01-{n:02d}"] for n in range(first, first + count)]


def seeded(connect: Any, admin: EmulatorAdmin, rows: list[list[Any]]) -> tuple[Any, str]:
    sheets = connect("owner")
    spreadsheet_id, _ = admin.create_spreadsheet("owner")
    append(sheets, spreadsheet_id, rows)
    return sheets, spreadsheet_id


def test_delete_rows_shifts_up_shrinks_the_grid_and_appends_follow_the_last_row(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(5)])
    assert grid(sheets, spreadsheet_id)["rowCount"] == 1006  # INSERT_ROWS grew it

    reply = batch_update(sheets, spreadsheet_id, dimension("deleteDimension", 2, 4))
    appended = append(sheets, spreadsheet_id, answers(1, first=6))

    assert reply == {"spreadsheetId": spreadsheet_id, "replies": [{}]}
    assert grid(sheets, spreadsheet_id)["rowCount"] == 1005  # 1006 - 2, + 1 appended
    assert appended["tableRange"] == "Sheet1!A1:C4"
    assert appended["updates"]["updatedRange"] == "Sheet1!A5:C5"
    ids = [row[0] for row in emulator_admin.sheet_values(spreadsheet_id, 0)]
    assert ids == ["Answer ID", "a-1", "a-4", "a-5", "a-6"]


def test_delete_columns_shifts_left(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(2)])

    batch_update(sheets, spreadsheet_id, dimension("deleteDimension", 1, 2, dim="COLUMNS"))

    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [
        ["Answer ID", "Submitted at"],
        ["a-1", "2024-01-01"],
        ["a-2", "2024-01-02"],
    ]
    assert grid(sheets, spreadsheet_id)["columnCount"] == 25


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            dimension("deleteDimension", 1, 2, gid=12345),
            "Invalid requests[0].deleteDimension: No grid with id: 12345",
        ),
        (
            dimension("deleteDimension", 1000, 1004),
            "Invalid requests[0].deleteDimension: Cannot delete a row that doesn't exist. "
            "Tried to delete row index 1003 but there are only 1003 rows.",
        ),
        (
            dimension("deleteDimension", 0, 1003),
            "Invalid requests[0].deleteDimension: "
            "Sorry, it is not possible to delete all non-frozen rows.",
        ),
        (
            dimension("insertDimension", -1, 2),
            "Invalid requests[0].insertDimension: DimensionRange indexes must be >= 0",
        ),
        (
            dimension("insertDimension", 2, 1, gid=7),
            "Invalid requests[0].insertDimension: No grid with id: 7",
        ),
    ],
)
def test_bad_dimension_requests_get_googles_400(
    connect: Any, emulator_admin: EmulatorAdmin, request_: dict[str, Any], message: str
) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(2)])

    body = refused(sheets, spreadsheet_id, request_)

    assert body == {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    assert len(emulator_admin.sheet_values(spreadsheet_id, 0)) == 3


def test_a_batch_applies_in_order_and_all_or_nothing(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(4)])
    before = emulator_admin.sheet_values(spreadsheet_id, 0)

    body = refused(
        sheets,
        spreadsheet_id,
        dimension("deleteDimension", 1, 2),
        dimension("insertDimension", 1, 3),
        dimension("deleteDimension", 1, 2, gid=99),
    )
    assert body["error"]["message"] == "Invalid requests[2].deleteDimension: No grid with id: 99"
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == before
    assert grid(sheets, spreadsheet_id)["rowCount"] == 1005

    # Order matters: delete row 2 (a-1), then row 2 again (now a-2), then insert a blank.
    reply = batch_update(
        sheets,
        spreadsheet_id,
        dimension("deleteDimension", 1, 2),
        dimension("deleteDimension", 1, 2),
        dimension("insertDimension", 2, 3),
    )
    assert reply["replies"] == [{}, {}, {}]
    assert [row[:1] for row in emulator_admin.sheet_values(spreadsheet_id, 0)] == [
        ["Answer ID"],
        ["a-3"],
        [],
        ["a-4"],
    ]


def test_appends_after_a_blank_row_inserted_in_the_middle_fill_the_gap(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(4)])
    batch_update(sheets, spreadsheet_id, dimension("insertDimension", 3, 4))  # above a-3

    # Google's table detection: the blank row ends the table A1 is in, so an append to
    # A1 goes right below it (INSERT_ROWS pushes the rest down), not below a-4.
    to_a1 = append(sheets, spreadsheet_id, answers(1, first=5))
    # A range of the whole sheet finds the table of its last data instead.
    to_sheet = append(sheets, spreadsheet_id, answers(1, first=6), range_="Sheet1")

    assert to_a1["tableRange"] == "Sheet1!A1:C3"
    assert to_a1["updates"]["updatedRange"] == "Sheet1!A4:C4"
    assert to_sheet["tableRange"] == "Sheet1!A6:C7"
    assert to_sheet["updates"]["updatedRange"] == "Sheet1!A8:C8"
    ids = [row[0] if row else "" for row in emulator_admin.sheet_values(spreadsheet_id, 0)]
    assert ids == ["Answer ID", "a-1", "a-2", "a-5", "", "a-3", "a-4", "a-6"]


def test_append_finds_the_table_as_google_did_in_the_recording(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    # WorksheetTest.test_append_row_with_empty_value.json (gspread's cassette of the real
    # API): A1 and C1 filled, B1 blank; the second append to 'Sheet1' found table C1.
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    row = ["test_append_row_with_empty_value 1", "", "test_append_row_with_empty_value 3"]

    def append_raw() -> Any:
        return (
            sheets.values()
            .append(
                spreadsheetId=spreadsheet_id,
                range="'Sheet1'",
                valueInputOption="RAW",
                includeValuesInResponse=False,
                body={"values": [row]},
            )
            .execute()
        )

    first, second = append_raw(), append_raw()

    assert first["updates"]["updatedRange"] == "Sheet1!A1:C1"
    assert "tableRange" not in first
    assert second == {
        "spreadsheetId": spreadsheet_id,
        "tableRange": "Sheet1!C1",
        "updates": {
            "spreadsheetId": spreadsheet_id,
            "updatedRange": "Sheet1!C2:E2",
            "updatedRows": 1,
            "updatedColumns": 3,
            "updatedCells": 3,
        },
    }
    second_row = sheets.values().get(spreadsheetId=spreadsheet_id, range="'Sheet1'!A2:2")
    assert second_row.execute()["values"] == [["", "", row[0], "", row[2]]]


def test_sort_range_orders_rows_like_google(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets, spreadsheet_id = seeded(
        connect,
        emulator_admin,
        [
            ["id", "score", "note"],
            ["r1", "banana", "keep"],
            ["r2", 10, ""],
            ["r3", "", "blank score"],
            ["r4", "Apple", ""],
            ["r5", True, ""],
            ["r6", 2.5, ""],
        ],
    )

    def sort_by_score(order: str) -> list[str]:
        batch_update(
            sheets,
            spreadsheet_id,
            {
                "sortRange": {
                    "range": {"sheetId": 0, "startRowIndex": 1, "endRowIndex": 7},
                    "sortSpecs": [{"dimensionIndex": 1, "sortOrder": order}],
                }
            },
        )
        return [row[0] for row in emulator_admin.sheet_values(spreadsheet_id, 0)[1:]]

    # Numbers, then text (case-insensitive), then booleans; blanks last in both orders.
    assert sort_by_score("ASCENDING") == ["r6", "r2", "r4", "r1", "r5", "r3"]
    assert sort_by_score("DESCENDING") == ["r5", "r1", "r4", "r2", "r6", "r3"]
    assert emulator_admin.sheet_values(spreadsheet_id, 0)[0] == ["id", "score", "note"]
    assert ["r3", "", "blank score"] in emulator_admin.sheet_values(spreadsheet_id, 0)


def test_sort_range_moves_only_the_ranges_columns_and_is_stable(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    rows = [["b", "1", "x1"], ["a", "1", "x2"], ["b", "0", "x3"], ["a", "0", "x4"]]
    sheets, spreadsheet_id = seeded(connect, emulator_admin, rows)

    batch_update(
        sheets,
        spreadsheet_id,
        {
            "sortRange": {
                "range": {"sheetId": 0, "startColumnIndex": 0, "endColumnIndex": 2},
                "sortSpecs": [
                    {"dimensionIndex": 0, "sortOrder": "ASCENDING"},
                    {"dimensionIndex": 1, "sortOrder": "DESCENDING"},
                ],
            }
        },
    )

    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [
        ["a", "1", "x1"],
        ["a", "0", "x2"],
        ["b", "1", "x3"],
        ["b", "0", "x4"],
    ]


def test_sort_range_checks_its_range(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(2)])

    too_far = refused(
        sheets,
        spreadsheet_id,
        {
            "sortRange": {
                "range": {"sheetId": 0, "startRowIndex": 1, "endRowIndex": 2000},
                "sortSpecs": [{"dimensionIndex": 0}],
            }
        },
    )
    no_sheet = refused(
        sheets,
        spreadsheet_id,
        {"sortRange": {"range": {"sheetId": 3}, "sortSpecs": [{"dimensionIndex": 0}]}},
    )

    assert too_far["error"]["message"] == (
        "Invalid requests[0].sortRange: Range (Sheet1!A2:Z2000) exceeds grid limits. "
        "Max rows: 1003, max columns: 26"
    )
    assert no_sheet["error"]["message"] == "Invalid requests[0].sortRange: No grid with id: 3"


def test_earlier_requests_keep_working_next_to_the_new_ones(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    reply = batch_update(
        sheets,
        spreadsheet_id,
        {"addSheet": {"properties": {"title": "Answers", "sheetId": 5}}},
        {"appendCells": {"sheetId": 5, "rows": [_cells("b"), _cells("a")], "fields": "*"}},
        {"sortRange": {"range": {"sheetId": 5}, "sortSpecs": [{"dimensionIndex": 0}]}},
        dimension("insertDimension", 0, 1, gid=5),
    )

    assert reply["replies"][0]["addSheet"]["properties"]["sheetId"] == 5
    assert reply["replies"][1:] == [{}, {}, {}]
    assert emulator_admin.sheet_values(spreadsheet_id, 5) == [[], ["a"], ["b"]]


def _cells(text: str) -> dict[str, Any]:
    return {"values": [{"userEnteredValue": {"stringValue": text}}]}


def test_stats_count_a_batch_update_as_one_write(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets, spreadsheet_id = seeded(connect, emulator_admin, [HEADER, *answers(3)])
    emulator_admin.reset_stats()

    batch_update(
        sheets,
        spreadsheet_id,
        dimension("deleteDimension", 1, 2),
        dimension("insertDimension", 1, 2),
        {
            "sortRange": {
                "range": {"sheetId": 0, "startRowIndex": 1},
                "sortSpecs": [{"dimensionIndex": 0}],
            }
        },
    )
    emulator_admin.delete_rows(spreadsheet_id, 0, 1, 2)  # admin edits are not counted

    requests = emulator_admin.stats()["requests"]
    assert requests["by_kind"] == {"spreadsheets.batchUpdate": 1}
    assert (requests["total"], requests["writes"], requests["reads"]) == (1, 1, 0)
    assert emulator_admin.stats()["by_account"]["owner"]["requests"]["by_kind"] == {
        "spreadsheets.batchUpdate": 1
    }
