"""Quotas as Google enforces them, and the stats that show them, through the real clients."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin


def write(sheets: Any, spreadsheet_id: str, text: str = "x") -> Any:
    return (
        sheets.values()
        .append(
            spreadsheetId=spreadsheet_id,
            range="Sheet1",
            valueInputOption="RAW",
            body={"values": [[text]]},
        )
        .execute()
    )


def read(sheets: Any, spreadsheet_id: str) -> Any:
    return sheets.values().get(spreadsheetId=spreadsheet_id, range="Sheet1!A1").execute()


#: The windows a test of a window tries, shortest first: a busy machine may take longer
#: than the shortest to send the requests that must fall in one window, and then the next
#: is tried (the test checks that they did, against the clock, rather than assume it).
WINDOWS_S = (0.5, 2.0, 8.0)


def rejected(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(HttpError) as caught:
        call(*args)
    assert caught.value.resp.status == 429
    body: dict[str, Any] = json.loads(caught.value.content)
    return body


def test_the_61st_write_in_a_minute_gets_googles_429(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    alice, bob = connect("alice"), connect("bob")
    alice_sheet, _ = emulator_admin.create_spreadsheet("alice")
    bob_sheet, _ = emulator_admin.create_spreadsheet("bob")
    for number in range(60):
        write(alice, alice_sheet, f"row {number}")

    body = rejected(write, alice, alice_sheet)

    error = body["error"]
    assert error["code"] == 429
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert error["message"] == (
        "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per "
        "minute per user' of service 'sheets.googleapis.com' for consumer "
        "'project_number:123456789012'."
    )
    info, help_ = error["details"]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["reason"] == "RATE_LIMIT_EXCEEDED"
    assert info["domain"] == "googleapis.com"
    assert info["metadata"]["quota_metric"] == "sheets.googleapis.com/write_requests"
    assert info["metadata"]["quota_limit"] == "WriteRequestsPerMinutePerUser"
    assert info["metadata"]["quota_limit_value"] == "60"
    assert info["metadata"]["service"] == "sheets.googleapis.com"
    assert help_["@type"] == "type.googleapis.com/google.rpc.Help"
    # Reads are counted apart from writes, and another account has its own quota.
    assert "values" in read(alice, alice_sheet)
    assert write(bob, bob_sheet)["updates"]["updatedRows"] == 1
    assert len(emulator_admin.sheet_values(alice_sheet, 0)) == 60


def test_the_project_limit_spans_accounts(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    emulator_admin.set_quotas(write_per_account=100, write_per_project=5)
    alice, bob = connect("alice"), connect("bob")
    alice_sheet, _ = emulator_admin.create_spreadsheet("alice")
    bob_sheet, _ = emulator_admin.create_spreadsheet("bob")
    for _ in range(3):
        write(alice, alice_sheet)
    for _ in range(2):
        write(bob, bob_sheet)

    body = rejected(write, bob, bob_sheet)

    assert body["error"]["message"].startswith(
        "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per minute' "
    )
    assert body["error"]["details"][0]["metadata"]["quota_limit"] == (
        "WriteRequestsPerMinutePerProject"
    )
    assert body["error"]["details"][0]["metadata"]["quota_limit_value"] == "5"


def refusal(call: Any, *args: Any) -> HttpError | None:
    """The HttpError ``call`` raised, or None when it was served."""
    try:
        call(*args)
    except HttpError as error:
        return error
    return None


def quota_body(error: HttpError | None) -> dict[str, Any]:
    assert error is not None, "served, where the quota should have refused it"
    assert error.resp.status == 429
    body: dict[str, Any] = json.loads(error.content)
    return body


def test_read_quota_and_sliding_window(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    for window_s in WINDOWS_S:
        emulator_admin.set_quotas(read_per_account=3, window_s=window_s)
        account = f"alice-{window_s:g}"
        alice = connect(account)
        spreadsheet_id, _ = emulator_admin.create_spreadsheet(account)
        started = time.monotonic()
        for _ in range(3):
            read(alice, spreadsheet_id)
        fourth = refusal(read, alice, spreadsheet_id)
        get = refusal(alice.get(spreadsheetId=spreadsheet_id).execute)  # a read too
        if time.monotonic() - started < window_s:
            break  # all five within one window: what they got is the quota's answer
    else:
        pytest.fail(f"no window of {WINDOWS_S} s held 5 reads on this machine")
    time.sleep(window_s * 1.1)

    body = quota_body(fourth)
    quota_body(get)
    assert body["error"]["details"][0]["metadata"]["quota_limit"] == "ReadRequestsPerMinutePerUser"
    assert read(alice, spreadsheet_id)["range"] == "Sheet1!A1"


def test_stats_count_requests_429s_and_the_busiest_window(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    for window_s in WINDOWS_S:
        emulator_admin.set_quotas(write_per_account=4, window_s=window_s)
        # New accounts each try, so each refreshes its token in the stats counted.
        alice_id, bob_id = f"alice-{window_s:g}", f"bob-{window_s:g}"
        alice, bob = connect(alice_id), connect(bob_id)
        alice_sheet, _ = emulator_admin.create_spreadsheet(alice_id)
        bob_sheet, _ = emulator_admin.create_spreadsheet(bob_id)
        emulator_admin.reset_stats()
        started = time.monotonic()
        for _ in range(4):
            write(alice, alice_sheet)
        fifth = refusal(write, alice, alice_sheet)
        sixth = refusal(write, alice, alice_sheet)  # refused requests do not use up the window
        if time.monotonic() - started < window_s:
            break  # all six within one window
        time.sleep(window_s * 1.125)  # the next try starts with an empty window
    else:
        pytest.fail(f"no window of {WINDOWS_S} s held 6 writes on this machine")
    quota_body(fifth)
    quota_body(sixth)
    time.sleep(window_s * 1.125)
    for _ in range(3):
        write(alice, alice_sheet)
    write(bob, bob_sheet)
    read(bob, bob_sheet)

    stats = emulator_admin.stats()

    assert stats["requests"]["by_kind"] == {"values.append": 10, "values.get": 1}
    assert stats["requests"]["writes"] == 10
    assert stats["requests"]["reads"] == 1
    assert stats["served"] == {"reads": 1, "writes": 8}
    assert stats["rate_limited"]["total"] == 2
    assert stats["rate_limited"]["by_account"] == {alice_id: 2}
    assert stats["token"]["refreshes"] == 2
    assert stats["errors_by_status"] == {"429": 2}
    alice_stats = stats["by_account"][alice_id]
    assert alice_stats["requests"]["by_kind"] == {"values.append": 9}
    assert alice_stats["rate_limited"] == 2
    assert alice_stats["max_in_window"]["writes"] == 4
    assert stats["by_account"][bob_id]["max_in_window"] == {"reads": 1, "writes": 1, "all": 2}
    assert 4 <= stats["max_in_window"]["writes"] <= 5  # bob's write may share alice's window
    assert 5 <= stats["max_in_window"]["all"] <= 6
    with_times = emulator_admin.stats(times=True)
    times = with_times["served_times"]
    assert len(times) == 9 and times == sorted(times)
    by_kind = with_times["served_times_by_kind"]
    assert {kind: len(served) for kind, served in by_kind.items()} == {
        "values.append": 8,
        "values.get": 1,
    }
    assert sorted(by_kind["values.append"] + by_kind["values.get"]) == times
    assert stats["served_span_s"] == pytest.approx(times[-1] - times[0], abs=0.01)

    emulator_admin.reset_stats()
    assert emulator_admin.stats()["requests"]["total"] == 0
