"""The Sheets client against the emulator: one method per endpoint, errors in three classes."""

from __future__ import annotations

import pickle
import uuid

import pytest

from sheetsync.errors import (
    CredentialError,
    PermanentError,
    SheetsError,
    SheetSyncError,
    TransientError,
)
from sheetsync.settings import Settings
from sheetsync.sheets.client import SheetFacts, SheetsClient, quote_title, row_span


@pytest.fixture
def client_for(emulator, admin):
    settings = Settings.load(
        google_api_endpoint=emulator.url,
        google_token_uri=emulator.token_uri,
        google_timeout_s=1,
        google_client_id="client",
        google_client_secret="secret",
        development=True,
    )

    def make(account: str = "acct") -> SheetsClient:
        # A refresh token unique to this test: clients cache access tokens per process.
        token = f"refresh-{account}-{uuid.uuid4().hex}"
        admin.add_account(account, token)
        return SheetsClient(token, settings=settings)

    return make


def test_endpoints_round_trip(client_for, admin):
    client = client_for()
    spreadsheet_id, gids = admin.create_spreadsheet("acct", "Form", ["It's here"])
    gid = gids["It's here"]
    assert client.sheet_titles(spreadsheet_id)[gid] == "It's here"
    sheet = quote_title("It's here")
    assert client.read_values(spreadsheet_id, f"{sheet}!1:1") == []
    first = client.append_rows(spreadsheet_id, f"{sheet}!A1", [["h1", "h2"], ["=1+1", "0012"]])
    assert (first.first_row, first.last_row) == (1, 2)
    second = client.append_rows(spreadsheet_id, f"{sheet}!A1", [["a", "b"]])
    assert (second.first_row, second.last_row) == (3, 3)
    assert client.read_values(spreadsheet_id, f"{sheet}!A:B")[1] == ["=1+1", "0012"]
    assert row_span("'S'!A11:F20") == (11, 20)


def test_a_first_write_reads_once_and_writes_its_header_once(client_for, admin):
    client = client_for()
    spreadsheet_id, gids = admin.create_spreadsheet(
        "acct", "Form", ["Other", "It's here"], time_zone="Asia/Tokyo"
    )
    gid = gids["It's here"]
    admin.update_values(spreadsheet_id, "'It''s here'!A1:C1", [["Mine", "", "x"]])
    admin.update_values(spreadsheet_id, "Other!A1", [["not this tab"]])
    admin.reset_stats()

    facts = client.sheet_facts(spreadsheet_id, gid)
    client.write_header(
        spreadsheet_id,
        gid,
        {1: "007", 3: "When", 4: "Count"},
        {3: ("DATE", "yyyy-mm-dd")},
        column_count=facts.column_count,
    )

    assert facts == SheetFacts("It's here", "Asia/Tokyo", ["Mine", "", "x"], column_count=26)
    requests = admin.stats()["requests"]
    assert requests["by_kind"] == {"spreadsheets.getByDataFilter": 1, "spreadsheets.batchUpdate": 1}
    assert (requests["reads"], requests["writes"]) == (1, 1)
    client.append_rows(spreadsheet_id, f"{quote_title(facts.title)}!A:A", [["a", "", "", 45000]])
    assert admin.sheet_values(spreadsheet_id, gid) == [
        ["Mine", "007", "x", "When", "Count"],  # RAW text: 007 stays 007
        ["a", "", "", "2023-03-15"],  # the serial number shown in the column's format
    ]
    with pytest.raises(PermanentError) as missing:  # the emulator's 400, as Google's
        client.sheet_facts(spreadsheet_id, 99)
    assert missing.value.status == 400


def test_a_header_wider_than_the_tab_widens_it_in_the_same_request(client_for, admin):
    client = client_for()
    spreadsheet_id, _ = admin.create_spreadsheet("acct", "Form")
    admin.batch_update(
        spreadsheet_id,
        [
            {
                "updateSheetProperties": {
                    "properties": {"sheetId": 0, "gridProperties": {"columnCount": 2}},
                    "fields": "gridProperties.columnCount",
                }
            }
        ],
    )
    facts = client.sheet_facts(spreadsheet_id, 0)
    assert facts.column_count == 2
    admin.reset_stats()

    client.write_header(spreadsheet_id, 0, {0: "A", 1: "B", 2: "C", 3: "D"}, {}, column_count=2)

    assert admin.stats()["requests"]["by_kind"] == {"spreadsheets.batchUpdate": 1}
    assert admin.sheet_values(spreadsheet_id, 0) == [["A", "B", "C", "D"]]
    assert client.sheet_grid(spreadsheet_id) == {0: ("Sheet1", 4)}


def test_a_dropped_append_surfaces_once_and_is_not_resent(client_for, admin):
    client = client_for()
    spreadsheet_id, _ = admin.create_spreadsheet("acct", "Form")
    admin.add_fault("values.append", 1, "drop")
    with pytest.raises(TransientError) as failure:
        client.append_rows(spreadsheet_id, "'Sheet1'!A1", [["x"]])
    assert failure.value.ambiguous
    assert admin.sheet_values(spreadsheet_id, 0) == [["x"]]  # committed exactly once
    assert admin.stats()["requests"]["by_kind"]["values.append"] == 1


@pytest.mark.parametrize(
    ("fault", "expected", "ambiguous"),
    [
        ({"status": 429}, TransientError, False),
        ({"status": 503}, TransientError, True),
        ({"action": "hang", "seconds": 2}, TransientError, True),
        ({"status": 404}, PermanentError, None),
        ({"status": 403}, PermanentError, None),
    ],
    ids=["429", "503", "timeout", "404", "403"],
)
def test_errors_fall_into_three_classes_and_pickle(client_for, admin, fault, expected, ambiguous):
    client = client_for()
    spreadsheet_id, _ = admin.create_spreadsheet("acct", "Form")
    action = fault.pop("action", "error")
    admin.add_fault("values.append", 1, action, **fault)
    with pytest.raises(expected) as failure:
        client.append_rows(spreadsheet_id, "'Sheet1'!A1", [["x"]])
    error = failure.value
    assert isinstance(error, SheetsError) and isinstance(error, SheetSyncError)
    if ambiguous is not None:
        assert error.ambiguous is ambiguous
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert "\n" not in str(error)


def test_real_conditions_map_to_their_class(client_for, admin):
    client = client_for()
    spreadsheet_id, _ = admin.create_spreadsheet("acct", "Form")
    with pytest.raises(PermanentError, match=r"^Sheets API 400 INVALID_ARGUMENT: no such range"):
        client.read_values(spreadsheet_id, "'No such tab'!A1")
    other, _ = admin.create_spreadsheet(client_for("other") and "other", "Not yours")
    with pytest.raises(PermanentError, match=r"^Sheets API 403 PERMISSION_DENIED: "):
        client.read_values(other, "'Sheet1'!A1")
    admin.delete_spreadsheet(spreadsheet_id)
    with pytest.raises(PermanentError, match=r"^Sheets API 404 NOT_FOUND: "):
        client.sheet_titles(spreadsheet_id)
    admin.revoke("acct")
    with pytest.raises(CredentialError, match=r"^Google OAuth invalid_grant: ") as revoked:
        client.sheet_titles(other)
    assert pickle.loads(pickle.dumps(revoked.value)).status == 400


def test_a_worker_builds_the_sheets_resources_before_its_pool_forks():
    # worker_init runs in the worker's main process: the pool processes it forks find
    # the resources built, instead of each building them on its first flush.
    from celery.signals import worker_init

    from sheetsync.celery import application
    from sheetsync.sheets import client

    assert application._build_the_sheets_client in [
        receiver() for _, receiver in worker_init.receivers
    ]
    client._resources.cache_clear()
    application._build_the_sheets_client()
    built = client._resources.cache_info()
    assert built.currsize == 1
    settings = Settings.load(google_client_id="client", google_client_secret="secret")
    SheetsClient("refresh-token", settings=settings)
    assert client._resources.cache_info().hits == built.hits + 1
