"""batchUpdate addSheet and updateSheetProperties, the spreadsheet's time zone, the cell
limit and the request size limit (settings of the emulator), through
google-api-python-client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin

LIMIT_MESSAGE = (
    "This action would increase the number of cells in the workbook above the limit of {} cells."
)


def batch_update(sheets: Any, spreadsheet_id: str, *requests: dict[str, Any]) -> Any:
    return sheets.batchUpdate(
        spreadsheetId=spreadsheet_id, body={"requests": list(requests)}
    ).execute()


def refused(call: Any) -> dict[str, Any]:
    with pytest.raises(HttpError) as caught:
        call.execute()
    assert caught.value.resp.status == 400
    error: dict[str, Any] = json.loads(caught.value.content)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    return error


def sheet_properties(sheets: Any, spreadsheet_id: str) -> list[dict[str, Any]]:
    resource = sheets.get(spreadsheetId=spreadsheet_id).execute()
    return [sheet["properties"] for sheet in resource["sheets"]]


def update_sheet(properties: dict[str, Any], fields: str) -> dict[str, Any]:
    return {"updateSheetProperties": {"properties": properties, "fields": fields}}


def add_sheet(title: str, rows: int = 1000, columns: int = 26) -> dict[str, Any]:
    grid = {"rowCount": rows, "columnCount": columns}
    return {"addSheet": {"properties": {"title": title, "gridProperties": grid}}}


def append(sheets: Any, spreadsheet_id: str, rows: list[list[Any]], range_: str = "Sheet1") -> Any:
    return sheets.values().append(
        spreadsheetId=spreadsheet_id,
        range=range_,
        valueInputOption="RAW",
        insertDataOption="INSERT_ROWS",
        body={"values": rows},
    )


def test_add_sheet_replies_with_the_new_sheets_properties(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    reply = batch_update(sheets, spreadsheet_id, add_sheet("Answers (2)", 1, 3))

    properties = reply["replies"][0]["addSheet"]["properties"]
    assert properties == {
        "sheetId": properties["sheetId"],
        "title": "Answers (2)",
        "index": 1,
        "sheetType": "GRID",
        "gridProperties": {"rowCount": 1, "columnCount": 3},
    }
    assert properties["sheetId"] > 0
    assert sheet_properties(sheets, spreadsheet_id)[1] == properties


def test_update_sheet_properties_renames_resizes_moves_and_hides(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner", sheets=["A", "B", "C"])
    append(sheets, spreadsheet_id, [["r1", "x"], ["r2", "y"], ["r3", "z"]], "A").execute()

    batch_update(
        sheets,
        spreadsheet_id,
        update_sheet({"sheetId": gids["A"], "title": "Renamed"}, "title"),
        update_sheet(
            {"sheetId": gids["A"], "gridProperties": {"rowCount": 2}}, "gridProperties/rowCount"
        ),
        update_sheet({"sheetId": gids["C"], "index": 0}, "index"),
        update_sheet({"sheetId": gids["B"], "hidden": True}, "hidden"),
        update_sheet(
            {"sheetId": gids["C"], "gridProperties": {"frozenRowCount": 1}},
            "gridProperties.frozenRowCount",
        ),
    )

    properties = sheet_properties(sheets, spreadsheet_id)
    assert [(p["title"], p["index"], p.get("hidden", False)) for p in properties] == [
        ("C", 0, False),
        ("Renamed", 1, False),
        ("B", 2, True),
    ]
    assert properties[0]["gridProperties"]["frozenRowCount"] == 1
    assert properties[1]["gridProperties"] == {"rowCount": 2, "columnCount": 26}
    values = sheets.values().get(spreadsheetId=spreadsheet_id, range="Renamed").execute()
    assert values["values"] == [["r1", "x"], ["r2", "y"]]


def test_only_the_fields_in_the_mask_change(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    everything = {"sheetId": 0, "title": "New", "gridProperties": {"rowCount": 5, "columnCount": 5}}

    batch_update(sheets, spreadsheet_id, update_sheet(everything, "gridProperties.columnCount"))

    (properties,) = sheet_properties(sheets, spreadsheet_id)
    assert properties["title"] == "Sheet1"
    assert properties["gridProperties"] == {"rowCount": 1000, "columnCount": 5}
    error = refused(
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id,
            body={"requests": [{"updateSheetProperties": {"properties": everything}}]},
        )
    )
    assert error["message"].startswith("Invalid requests[0].updateSheetProperties: ")


def test_a_failing_request_undoes_the_batch(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner", sheets=["A", "B"])

    error = refused(
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id,
            body={
                "requests": [
                    update_sheet({"sheetId": gids["A"], "title": "Z", "index": 2}, "title,index"),
                    update_sheet({"sheetId": gids["B"], "title": "Z"}, "title"),
                ]
            },
        )
    )

    assert error["message"] == (
        'Invalid requests[1].updateSheetProperties: A sheet with the name "Z" already exists. '
        "Please enter another name."
    )
    assert [p["title"] for p in sheet_properties(sheets, spreadsheet_id)] == ["A", "B"]


def test_time_zone_is_google_s_default_and_can_be_chosen(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    first, _ = emulator_admin.create_spreadsheet("owner")
    chosen, _ = emulator_admin.create_spreadsheet("owner", time_zone="America/New_York")
    emulator_admin.set_settings(time_zone="Europe/Paris")
    later, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.set_time_zone(first, "Asia/Tokyo")

    def time_zone(spreadsheet_id: str) -> str:
        resource = sheets.get(spreadsheetId=spreadsheet_id).execute()
        zone: str = resource["properties"]["timeZone"]
        return zone

    assert (time_zone(first), time_zone(chosen), time_zone(later)) == (
        "Asia/Tokyo",
        "America/New_York",
        "Europe/Paris",
    )
    emulator_admin.reset()
    assert emulator_admin.settings() == {
        "max_cells": 10_000_000,
        "time_zone": "Etc/GMT",
        "max_request_bytes": 10 * 1024 * 1024,
    }
    sheets = connect("owner")
    created = sheets.create(body={"properties": {"title": "x"}}).execute()
    assert created["properties"]["timeZone"] == "Etc/GMT"


def test_the_owner_may_change_the_time_zone_through_the_api(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    request = {
        "updateSpreadsheetProperties": {
            "properties": {"timeZone": "Europe/Berlin", "title": "ignored"},
            "fields": "timeZone",
        }
    }

    batch_update(sheets, spreadsheet_id, request)

    properties = sheets.get(spreadsheetId=spreadsheet_id).execute()["properties"]
    assert (properties["timeZone"], properties["title"]) == (
        "Europe/Berlin",
        "Untitled spreadsheet",
    )
    request["updateSpreadsheetProperties"]["properties"]["timeZone"] = "Mars/Olympus"
    refused(sheets.batchUpdate(spreadsheetId=spreadsheet_id, body={"requests": [request]}))


def test_the_cell_limit_refuses_appends_new_sheets_and_resizes(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    batch_update(
        sheets,
        spreadsheet_id,
        update_sheet(
            {"sheetId": 0, "gridProperties": {"rowCount": 1, "columnCount": 3}}, "gridProperties"
        ),
    )
    emulator_admin.set_settings(max_cells=60)
    append(sheets, spreadsheet_id, [["a", "b", "c"]] * 19).execute()  # 20 x 3 = 60 cells

    append_error = refused(append(sheets, spreadsheet_id, [["d", "e", "f"]]))
    add_error = refused(
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id, body={"requests": [add_sheet("Answers (2)", 1, 1)]}
        )
    )
    grow = update_sheet(
        {"sheetId": 0, "gridProperties": {"columnCount": 4}}, "gridProperties.columnCount"
    )
    resize_error = refused(
        sheets.batchUpdate(spreadsheetId=spreadsheet_id, body={"requests": [grow]})
    )

    assert append_error["message"] == LIMIT_MESSAGE.format(60)
    assert add_error["message"] == "Invalid requests[0].addSheet: " + LIMIT_MESSAGE.format(60)
    assert resize_error["message"] == (
        "Invalid requests[0].updateSheetProperties: " + LIMIT_MESSAGE.format(60)
    )
    (properties,) = sheet_properties(sheets, spreadsheet_id)
    assert properties["gridProperties"] == {"rowCount": 20, "columnCount": 3}
    emulator_admin.set_settings(max_cells=63)
    assert append(sheets, spreadsheet_id, [["d", "e", "f"]]).execute()["updates"][
        "updatedRange"
    ] == ("Sheet1!A20:C20")


def test_a_resize_adds_rows_before_it_removes_columns(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    # Google applies rowCount first and checks the limit after it (found by
    # gspread-dataframe, PR #38): 20 x 3 to 30 x 2 fails under a 60-cell limit.
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    size = {"sheetId": 0, "gridProperties": {"rowCount": 20, "columnCount": 3}}
    batch_update(sheets, spreadsheet_id, update_sheet(size, "gridProperties"))
    emulator_admin.set_settings(max_cells=60)
    taller = {"sheetId": 0, "gridProperties": {"rowCount": 30, "columnCount": 2}}

    error = refused(
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id,
            body={"requests": [update_sheet(taller, "gridProperties")]},
        )
    )
    narrower = {"sheetId": 0, "gridProperties": {"columnCount": 2}}
    batch_update(
        sheets,
        spreadsheet_id,
        update_sheet(narrower, "gridProperties.columnCount"),
        update_sheet(taller, "gridProperties"),
    )

    assert error["message"].endswith(LIMIT_MESSAGE.format(60))
    (properties,) = sheet_properties(sheets, spreadsheet_id)
    assert properties["gridProperties"] == {"rowCount": 30, "columnCount": 2}


def test_presentation_is_accepted_and_values_are_not_faked(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    header_row = {"sheetId": 0, "startRowIndex": 0, "endRowIndex": 1}
    bold_dates = {
        "repeatCell": {
            "range": header_row,
            "cell": {
                "userEnteredFormat": {
                    "textFormat": {"bold": True},
                    "numberFormat": {"type": "NUMBER", "pattern": "0.0"},
                }
            },
            "fields": "userEnteredFormat(textFormat.bold,numberFormat)",
        }
    }
    widths = {
        "updateDimensionProperties": {
            "range": {"sheetId": 0, "dimension": "COLUMNS", "startIndex": 0, "endIndex": 3},
            "properties": {"pixelSize": 160},
            "fields": "pixelSize",
        }
    }
    frozen = update_sheet(
        {"sheetId": 0, "gridProperties": {"frozenRowCount": 1}, "tabColor": {"red": 1}},
        "gridProperties.frozenRowCount,tabColor",
    )

    batch_update(sheets, spreadsheet_id, bold_dates, widths, frozen)
    sheets.values().update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1",
        valueInputOption="RAW",
        body={"values": [[2]]},
    ).execute()
    values = {
        "repeatCell": {
            "range": header_row,
            "cell": {"userEnteredValue": {"stringValue": "x"}},
            "fields": "userEnteredValue",
        }
    }
    error = refused(sheets.batchUpdate(spreadsheetId=spreadsheet_id, body={"requests": [values]}))

    read = sheets.values().get(spreadsheetId=spreadsheet_id, range="Sheet1!A1").execute()
    assert read["values"] == [["2.0"]]
    assert "userEnteredValue" in error["message"]


def test_a_request_above_the_size_limit_is_refused_whole(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    """Google's front end answers a body above 10 MiB with a 400 and writes nothing; the
    limit is a setting so a test need not send 10 MiB."""
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.set_settings(max_request_bytes=50_000)
    values = sheets.values()

    def append(text: str) -> Any:
        body = {"values": [["a", text]]}
        return values.append(
            spreadsheetId=spreadsheet_id, range="A1", valueInputOption="RAW", body=body
        )

    error = refused(append("x" * 50_000))
    assert error["message"] == "Request payload size exceeds the limit: 50000 bytes."
    append("x" * 40_000).execute()
    got = values.get(spreadsheetId=spreadsheet_id, range="A1:B9").execute()
    assert [row[0] for row in got["values"]] == ["a"]  # the refused one wrote nothing
    emulator_admin.reset()
    assert emulator_admin.settings()["max_request_bytes"] == 10 * 1024 * 1024
