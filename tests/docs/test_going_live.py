"""docs/integration/going-live.md and its example, examples/oauth_callback.py, run against
the emulator's OAuth endpoints as they would against Google's.

The example's Flask app runs in its test client; the browser's trip through the consent
screen is a real HTTP request to the emulator's authorization endpoint (with the person's
answer added, as its consent page would send it), and the example exchanges the code at
the emulator's token endpoint over real HTTP. What it stores is then used the way the
workers use it: sheetsync's Sheets client refreshes it, and an owner's parked answers
reach their sheet once they reconnect.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient
from support.markdown import code_blocks, page
from support.paths import ROOT
from support.waiting import wait_until
from werkzeug.test import TestResponse

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync import crypto, emit_answer_submitted
from sheetsync.deadletters.replay import dispatch_due
from sheetsync.errors import CryptoError
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    User,
    utcnow,
)
from sheetsync.services import Services
from sheetsync.settings import Settings
from sheetsync.sheets.client import SheetsClient

GUIDE = "integration/going-live.md"
EXAMPLE = ROOT / "examples" / "oauth_callback.py"
REDIRECT_URI = "http://127.0.0.1:5000/oauth/callback"
SHEETS = "https://www.googleapis.com/auth/spreadsheets"
#: The variables the example reads besides sheetsync's own.
EXAMPLE_VARIABLES = ("GOOGLE_AUTH_URI", "OAUTH_REDIRECT_URI", "FLASK_SECRET_KEY")


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("oauth_callback", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example() -> ModuleType:
    return load_example()


@pytest.fixture
def app(
    example: ModuleType,
    pipeline_env: Callable[..., dict[str, str]],
    emulator: EmulatorServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Flask:
    """The example's app on the test's database, Redis and emulator (SHEETSYNC_* from
    pipeline_env: the emulator's token endpoint, a client id and secret)."""
    monkeypatch.setenv("GOOGLE_AUTH_URI", f"{emulator.url}/o/oauth2/v2/auth")
    monkeypatch.setenv("OAUTH_REDIRECT_URI", REDIRECT_URI)
    monkeypatch.setenv("FLASK_SECRET_KEY", "docs-test-secret")
    flask_app: Flask = example.create_app()
    return flask_app


def signed_in(app: Flask, user_id: str) -> FlaskClient:
    """A browser whose session your app's login has filled."""
    client = app.test_client()
    with client.session_transaction() as session:
        session["user_id"] = user_id
    return client


def add_user(pipeline: Services, user_id: str) -> None:
    with pipeline.sessions.begin() as session:
        session.add(User(id=user_id, email=f"{user_id}@example.com"))


def to_google(client: FlaskClient) -> str:
    """``/connect``: where it sends the browser."""
    started = client.get("/connect")
    assert started.status_code == 302, started.text
    # The state's session cookie must come back with Google's cross-site redirect.
    assert "SameSite=Lax" in started.headers["Set-Cookie"]
    return started.headers["Location"]


def consent(location: str, account: str, **answer: Any) -> dict[str, list[str]]:
    """The browser at the consent screen, and the person's answer: the query Google's
    redirect brings back to the callback."""
    params = {"emulator_account": account, "emulator_decision": "allow", **answer}
    response = requests.get(location, params=params, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    back = urlsplit(response.headers["Location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == REDIRECT_URI
    return parse_qs(back.query)


def callback(client: FlaskClient, query: dict[str, list[str]]) -> TestResponse:
    return client.get("/oauth/callback", query_string=query)


def connect(client: FlaskClient, account: str, **answer: Any) -> TestResponse:
    return callback(client, consent(to_google(client), account, **answer))


def credential_of(pipeline: Services, user_id: str) -> GoogleCredential | None:
    with pipeline.sessions() as session:
        return session.get(GoogleCredential, user_id)


def test_an_owner_connects_google_and_the_workers_can_write_with_it(
    app: Flask, pipeline: Services, admin: EmulatorAdmin, emulator: EmulatorServer
) -> None:
    add_user(pipeline, "owner_new")
    client = signed_in(app, "owner_new")

    location = to_google(client)
    sent = parse_qs(urlsplit(location).query)
    assert location.startswith(f"{emulator.url}/o/oauth2/v2/auth?")
    assert {name: values for name, values in sent.items() if name != "state"} == {
        "response_type": ["code"],
        "client_id": ["sheetsync-tests"],
        "redirect_uri": [REDIRECT_URI],
        "scope": [f"openid {SHEETS}"],
        "access_type": ["offline"],
        "prompt": ["consent"],
    }
    [state] = sent["state"]
    assert len(state) >= 32
    answered = callback(client, consent(location, "google-sub-0042"))

    assert answered.status_code == 200, answered.text
    assert "Google is connected" in answered.text
    credential = credential_of(pipeline, "owner_new")
    assert credential is not None
    assert credential.google_account_id == "google-sub-0042"  # the ID token's sub
    assert credential.status is CredentialStatus.VALID
    assert SHEETS in credential.scopes.split()
    refresh_token = crypto.decrypt_refresh_token(credential.refresh_token, user_id="owner_new")
    assert refresh_token.startswith("1//")
    assert refresh_token not in credential.refresh_token  # encrypted...
    with pytest.raises(CryptoError):  # ...and bound to its owner
        crypto.decrypt_refresh_token(credential.refresh_token, user_id="someone_else")
    # What a worker does with it: refresh at the token endpoint, then write as the owner.
    sheets = SheetsClient(refresh_token, settings=Settings.load())
    created = sheets.create_spreadsheet("Sign-ups", ["Answers"])
    assert admin.spreadsheet(created["spreadsheetId"])["owner"] == "google-sub-0042"


def test_an_owner_consents_to_the_client_the_app_chose_and_it_is_stored(
    example: ModuleType,
    pipeline_env: Callable[..., dict[str, str]],
    pipeline: Services,
    admin: EmulatorAdmin,
    emulator: EmulatorServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Several Google projects: an enterprise owner consents to its own OAuth client,
    whose name the credential keeps; the workers refresh it with that client."""
    clients = tmp_path / "google-clients.json"
    clients.write_text(json.dumps({"acme": {"client_id": "acme-id", "client_secret": "s"}}))
    pipeline_env(google_clients_file=clients)
    monkeypatch.setenv("OAUTH_CLIENT_BY_USER", json.dumps({"owner_acme": "acme"}))
    monkeypatch.setenv("GOOGLE_AUTH_URI", f"{emulator.url}/o/oauth2/v2/auth")
    monkeypatch.setenv("OAUTH_REDIRECT_URI", REDIRECT_URI)
    monkeypatch.setenv("FLASK_SECRET_KEY", "docs-test-secret")
    app = example.create_app()
    for user in ("owner_acme", "owner_plain"):
        add_user(pipeline, user)
    acme, plain = signed_in(app, "owner_acme"), signed_in(app, "owner_plain")

    location = to_google(acme)
    assert parse_qs(urlsplit(location).query)["client_id"] == ["acme-id"]
    assert callback(acme, consent(location, "google-acme")).status_code == 200
    assert connect(plain, "google-plain").status_code == 200
    stored = {user: credential_of(pipeline, user) for user in ("owner_acme", "owner_plain")}
    assert {user: c.google_client for user, c in stored.items() if c} == {
        "owner_acme": "acme",
        "owner_plain": None,
    }
    # The worker's refresh goes with the client the token was issued to: the emulator
    # counts its requests in that client's project.
    admin.set_projects({"acme-id": "333333333333"})
    credential = stored["owner_acme"]
    assert credential is not None
    token = crypto.decrypt_refresh_token(credential.refresh_token, user_id="owner_acme")
    sheets = SheetsClient(token, settings=Settings.load(), google_client="acme")
    sheets.create_spreadsheet("Enterprise", ["Answers"])
    usage = admin.stats()["quota_usage"]["by_project"]
    assert usage["333333333333"]["project"]["write"] == 1


def test_a_state_that_is_not_this_sessions_is_refused(
    app: Flask, pipeline: Services, admin: EmulatorAdmin
) -> None:
    add_user(pipeline, "owner_a")
    client = signed_in(app, "owner_a")
    query = consent(to_google(client), "google-a")

    forged = callback(client, {**query, "state": ["forged"]})
    replayed = callback(client, query)  # the session's state went with the first try
    elsewhere = callback(signed_in(app, "owner_a"), query)  # another browser, no state
    to_google(client)
    not_ascii = callback(client, {**query, "state": ["état"]})

    assert [r.status_code for r in (forged, replayed, elsewhere, not_ascii)] == [400] * 4
    assert "connect Google again" in forged.text
    assert credential_of(pipeline, "owner_a") is None
    signed_out = app.test_client().get("/connect")
    assert signed_out.status_code == 401


def test_an_owner_who_says_no_or_unticks_sheets_is_not_connected(
    app: Flask, pipeline: Services, admin: EmulatorAdmin
) -> None:
    add_user(pipeline, "owner_b")
    client = signed_in(app, "owner_b")

    denied = connect(client, "google-b", emulator_decision="deny")
    unticked = connect(client, "google-b", emulator_scope=[""])  # every box unticked

    assert denied.status_code == 400 and "not connected" in denied.text
    assert unticked.status_code == 400 and "Google Sheets box" in unticked.text
    assert credential_of(pipeline, "owner_b") is None


def test_a_token_endpoint_that_refuses_is_a_502_and_stores_nothing(
    app: Flask, pipeline: Services, admin: EmulatorAdmin
) -> None:
    add_user(pipeline, "owner_c")
    client = signed_in(app, "owner_c")
    query = consent(to_google(client), "google-c")
    admin.add_fault("token", 1, "error", status=503)

    answered = callback(client, query)

    assert answered.status_code == 502
    assert credential_of(pipeline, "owner_c") is None


def test_an_owner_whose_credential_was_refused_reconnects_and_their_answers_land(
    app: Flask, world: Any, worker: Any, admin: EmulatorAdmin
) -> None:
    pipeline = world.pipeline
    form = world.form("owner_r")
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    admin.revoke("google-owner_r")  # the owner removed the app's access at Google
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: world.dead_letters() and world.ids_of(world.dead_letters()[0]) == ids)
    [parked] = world.dead_letters()
    assert (parked.reason, parked.status) == (DeadLetterReason.CREDENTIAL, DeadLetterStatus.PENDING)
    assert parked.next_attempt_at - utcnow() > timedelta(days=6)
    old = credential_of(pipeline, "owner_r")
    assert old is not None and old.status is CredentialStatus.INVALID

    answered = connect(signed_in(app, "owner_r"), "google-owner_r")

    assert answered.status_code == 200, answered.text
    new = credential_of(pipeline, "owner_r")
    assert new is not None and new.status is CredentialStatus.VALID
    assert new.refresh_token != old.refresh_token
    [due] = world.dead_letters()
    assert due.next_attempt_at <= utcnow()  # credential_reconnected: due now
    dispatch_due(pipeline)  # beat's next pass
    wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(ids), timeout=30)


# -- the guide's own text ---------------------------------------------------------------


def test_the_guide_names_the_example_and_what_it_reads(example: ModuleType) -> None:
    text = page(GUIDE)

    assert "examples/oauth_callback.py" in text
    assert "tests/docs/test_going_live.py" in text
    assert f"`{example.SCOPES}`" in text  # the scopes the example asks for
    assert example.GOOGLE_AUTH_URI in text
    for parameter in ("access_type=offline", "prompt=consent", "state"):
        assert parameter in text
    for name in EXAMPLE_VARIABLES:
        assert name in text, name
    documented = set(re.findall(r"\bSHEETSYNC_[A-Z0-9_]+[A-Z0-9]", text))
    settings = {f"SHEETSYNC_{name.upper()}" for name in Settings.model_fields}
    assert documented - settings == set(), "the guide names settings that do not exist"


def test_the_guides_live_environment_leaves_the_emulators_settings_unset() -> None:
    [block] = [b for b in code_blocks(page(GUIDE), "sh") if b.title == "the live environment"]
    assigned = dict(re.findall(r"^(?:export )?([A-Z][A-Z0-9_]*)=(.*)$", block.text, re.MULTILINE))

    assert {"SHEETSYNC_GOOGLE_CLIENT_ID", "SHEETSYNC_GOOGLE_CLIENT_SECRET"} <= set(assigned)
    for left_unset in (
        "SHEETSYNC_GOOGLE_API_ENDPOINT",
        "SHEETSYNC_GOOGLE_TOKEN_URI",
        "SHEETSYNC_DEVELOPMENT",
        "GOOGLE_AUTH_URI",
    ):
        assert left_unset not in assigned, left_unset
    assert assigned["OAUTH_REDIRECT_URI"].startswith("https://")
