"""Injected faults as a client sees them: errors, hangs, and commit-then-drop."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from google.auth.exceptions import RefreshError
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin


def append_request(sheets: Any, spreadsheet_id: str, text: str) -> Any:
    return sheets.values().append(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1",
        valueInputOption="RAW",
        insertDataOption="INSERT_ROWS",
        body={"values": [[text]]},
    )


def column_a(admin: EmulatorAdmin, spreadsheet_id: str) -> list[str]:
    return [row[0] for row in admin.sheet_values(spreadsheet_id, 0)]


def test_commit_then_drop_leaves_the_rows_while_the_client_fails(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    # httplib2 silently re-sends a request once when the connection closes without a
    # status line, so two drops are needed before execute() sees the failure.
    emulator_admin.add_fault("values.append", count=2, action="drop")

    with pytest.raises((ConnectionError, OSError)):
        append_request(sheets, spreadsheet_id, "answer-1").execute()

    assert column_a(emulator_admin, spreadsheet_id) == ["answer-1", "answer-1"]
    stats = emulator_admin.stats()
    assert stats["faults_fired"] == {"drop": 2}
    assert stats["served"]["writes"] == 2  # a dropped request counts as served
    assert emulator_admin.faults() == []


def test_one_drop_is_hidden_by_httplib2_and_duplicates_the_append(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.add_fault("values.append", count=1, action="drop")

    result = append_request(sheets, spreadsheet_id, "answer-1").execute()

    assert result["updates"]["updatedRange"] == "Sheet1!A2"
    assert column_a(emulator_admin, spreadsheet_id) == ["answer-1", "answer-1"]


def test_an_error_fault_answers_503_and_writes_nothing(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.add_fault("write", count=1, action="error", status=503)

    with pytest.raises(HttpError) as caught:
        append_request(sheets, spreadsheet_id, "answer-1").execute()
    append_request(sheets, spreadsheet_id, "answer-2").execute()

    assert caught.value.resp.status == 503
    assert json.loads(caught.value.content) == {
        "error": {
            "code": 503,
            "message": "The service is currently unavailable.",
            "status": "UNAVAILABLE",
        }
    }
    assert column_a(emulator_admin, spreadsheet_id) == ["answer-2"]
    assert emulator_admin.stats()["served"]["writes"] == 1  # faults come before the quota


def test_an_error_fault_of_429_sends_the_quota_body_for_one_account_only(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    alice, bob = connect("alice"), connect("bob")
    alice_sheet, _ = emulator_admin.create_spreadsheet("alice")
    bob_sheet, _ = emulator_admin.create_spreadsheet("bob")
    emulator_admin.add_fault("any", count=1, action="error", status=429, account="alice")

    bob.values().get(spreadsheetId=bob_sheet, range="A1").execute()
    with pytest.raises(HttpError) as caught:
        alice.values().get(spreadsheetId=alice_sheet, range="A1").execute()

    error = json.loads(caught.value.content)["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert error["details"][0]["metadata"]["quota_limit"] == "ReadRequestsPerMinutePerUser"


def test_a_hang_outlasts_the_client_timeout_and_then_serves(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    connect("owner")
    impatient = connect("owner", register=False, timeout=0.3)
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    impatient.get(spreadsheetId=spreadsheet_id).execute()  # token fetched before the hang
    emulator_admin.add_fault("values.append", count=1, action="hang", seconds=0.8)

    started = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout)):
        append_request(impatient, spreadsheet_id, "slow").execute()
    assert time.monotonic() - started < 0.7

    deadline = time.monotonic() + 3
    while column_a(emulator_admin, spreadsheet_id) != ["slow"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert column_a(emulator_admin, spreadsheet_id) == ["slow"]  # the write landed late


def test_a_token_fault_fails_the_refresh(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    emulator_admin.add_fault("token", count=5, action="error", status=400)

    with pytest.raises(RefreshError):
        sheets.create(body={}).execute()

    assert emulator_admin.stats()["token"]["failures"] >= 1


def test_bad_fault_specs_are_refused(emulator_admin: EmulatorAdmin) -> None:
    from sheets_emulator import EmulatorAdminError

    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.add_fault("values.delete")
    assert caught.value.status == 400
    assert "kind must be one of" in str(caught.value)
    with pytest.raises(EmulatorAdminError):
        emulator_admin.add_fault("read", action="explode")
