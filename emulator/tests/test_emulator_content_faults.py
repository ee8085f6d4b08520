"""Faults that look at what is written (refuse, garble) and Google's per-cell limit, as
google-api-python-client sees them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin, EmulatorAdminError, EmulatorServer

CELL_TOO_LONG = "Your input contains more than the maximum of 50000 characters in a single cell."


def append_request(sheets: Any, spreadsheet_id: str, rows: list[list[Any]]) -> Any:
    return sheets.values().append(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A1",
        valueInputOption="RAW",
        insertDataOption="INSERT_ROWS",
        body={"values": rows},
    )


def http_error(request: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HttpError) as caught:
        request.execute()
    return caught.value.resp.status, json.loads(caught.value.content)


def column_a(admin: EmulatorAdmin, spreadsheet_id: str) -> list[str]:
    return [row[0] for row in admin.sheet_values(spreadsheet_id, 0)]


def test_refuse_fails_only_the_matching_append_with_googles_400(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.refuse("poison", count=1)
    poisoned = [["a-1", "fine"], ["a-2", "fine"], ["a-3", "x", "y", "z", "w", "the poison pill"]]

    append_request(sheets, spreadsheet_id, [["a-0", "fine"]]).execute()  # does not match
    status, body = http_error(append_request(sheets, spreadsheet_id, poisoned))
    append_request(sheets, spreadsheet_id, poisoned).execute()  # count used up

    assert status == 400
    assert body == {
        "error": {
            "code": 400,
            "message": 'Invalid values[2][5]: string_value: "the poison pill"\n',
            "status": "INVALID_ARGUMENT",
        }
    }
    assert column_a(emulator_admin, spreadsheet_id) == ["a-0", "a-1", "a-2", "a-3"]
    stats = emulator_admin.stats()
    assert stats["faults_fired"] == {"refuse": 1}
    assert stats["errors_by_status"] == {"400": 1}
    assert stats["served"]["writes"] == 3  # a refused request passed the quota
    assert emulator_admin.faults() == []


def test_refuse_counts_only_matching_requests(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.add_fault("values.append", 2, "refuse", match="bad")

    for number in range(3):
        append_request(sheets, spreadsheet_id, [[f"good-{number}"]]).execute()
    assert emulator_admin.faults()[0]["count"] == 2
    for _ in range(2):
        assert http_error(append_request(sheets, spreadsheet_id, [["bad"]]))[0] == 400
    append_request(sheets, spreadsheet_id, [["bad"]]).execute()

    assert column_a(emulator_admin, spreadsheet_id) == ["good-0", "good-1", "good-2", "bad"]


def test_refuse_applies_to_values_update_and_names_non_ascii_as_google_prints_it(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.refuse("응답", kind="values.update")
    update = sheets.values().update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!B2",
        valueInputOption="RAW",
        body={"values": [["ok", 'a "응답"']]},
    )

    append_request(sheets, spreadsheet_id, [["응답 in an append"]]).execute()  # other kind
    status, body = http_error(update)

    assert status == 400
    # Protobuf text format: C escapes, each UTF-8 byte of non-ASCII text in octal.
    assert body["error"]["message"] == (
        'Invalid values[0][1]: string_value: "a \\"\\354\\235\\221\\353\\213\\265\\""\n'
    )
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["응답 in an append"]]


def test_garble_commits_the_rows_and_answers_an_unparsable_range(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.garble()
    emulator_admin.add_fault("values.append", 1, "garble", updated_range="Sheet1!A:A")

    first = append_request(sheets, spreadsheet_id, [["a-1", "x"], ["a-2", "y"]]).execute()
    second = append_request(sheets, spreadsheet_id, [["a-3", "z"]]).execute()
    third = append_request(sheets, spreadsheet_id, [["a-4", "w"]]).execute()

    assert first == {
        "spreadsheetId": spreadsheet_id,
        "updates": {
            "spreadsheetId": spreadsheet_id,
            "updatedRange": "'Sheet1'",
            "updatedRows": 2,
            "updatedColumns": 2,
            "updatedCells": 4,
        },
    }
    assert second["updates"]["updatedRange"] == "Sheet1!A:A"
    assert second["tableRange"] == "Sheet1!A1:B2"
    assert third["updates"]["updatedRange"] == "Sheet1!A4:B4"
    assert column_a(emulator_admin, spreadsheet_id) == ["a-1", "a-2", "a-3", "a-4"]
    assert emulator_admin.stats()["faults_fired"] == {"garble": 2}


def test_garble_with_match_and_values_update(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.garble(kind="values.update", match="target", updated_range="")

    def update(text: str) -> Any:
        return (
            sheets.values()
            .update(
                spreadsheetId=spreadsheet_id,
                range="Sheet1!A1",
                valueInputOption="RAW",
                body={"values": [[text]]},
            )
            .execute()
        )

    assert update("other")["updatedRange"] == "Sheet1!A1"
    assert update("the target")["updatedRange"] == ""
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["the target"]]


def test_match_limits_the_other_actions_too(connect: Any, emulator_admin: EmulatorAdmin) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.add_fault("values.append", 1, "error", status=503, match="a-2")

    append_request(sheets, spreadsheet_id, [["a-1"]]).execute()
    status, _ = http_error(append_request(sheets, spreadsheet_id, [["a-2"]]))

    assert status == 503
    assert column_a(emulator_admin, spreadsheet_id) == ["a-1"]


def test_a_refuse_fault_is_not_used_up_by_a_429(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    emulator_admin.set_quotas(write_per_account=1)
    emulator_admin.refuse("bad")

    append_request(sheets, spreadsheet_id, [["fine"]]).execute()
    status, _ = http_error(append_request(sheets, spreadsheet_id, [["bad"]]))

    assert status == 429
    assert emulator_admin.faults()[0]["action"] == "refuse"


def test_the_cell_limit_counts_utf16_code_units(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    sheets = connect("owner")
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("owner")
    at_limit = "🎉" * 25_000  # 25,000 characters, 50,000 UTF-16 code units
    over_limit = "🎉" * 25_000 + "x"  # 25,001 characters, 50,001 code units

    append_request(sheets, spreadsheet_id, [["a-1", at_limit]]).execute()
    status, body = http_error(
        append_request(sheets, spreadsheet_id, [["a-2", "ok"], ["a-3", over_limit]])
    )
    update = sheets.values().update(
        spreadsheetId=spreadsheet_id,
        range="Sheet1!A5",
        valueInputOption="USER_ENTERED",
        body={"values": [["a-4", "한" * 50_000 + "!"]]},
    )
    update_status, update_body = http_error(update)

    assert (status, update_status) == (400, 400)
    expected = {"error": {"code": 400, "message": CELL_TOO_LONG, "status": "INVALID_ARGUMENT"}}
    assert body == update_body == expected
    assert column_a(emulator_admin, spreadsheet_id) == ["a-1"]  # nothing of either written


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "values.append", "action": "refuse"}, "needs match"),
        ({"kind": "values.get", "action": "refuse", "match": "x"}, "apply to kind"),
        ({"kind": "write", "action": "garble"}, "apply to kind"),
        ({"kind": "any", "match": "x"}, "apply to kind"),
        ({"kind": "values.append", "action": "refuse", "match": ""}, "non-empty"),
        ({"kind": "values.append", "action": "drop", "range": "A1"}, "garble fault only"),
        ({"kind": "values.append", "action": "garble", "range": 5}, "must be a string"),
    ],
)
def test_bad_content_fault_specs_are_refused(
    emulator_server: EmulatorServer,
    emulator_admin: EmulatorAdmin,
    spec: dict[str, Any],
    message: str,
) -> None:
    request = urllib.request.Request(
        f"{emulator_server.url}/_emulator/faults",
        data=json.dumps(spec).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)

    assert caught.value.code == 400
    assert message in json.loads(caught.value.read())["error"]["message"]
    assert emulator_admin.faults() == []


def test_the_admin_client_reports_a_refused_spec(emulator_admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.add_fault("values.get", 1, "refuse", match="x")
    assert caught.value.status == 400


def test_pending_faults_list_match_and_range(emulator_admin: EmulatorAdmin) -> None:
    emulator_admin.refuse("poison", 3)
    emulator_admin.garble(updated_range="Sheet1")

    assert [
        (fault["action"], fault["count"], fault["match"], fault["range"])
        for fault in emulator_admin.faults()
    ] == [("refuse", 3, "poison", None), ("garble", 1, None, "Sheet1")]
    emulator_admin.clear_faults()
    emulator_admin.garble()
    assert emulator_admin.faults()[0]["range"] == "'Sheet1'"
