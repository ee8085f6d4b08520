"""gspread 6.2 itself against the emulator, changed only in the endpoint
(``emulator_support.gspread``): its common worksheet calls, each checked by reading back
what it did, through gspread or the admin API."""

from __future__ import annotations

import gspread
import pytest
from emulator_support.gspread import gspread_client
from gspread.utils import ValueInputOption, ValueRenderOption

from sheets_emulator import EmulatorAdmin, EmulatorServer

HEADER = ["Name", "Score", "City"]
ROWS = [["Ada", 36, "London"], ["Grace", 85, "New York"], ["Alan", 41, "Wilmslow"]]


@pytest.fixture
def client(emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin) -> gspread.Client:
    emulator_admin.add_account("owner", "refresh-owner")
    return gspread_client(emulator_server.url, "refresh-owner")


@pytest.fixture
def spreadsheet(client: gspread.Client, emulator_admin: EmulatorAdmin) -> gspread.Spreadsheet:
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner", "Scores")
    return client.open_by_key(spreadsheet_id)


@pytest.fixture
def sheet(spreadsheet: gspread.Spreadsheet) -> gspread.Worksheet:
    sheet = spreadsheet.sheet1
    sheet.update([HEADER, *ROWS], "A1")
    return sheet


def test_open_by_key_reads_the_spreadsheet(
    spreadsheet: gspread.Spreadsheet, emulator_admin: EmulatorAdmin
) -> None:
    assert spreadsheet.title == "Scores"
    assert [sheet.title for sheet in spreadsheet.worksheets()] == ["Sheet1"]
    assert spreadsheet.sheet1.id == 0
    assert (spreadsheet.sheet1.row_count, spreadsheet.sheet1.col_count) == (1000, 26)


def test_update_writes_and_get_reads_back(spreadsheet: gspread.Spreadsheet) -> None:
    sheet = spreadsheet.sheet1

    answer = sheet.update([HEADER, *ROWS], "A1")

    assert answer["updatedRange"] == "Sheet1!A1:C4"
    assert answer["updatedCells"] == 12
    assert sheet.get("A1:C2") == [HEADER, ["Ada", "36", "London"]]
    assert sheet.get_all_values()[3] == ["Alan", "41", "Wilmslow"]
    assert sheet.get_all_records()[1] == {"Name": "Grace", "Score": 85, "City": "New York"}
    assert sheet.get("B2", value_render_option=ValueRenderOption.unformatted) == [[36]]


def test_cells_one_at_a_time(sheet: gspread.Worksheet) -> None:
    sheet.update_acell("D1", "Note")
    sheet.update_cell(2, 4, "first")

    assert sheet.acell("D1").value == "Note"
    assert sheet.cell(2, 4).value == "first"
    assert sheet.row_values(2) == ["Ada", "36", "London", "first"]
    assert sheet.col_values(1) == ["Name", "Ada", "Grace", "Alan"]


def test_user_entered_values_are_parsed(sheet: gspread.Worksheet) -> None:
    sheet.update([["=B2+B3", "12.5"]], "E1", value_input_option=ValueInputOption.user_entered)

    assert sheet.get("E1:F1", value_render_option=ValueRenderOption.unformatted) == [[121, 12.5]]
    assert sheet.get("E1", value_render_option=ValueRenderOption.formula) == [["=B2+B3"]]


def test_append_rows_land_after_the_table(sheet: gspread.Worksheet) -> None:
    sheet.append_row(["Edsger", 72, "Nuenen"])
    answer = sheet.append_rows([["Barbara", 90, "Boston"], ["Donald", 88, "Milwaukee"]])

    assert answer["updates"]["updatedRange"] == "Sheet1!A6:C7"
    assert sheet.get("A5:A7") == [["Edsger"], ["Barbara"], ["Donald"]]


def test_batch_get_reads_several_ranges(sheet: gspread.Worksheet) -> None:
    ranges = sheet.batch_get(["A1:C1", "A3:B4"])

    assert [list(found) for found in ranges] == [
        [HEADER],
        [["Grace", "85"], ["Alan", "41"]],
    ]
    assert [found.range for found in ranges] == ["Sheet1!A1:C1", "Sheet1!A3:B4"]


def test_batch_update_writes_several_ranges(sheet: gspread.Worksheet) -> None:
    answer = sheet.batch_update(
        [
            {"range": "A2:B2", "values": [["Ada L.", 37]]},
            {"range": "A4:C4", "values": [["Alan T.", "", "Manchester"]]},
        ]
    )

    assert sheet.get("A2:C4") == [
        ["Ada L.", "37", "London"],
        ["Grace", "85", "New York"],
        ["Alan T.", "", "Manchester"],
    ]
    # As Google counts: cells add up, rows and columns count once (A and B are in both).
    assert {name: value for name, value in answer.items() if name.startswith("total")} == {
        "totalUpdatedRows": 2,
        "totalUpdatedColumns": 3,
        "totalUpdatedCells": 5,
        "totalUpdatedSheets": 1,
    }
    assert [found["updatedRange"] for found in answer["responses"]] == [
        "Sheet1!A2:B2",
        "Sheet1!A4:C4",
    ]


def test_batch_clear_empties_several_ranges(sheet: gspread.Worksheet) -> None:
    answer = sheet.batch_clear(["A2:C2", "C3:C4"])

    assert answer["clearedRanges"] == ["Sheet1!A2:C2", "Sheet1!C3:C4"]
    assert sheet.get_all_values() == [HEADER, ["", "", ""], ["Grace", "85", ""], ["Alan", "41", ""]]
    assert sheet.get("A2:C2") == [[]]  # gspread's answer for a range with no values


def test_clear_empties_the_sheet(sheet: gspread.Worksheet) -> None:
    answer = sheet.clear()

    assert answer["clearedRange"] == "Sheet1!A1:Z1000"
    assert sheet.get_all_values() == [[]]  # gspread's empty sheet (its own test_clear)


def test_insert_rows_push_the_rest_down(sheet: gspread.Worksheet) -> None:
    sheet.insert_rows([["Katherine", 97, "Hampton"], ["Dorothy", 93, "Hampton"]], row=2)
    sheet.insert_row(["Mary", 95, "Hampton"], index=5)

    assert sheet.col_values(1) == ["Name", "Katherine", "Dorothy", "Ada", "Mary", "Grace", "Alan"]
    assert sheet.row_count == spreadsheet_rows(sheet) == 1003  # gspread's count and Google's


def test_delete_rows_pull_the_rest_up(sheet: gspread.Worksheet) -> None:
    sheet.delete_rows(2, 3)

    assert sheet.get_all_values() == [HEADER, ["Alan", "41", "Wilmslow"]]
    assert spreadsheet_rows(sheet) == 998


def test_find_and_findall(sheet: gspread.Worksheet) -> None:
    sheet.update_acell("C5", "London")

    found = sheet.find("Grace")
    assert found is not None
    assert (found.row, found.col, found.value) == (3, 1, "Grace")
    assert [(cell.row, cell.col) for cell in sheet.findall("London")] == [(2, 3), (5, 3)]
    assert sheet.find("nobody") is None


def test_format_applies_number_formats_and_accepts_the_look(sheet: gspread.Worksheet) -> None:
    sheet.format("B2:B4", {"numberFormat": {"type": "NUMBER", "pattern": "0.00"}})
    sheet.batch_format(
        [
            {"range": "A1:C1", "format": {"textFormat": {"bold": True}}},
            {"range": "B1:B4", "format": {"horizontalAlignment": "RIGHT"}},
        ]
    )

    assert sheet.col_values(2) == ["Score", "36.00", "85.00", "41.00"]
    assert sheet.get("B2", value_render_option=ValueRenderOption.unformatted) == [[36]]
    # How cells look (bold, alignment, colours) is accepted and not kept: the emulator
    # serves no grid data, and says so rather than answer without it.
    with pytest.raises(gspread.exceptions.APIError) as caught:
        sheet.client.fetch_sheet_metadata(
            sheet.spreadsheet_id,
            params={"ranges": "Sheet1!A1", "fields": "sheets.data.rowData.values"},
        )
    assert caught.value.code == 501
    assert "does not serve grid data" in str(caught.value)


def test_freeze_rows_and_columns(
    client: gspread.Client, spreadsheet: gspread.Spreadsheet, sheet: gspread.Worksheet
) -> None:
    sheet.freeze(rows=1, cols=2)

    again = client.open_by_key(spreadsheet.id).sheet1
    assert (again.frozen_row_count, again.frozen_col_count) == (1, 2)

    sheet.freeze(0, 0)

    grid = client.open_by_key(spreadsheet.id).sheet1._properties["gridProperties"]
    assert "frozenRowCount" not in grid and "frozenColumnCount" not in grid  # as Google's


def test_add_rename_and_delete_worksheets(spreadsheet: gspread.Spreadsheet) -> None:
    added = spreadsheet.add_worksheet("Totals", rows=10, cols=4)
    added.update([[2, 3, "=A1*B1"]], "A1", value_input_option=ValueInputOption.user_entered)
    added.update_title("Products")

    assert [sheet.title for sheet in spreadsheet.worksheets()] == ["Sheet1", "Products"]
    renamed = spreadsheet.worksheet("Products")
    assert (renamed.id, renamed.row_count, renamed.col_count) == (added.id, 10, 4)
    assert renamed.get("A1:C1") == [["2", "3", "6"]]

    spreadsheet.del_worksheet(renamed)

    assert [sheet.title for sheet in spreadsheet.worksheets()] == ["Sheet1"]
    with pytest.raises(gspread.WorksheetNotFound):
        spreadsheet.worksheet("Products")


def test_resize_and_sort(sheet: gspread.Worksheet) -> None:
    sheet.resize(rows=4, cols=3)
    sheet.sort((2, "des"), range="A2:C4")

    assert sheet.col_values(1) == ["Name", "Grace", "Alan", "Ada"]
    assert spreadsheet_rows(sheet) == 4


def test_errors_arrive_as_gspread_api_errors(spreadsheet: gspread.Spreadsheet) -> None:
    with pytest.raises(gspread.exceptions.APIError) as caught:
        spreadsheet.values_get("Nowhere!A1")

    assert caught.value.code == 400
    assert caught.value.error["status"] == "INVALID_ARGUMENT"
    assert "Unable to parse range: Nowhere!A1" in str(caught.value)


def spreadsheet_rows(sheet: gspread.Worksheet) -> int:
    """The sheet's row count as the API has it now (a Worksheet keeps what it was told)."""
    metadata = sheet.client.fetch_sheet_metadata(sheet.spreadsheet_id)
    [properties] = [
        found["properties"]
        for found in metadata["sheets"]
        if found["properties"]["sheetId"] == sheet.id
    ]
    rows: int = properties["gridProperties"]["rowCount"]
    return rows
