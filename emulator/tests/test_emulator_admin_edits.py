"""EmulatorAdmin's edits, what a person does to a sheet: no token, no quota, no stats."""

from __future__ import annotations

from typing import Any

import pytest

from sheets_emulator import EmulatorAdmin, EmulatorAdminError

HEADER = ["Answer ID", "Score"]


def append(sheets: Any, spreadsheet_id: str, rows: list[list[Any]]) -> Any:
    return (
        sheets.values()
        .append(
            spreadsheetId=spreadsheet_id,
            range="'Answers'!A1",
            valueInputOption="RAW",
            insertDataOption="INSERT_ROWS",
            body={"values": rows},
        )
        .execute()
    )


def ids(admin: EmulatorAdmin, spreadsheet_id: str, gid: int) -> list[str]:
    return [row[0] if row else "" for row in admin.sheet_values(spreadsheet_id, gid)]


def test_person_edits_and_api_appends_interleave(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner", sheets=["Answers"])
    gid = gids["Answers"]
    append(sheets, spreadsheet_id, [HEADER, ["a-1", "3"], ["a-2", "1"], ["a-3", "2"]])
    emulator_admin.reset_stats()

    emulator_admin.delete_rows(spreadsheet_id, gid, 1, 2)  # a person deletes a-1's row
    after_delete = append(sheets, spreadsheet_id, [["a-4", "5"]])
    emulator_admin.sort_rows(spreadsheet_id, gid, 1)  # by Score, header kept
    sorted_ids = ids(emulator_admin, spreadsheet_id, gid)
    emulator_admin.sort_rows(spreadsheet_id, gid, 0, descending=True)
    descending_ids = ids(emulator_admin, spreadsheet_id, gid)
    emulator_admin.insert_rows(spreadsheet_id, gid, 1, 3)  # two blank rows under the header

    assert after_delete["updates"]["updatedRange"] == "Answers!A4:B4"
    assert sorted_ids == ["Answer ID", "a-2", "a-3", "a-4"]
    assert descending_ids == ["Answer ID", "a-4", "a-3", "a-2"]
    assert ids(emulator_admin, spreadsheet_id, gid) == ["Answer ID", "", "", "a-4", "a-3", "a-2"]
    stats = emulator_admin.stats()
    assert stats["requests"]["by_kind"] == {"values.append": 1}  # only the API's append


def test_columns_and_values_edits(emulator_admin: EmulatorAdmin) -> None:
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    written = emulator_admin.update_values(spreadsheet_id, "Sheet1!A1", [["id", "=1+1", "x"]])
    emulator_admin.insert_columns(spreadsheet_id, 0, 1, 2)
    after_insert = emulator_admin.sheet_values(spreadsheet_id, 0)
    emulator_admin.delete_columns(spreadsheet_id, 0, 0, 2)
    emulator_admin.update_values(spreadsheet_id, "Sheet1!A1", [[""]])  # clears the cell

    assert written["updatedRange"] == "Sheet1!A1:C1"
    assert after_insert == [["id", "", "2", "x"]]  # USER_ENTERED by default, as typed
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["", "x"]]
    grid = emulator_admin.spreadsheet(spreadsheet_id)["sheets"][0]["properties"]
    assert grid["gridProperties"] == {"rowCount": 1000, "columnCount": 25}


def test_batch_update_answers_like_the_api_and_refuses_like_it(
    emulator_admin: EmulatorAdmin,
) -> None:
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.update_values(spreadsheet_id, "A1", [["a"], ["b"]], value_input_option="RAW")

    reply = emulator_admin.batch_update(  # no endIndex: to the end of the grid
        spreadsheet_id,
        [{"deleteDimension": {"range": {"sheetId": 0, "dimension": "ROWS", "startIndex": 1}}}],
    )
    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.delete_rows(spreadsheet_id, 0, 0, 1)  # the only row left

    assert reply == {"spreadsheetId": spreadsheet_id, "replies": [{}]}
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["a"]]
    grid = emulator_admin.spreadsheet(spreadsheet_id)["sheets"][0]["properties"]
    assert grid["gridProperties"]["rowCount"] == 1
    assert caught.value.status == 400
    assert "it is not possible to delete all non-frozen rows" in str(caught.value)
    with pytest.raises(EmulatorAdminError) as missing:
        emulator_admin.sort_rows("no-such-spreadsheet", 0, 0)
    assert missing.value.status == 404


def test_a_person_clears_a_sheet_and_its_formats_stay(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    date_column = {
        "repeatCell": {
            "range": {"sheetId": 0, "startColumnIndex": 0, "endColumnIndex": 1},
            "cell": {
                "userEnteredFormat": {"numberFormat": {"type": "DATE", "pattern": "yyyy-mm-dd"}}
            },
            "fields": "userEnteredFormat.numberFormat",
        }
    }
    emulator_admin.batch_update(spreadsheet_id, [date_column])
    emulator_admin.update_values(spreadsheet_id, "Sheet1!A1", [["Submitted at"], ["45352"]])

    cleared = emulator_admin.clear_values(spreadsheet_id, "Sheet1")
    emulator_admin.update_values(spreadsheet_id, "Sheet1!A2", [[45353]], value_input_option="RAW")

    assert cleared == {"spreadsheetId": spreadsheet_id, "clearedRange": "Sheet1!A1:Z1000"}
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [[], ["2024-03-02"]]
    assert (
        "values"
        not in sheets.values().get(spreadsheetId=spreadsheet_id, range="Sheet1!1:1").execute()
    )
