"""OAuth as google-auth sees it: refresh, revoke (invalid_grant), restore, and 401s."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.auth.exceptions import RefreshError
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin


def read(sheets: Any, spreadsheet_id: str) -> Any:
    return sheets.values().get(spreadsheetId=spreadsheet_id, range="Sheet1!A1").execute()


def test_a_revoked_account_fails_refresh_with_invalid_grant_until_registered_again(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("alice")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("alice")
    read(sheets, spreadsheet_id)  # holds a valid access token now

    emulator_admin.revoke("alice")
    with pytest.raises(RefreshError) as caught:
        read(sheets, spreadsheet_id)
    assert "invalid_grant" in str(caught.value)
    assert "Token has been expired or revoked." in str(caught.value)

    emulator_admin.add_account("alice", "refresh-alice")
    assert read(sheets, spreadsheet_id)["range"] == "Sheet1!A1"
    stats = emulator_admin.stats()
    assert stats["token"] == {"refreshes": 2, "failures": 1}


def test_an_unknown_refresh_token_is_invalid_grant(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("stranger", register=False)

    with pytest.raises(RefreshError, match="invalid_grant"):
        sheets.create(body={}).execute()


def test_no_bearer_token_is_401(anonymous_sheets: Any, emulator_admin: EmulatorAdmin) -> None:
    emulator_admin.add_account("alice", "refresh-alice")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("alice")

    with pytest.raises(HttpError) as caught:
        anonymous_sheets.get(spreadsheetId=spreadsheet_id).execute()

    assert caught.value.resp.status == 401
    error = json.loads(caught.value.content)["error"]
    assert error["status"] == "UNAUTHENTICATED"
    assert error["message"].startswith(
        "Request had invalid authentication credentials. Expected OAuth 2 access token"
    )
    assert emulator_admin.stats()["requests"]["unauthenticated"] == 1


def test_spreadsheets_create_belongs_to_the_caller(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("alice")

    created = sheets.create(
        body={"properties": {"title": "Answers"}, "sheets": [{"properties": {"title": "Form"}}]}
    ).execute()

    assert created["properties"]["title"] == "Answers"
    assert created["sheets"][0]["properties"]["title"] == "Form"
    assert created["sheets"][0]["properties"]["sheetId"] == 0
    assert emulator_admin.spreadsheet(created["spreadsheetId"])["owner"] == "alice"
