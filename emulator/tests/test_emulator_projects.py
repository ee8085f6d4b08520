"""Several Google Cloud projects: each OAuth client's tokens count against the quotas of
its client's project, through the real clients and the admin API."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from googleapiclient.errors import HttpError

from sheets_emulator import EmulatorAdmin, EmulatorAdminError, EmulatorServer

DEFAULT_PROJECT = "123456789012"
PROJECT_A, PROJECT_B = "111111111111", "222222222222"
CLIENT_A = "client-a.apps.googleusercontent.com"
CLIENT_B = "client-b.apps.googleusercontent.com"
CLIENT_A2 = "client-a2.apps.googleusercontent.com"


def write(sheets: Any, spreadsheet_id: str) -> None:
    sheets.values().append(
        spreadsheetId=spreadsheet_id,
        range="Sheet1",
        valueInputOption="RAW",
        body={"values": [["x"]]},
    ).execute()


def rejected(sheets: Any, spreadsheet_id: str) -> dict[str, Any]:
    """The 429 body a write gets."""
    with pytest.raises(HttpError) as caught:
        write(sheets, spreadsheet_id)
    assert caught.value.resp.status == 429
    body: dict[str, Any] = json.loads(caught.value.content)
    return body


def consumer(body: dict[str, Any]) -> tuple[str, str, str]:
    """The project a 429 names, in its message and its metadata, and the limit it hit."""
    error = body["error"]
    metadata = error["details"][0]["metadata"]
    project = metadata["consumer"].removeprefix("projects/")
    assert error["message"].endswith(f"for consumer 'project_number:{project}'.")
    return project, metadata["quota_limit"], metadata["quota_limit_value"]


def test_two_clients_in_two_projects_each_get_the_whole_project_limit(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.set_quotas(write_per_account=100, write_per_project=2)
    emulator_admin.set_projects({CLIENT_A: PROJECT_A, CLIENT_B: PROJECT_B})
    alice, bob = connect("alice", client_id=CLIENT_A), connect("bob", client_id=CLIENT_B)
    carol = connect("carol")  # the default client: the default project
    sheets = {
        name: emulator_admin.create_spreadsheet(name)[0] for name in ("alice", "bob", "carol")
    }
    for _ in range(2):
        write(alice, sheets["alice"])
        write(bob, sheets["bob"])
        write(carol, sheets["carol"])

    alice_third = rejected(alice, sheets["alice"])
    bob_third = rejected(bob, sheets["bob"])
    carol_third = rejected(carol, sheets["carol"])

    assert consumer(alice_third) == (PROJECT_A, "WriteRequestsPerMinutePerProject", "2")
    assert consumer(bob_third) == (PROJECT_B, "WriteRequestsPerMinutePerProject", "2")
    assert consumer(carol_third) == (DEFAULT_PROJECT, "WriteRequestsPerMinutePerProject", "2")
    stats = emulator_admin.stats()
    assert stats["rate_limited"]["by_project"] == {
        PROJECT_A: 1,
        PROJECT_B: 1,
        DEFAULT_PROJECT: 1,
    }
    usage = stats["quota_usage"]["by_project"]
    assert list(usage) == [PROJECT_A, DEFAULT_PROJECT, PROJECT_B]
    assert usage[PROJECT_A] == {
        "project": {"read": 0, "write": 2},
        "by_account": {"alice": {"read": 0, "write": 2}},
    }
    assert usage[PROJECT_B]["by_account"] == {"bob": {"read": 0, "write": 2}}
    # The top-level keys stay the default project's.
    assert stats["quota_usage"]["project"] == {"read": 0, "write": 2}
    assert stats["quota_usage"]["by_account"] == {"carol": {"read": 0, "write": 2}}


def test_two_clients_in_the_same_project_share_its_limit(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.set_quotas(write_per_account=100, write_per_project=3)
    emulator_admin.set_projects({CLIENT_A: PROJECT_A, CLIENT_A2: PROJECT_A})
    alice, bob = connect("alice", client_id=CLIENT_A), connect("bob", client_id=CLIENT_A2)
    alice_sheet, _ = emulator_admin.create_spreadsheet("alice")
    bob_sheet, _ = emulator_admin.create_spreadsheet("bob")
    for _ in range(2):
        write(alice, alice_sheet)
    write(bob, bob_sheet)

    body = rejected(bob, bob_sheet)

    assert consumer(body) == (PROJECT_A, "WriteRequestsPerMinutePerProject", "3")
    usage = emulator_admin.stats()["quota_usage"]
    assert usage["by_project"][PROJECT_A]["project"] == {"read": 0, "write": 3}
    assert usage["project"] == {"read": 0, "write": 0}


def test_an_account_has_a_window_in_each_project(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.set_quotas(write_per_account=2)
    emulator_admin.set_projects({CLIENT_A: PROJECT_A, CLIENT_B: PROJECT_B})
    through_a, through_b = (
        connect("alice", client_id=CLIENT_A),
        connect("alice", client_id=CLIENT_B),
    )
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("alice")
    for _ in range(2):
        write(through_a, spreadsheet_id)

    body = rejected(through_a, spreadsheet_id)
    for _ in range(2):
        write(through_b, spreadsheet_id)  # the same person, another project: its own window
    again = rejected(through_b, spreadsheet_id)

    assert consumer(body) == (PROJECT_A, "WriteRequestsPerMinutePerUser", "2")
    assert consumer(again) == (PROJECT_B, "WriteRequestsPerMinutePerUser", "2")
    usage = emulator_admin.stats()["quota_usage"]["by_project"]
    assert usage[PROJECT_A]["by_account"] == {"alice": {"read": 0, "write": 2}}
    assert usage[PROJECT_B]["by_account"] == {"alice": {"read": 0, "write": 2}}
    assert len(emulator_admin.sheet_values(spreadsheet_id, 0)) == 4


def test_a_token_from_a_code_counts_against_its_clients_project(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.set_quotas(write_per_project=1)
    emulator_admin.set_projects({CLIENT_A: PROJECT_A})
    redirect_uri = "http://127.0.0.1:5000/callback"
    consented = requests.get(
        f"{emulator_server.url}/o/oauth2/v2/auth",
        params={
            "response_type": "code",
            "client_id": CLIENT_A,
            "redirect_uri": redirect_uri,
            "scope": "https://www.googleapis.com/auth/spreadsheets",
            "emulator_account": "dora",
            "emulator_decision": "allow",
        },
        allow_redirects=False,
        timeout=5,
    )
    [code] = parse_qs(urlsplit(consented.headers["Location"]).query)["code"]
    tokens = requests.post(
        emulator_server.token_uri,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "client_id": CLIENT_A,
            "client_secret": "secret",
            "redirect_uri": redirect_uri,
        },
        timeout=5,
    ).json()

    def create() -> requests.Response:
        return requests.post(
            f"{emulator_server.url}/v4/spreadsheets",
            json={},
            headers={"Authorization": f"Bearer {tokens['access_token']}"},
            timeout=5,
        )

    assert create().status_code == 200
    second = create()

    assert second.status_code == 429
    assert consumer(second.json()) == (PROJECT_A, "WriteRequestsPerMinutePerProject", "1")


def test_an_injected_429_names_the_tokens_project(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.set_projects({CLIENT_B: PROJECT_B})
    bob = connect("bob", client_id=CLIENT_B)
    spreadsheet_id, _ = emulator_admin.create_spreadsheet("bob")
    emulator_admin.add_fault("write", status=429)

    body = rejected(bob, spreadsheet_id)

    assert consumer(body) == (PROJECT_B, "WriteRequestsPerMinutePerUser", "60")


def test_by_default_every_client_is_in_one_project(
    connect: Any, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.set_quotas(write_per_account=100, write_per_project=3)
    alice, bob = connect("alice", client_id=CLIENT_A), connect("bob", client_id=CLIENT_B)
    alice_sheet, _ = emulator_admin.create_spreadsheet("alice")
    bob_sheet, _ = emulator_admin.create_spreadsheet("bob")
    for _ in range(2):
        write(alice, alice_sheet)
    write(bob, bob_sheet)

    body = rejected(alice, alice_sheet)

    assert emulator_admin.projects() == {}
    assert consumer(body) == (DEFAULT_PROJECT, "WriteRequestsPerMinutePerProject", "3")
    usage = emulator_admin.stats()["quota_usage"]
    assert usage["project"] == {"read": 0, "write": 3}
    assert usage["by_account"] == {
        "alice": {"read": 0, "write": 2},
        "bob": {"read": 0, "write": 1},
    }
    assert usage["by_project"] == {
        DEFAULT_PROJECT: {"project": usage["project"], "by_account": usage["by_account"]}
    }


def test_projects_can_be_set_read_moved_back_and_reset(emulator_admin: EmulatorAdmin) -> None:
    assert emulator_admin.projects() == {}

    assert emulator_admin.set_projects({CLIENT_B: PROJECT_B, CLIENT_A: PROJECT_A}) == {
        CLIENT_A: PROJECT_A,
        CLIENT_B: PROJECT_B,
    }
    assert emulator_admin.set_projects({CLIENT_A2: PROJECT_A, CLIENT_B: None}) == {
        CLIENT_A: PROJECT_A,
        CLIENT_A2: PROJECT_A,
    }
    assert emulator_admin.projects() == {CLIENT_A: PROJECT_A, CLIENT_A2: PROJECT_A}
    usage = emulator_admin.stats()["quota_usage"]["by_project"]
    assert usage[PROJECT_A] == {"project": {"read": 0, "write": 0}, "by_account": {}}
    assert PROJECT_B not in usage

    emulator_admin.reset()

    assert emulator_admin.projects() == {}


@pytest.mark.parametrize(
    ("projects", "message"),
    [
        ({CLIENT_A: "12ab"}, f"project number of client '{CLIENT_A}' must be a string of digits"),
        ({CLIENT_A: 111111111111}, "must be a string of digits (or null for the default project)"),
        ({CLIENT_A: ""}, "got ''"),
        ({CLIENT_A: "١٢٣"}, "must be a string of digits"),  # Arabic-Indic digits
        ({CLIENT_A: " 123"}, "must be a string of digits"),
        ({"": PROJECT_A}, "an OAuth client id must be a non-empty string, got ''"),
    ],
)
def test_bad_projects_are_refused_whole(
    emulator_admin: EmulatorAdmin, projects: dict[str, Any], message: str
) -> None:
    emulator_admin.set_projects({CLIENT_B: PROJECT_B})

    with pytest.raises(EmulatorAdminError) as caught:
        emulator_admin.set_projects({CLIENT_A2: PROJECT_A, **projects})

    assert caught.value.status == 400
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert emulator_admin.projects() == {CLIENT_B: PROJECT_B}


def test_the_projects_route_takes_a_json_object_only(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    url = f"{emulator_server.url}/_emulator/projects"

    listed = requests.put(url, data=json.dumps([PROJECT_A]), timeout=5)
    put = requests.put(url, json={CLIENT_A: PROJECT_A}, timeout=5)

    assert listed.status_code == 400
    assert listed.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert put.json() == {CLIENT_A: PROJECT_A}
    assert requests.get(url, timeout=5).json() == {CLIENT_A: PROJECT_A}
