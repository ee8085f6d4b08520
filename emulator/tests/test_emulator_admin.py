"""The admin API (sheet views, index, quotas, reset) and the server's life cycle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin, EmulatorAdminError, EmulatorServer
from sheets_emulator.server import EmulatorStartError


def append(sheets: Any, spreadsheet_id: str, range_: str, rows: list[list[str]]) -> Any:
    return (
        sheets.values()
        .append(
            spreadsheetId=spreadsheet_id,
            range=range_,
            valueInputOption="RAW",
            body={"values": rows},
        )
        .execute()
    )


def test_sheet_view_as_json_and_escaped_html(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, gids = emulator_admin.create_spreadsheet("owner", "Demo", ["Answers"])
    script = "<script>alert('x')</script>"
    append(sheets, spreadsheet_id, "Answers", [["id", "comment"], ["a-1", script], ["a-2", "ok"]])

    values = emulator_admin.sheet_values(spreadsheet_id, gids["Answers"])
    html = emulator_admin.sheet_html(spreadsheet_id, gids["Answers"])

    assert values == [["id", "comment"], ["a-1", script], ["a-2", "ok"]]
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<title>Answers - Demo</title>" in html


def test_sheet_view_json_shape_and_unknown_sheet(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    url = f"{emulator_server.url}/_emulator/spreadsheets/{spreadsheet_id}/sheets/0"

    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())

    assert body == {"spreadsheetId": spreadsheet_id, "sheetId": 0, "title": "Sheet1", "values": []}
    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.sheet_values(spreadsheet_id, 99)
    assert caught.value.status == 404


def test_index_page_lists_spreadsheets_with_links(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner", "<b>Sales</b>", ["Q1", "Q2"])
    request = urllib.request.Request(f"{emulator_server.url}/_emulator/")

    with urllib.request.urlopen(request, timeout=5) as response:
        page = response.read().decode()

    assert response.headers["Content-Type"].startswith("text/html")
    assert "&lt;b&gt;Sales&lt;/b&gt;" in page
    assert f"/_emulator/spreadsheets/{spreadsheet_id}/sheets/0" in page


def test_batch_update_adds_deletes_and_appends_cells(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    reply = sheets.batchUpdate(
        spreadsheetId=spreadsheet_id,
        body={
            "requests": [
                {"addSheet": {"properties": {"title": "Extra", "sheetId": 7}}},
                {
                    "appendCells": {
                        "sheetId": 7,
                        "rows": [
                            {
                                "values": [
                                    {"userEnteredValue": {"stringValue": "=text"}},
                                    {"userEnteredValue": {"numberValue": 3}},
                                    {"userEnteredValue": {"boolValue": True}},
                                    {"userEnteredValue": {"formulaValue": "=B1*2"}},
                                ]
                            }
                        ],
                        "fields": "userEnteredValue",
                    }
                },
            ]
        },
    ).execute()

    assert reply["replies"][0]["addSheet"]["properties"]["sheetId"] == 7
    assert reply["replies"][1] == {}
    assert emulator_admin.sheet_values(spreadsheet_id, 7) == [["=text", "3", "TRUE", "6"]]

    sheets.batchUpdate(
        spreadsheetId=spreadsheet_id, body={"requests": [{"deleteSheet": {"sheetId": 7}}]}
    ).execute()
    titles = [
        s["properties"]["title"]
        for s in sheets.get(spreadsheetId=spreadsheet_id).execute()["sheets"]
    ]
    assert titles == ["Sheet1"]


def test_a_failing_batch_update_changes_nothing(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")

    with pytest.raises(HttpError) as caught:
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id,
            body={
                "requests": [
                    {"addSheet": {"properties": {"title": "New"}}},
                    {"deleteSheet": {"sheetId": 12345}},
                ]
            },
        ).execute()

    assert caught.value.resp.status == 400
    message = json.loads(caught.value.content)["error"]["message"]
    assert message == "Invalid requests[1].deleteSheet: No grid with id: 12345"
    assert len(emulator_admin.spreadsheet(spreadsheet_id)["sheets"]) == 1


def test_more_than_ten_million_cells_is_refused(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    big = {"title": "Big", "gridProperties": {"rowCount": 10_000_000, "columnCount": 1}}

    with pytest.raises(HttpError) as caught:
        sheets.batchUpdate(
            spreadsheetId=spreadsheet_id, body={"requests": [{"addSheet": {"properties": big}}]}
        ).execute()

    assert caught.value.resp.status == 400
    assert (
        "above the limit of 10000000 cells" in json.loads(caught.value.content)["error"]["message"]
    )


def test_quotas_can_be_read_changed_and_reset(emulator_admin: EmulatorAdmin) -> None:
    assert emulator_admin.quotas() == {
        "read_per_account": 60,
        "write_per_account": 60,
        "read_per_project": 300,
        "write_per_project": 300,
        "window_s": 60.0,
    }

    changed = emulator_admin.set_quotas(write_per_account=2, window_s=5)

    assert changed["write_per_account"] == 2
    assert changed["window_s"] == 5.0
    with pytest.raises(EmulatorAdminError, match="positive"):
        emulator_admin.set_quotas(read_per_project=0)
    emulator_admin.reset()
    assert emulator_admin.quotas()["write_per_account"] == 60


def test_admin_errors_are_json(emulator_admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.revoke("nobody")
    assert caught.value.status == 404
    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.create_spreadsheet("")
    assert caught.value.status == 400
    unreachable = EmulatorAdmin("http://127.0.0.1:9", timeout=1)
    with pytest.raises(EmulatorAdminError) as caught:
        unreachable.stats()
    assert caught.value.status is None


def test_server_options_and_a_taken_port(emulator_server: EmulatorServer) -> None:
    with EmulatorServer(write_per_account=5, window_s=2.5) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert server.token_uri == server.url + "/token"
        assert EmulatorAdmin(server.url).quotas()["write_per_account"] == 5
    assert not server.running

    with pytest.raises(EmulatorStartError):
        EmulatorServer(port=emulator_server.port).start()


def test_serve_prints_the_url_and_stops_on_sigterm() -> None:
    code = "from sheets_emulator import serve; serve(port=0)"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": ""},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("Sheets API emulator listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert EmulatorAdmin(url).quotas()["read_per_account"] == 60
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
