"""Google's authorization-code flow against the emulator, over real HTTP: the
authorization endpoint (its consent page, or a person's answer), the token endpoint's
``authorization_code`` grant and its errors, refresh tokens as Google gives them (first
offline consent, ``prompt=consent``), the ID token, PKCE, and google-auth-oauthlib's
``Flow`` running the whole flow unchanged but for its URLs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from google.auth import jwt
from google.auth.transport.requests import Request
from google.oauth2.credentials import Credentials

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheets_emulator.api_errors import OAuthError
from sheets_emulator.consent import AuthorizationRequest, ConsentBook

CLIENT_ID = "1234-emulator.apps.googleusercontent.com"
CLIENT_SECRET = "client-secret"
REDIRECT_URI = "http://127.0.0.1:5000/oauth/callback"
SHEETS = "https://www.googleapis.com/auth/spreadsheets"
SCOPES = f"openid {SHEETS}"


def auth_url(server: EmulatorServer) -> str:
    return f"{server.url}/o/oauth2/v2/auth"


def authorization(**overrides: str) -> dict[str, str]:
    """The parameters an app sends to Google's authorization endpoint."""
    params = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT_URI,
        "scope": SCOPES,
        "access_type": "offline",
        "prompt": "consent",
        "state": "state-123",
    }
    params.update(overrides)
    return {name: value for name, value in params.items() if value != ""}


def consent(
    server: EmulatorServer,
    account: str = "alice",
    decision: str = "allow",
    scopes: list[str] | None = None,
    **overrides: str,
) -> dict[str, list[str]]:
    """A person answers the consent page; returns the query the app's callback gets."""
    params: dict[str, Any] = {
        **authorization(**overrides),
        "emulator_account": account,
        "emulator_decision": decision,
    }
    if scopes is not None:
        params["emulator_scope"] = scopes
    response = requests.get(auth_url(server), params=params, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    location = urlsplit(response.headers["Location"])
    redirect = overrides.get("redirect_uri", REDIRECT_URI)
    assert f"{location.scheme}://{location.netloc}{location.path}" == redirect.split("?")[0]
    return parse_qs(location.query)


def exchange(server: EmulatorServer, issued: str, **overrides: str) -> requests.Response:
    """The app's POST to the token endpoint, for the code ``issued``."""
    data = {
        "grant_type": "authorization_code",
        "code": issued,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uri": REDIRECT_URI,
    }
    data.update(overrides)
    return requests.post(server.token_uri, data=data, timeout=5)


def tokens_for(server: EmulatorServer, account: str = "alice", **overrides: str) -> dict[str, Any]:
    [code] = consent(server, account, **overrides)["code"]
    response = exchange(server, code)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def refreshed(server: EmulatorServer, refresh_token: str) -> Credentials:
    credentials = Credentials(
        token=None,
        refresh_token=refresh_token,
        token_uri=server.token_uri,
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
    )
    credentials.refresh(Request())
    return credentials


def create_spreadsheet(server: EmulatorServer, access_token: str) -> str:
    response = requests.post(
        f"{server.url}/v4/spreadsheets",
        json={"properties": {"title": "Answers"}},
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=5,
    )
    assert response.status_code == 200, response.text
    spreadsheet_id: str = response.json()["spreadsheetId"]
    return spreadsheet_id


# -- the authorization endpoint ----------------------------------------------------------


def test_the_consent_page_asks_for_the_account_and_the_scopes(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    emulator_admin.add_account("known-account", "refresh-known")

    response = requests.get(
        auth_url(emulator_server),
        params=authorization(state="<script>x</script>", login_hint="bob"),
        timeout=5,
    )

    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/html")
    page = response.text
    assert CLIENT_ID in page
    assert f"value='{SHEETS}' checked" in page  # a box the person may untick
    assert "name='emulator_account'" in page
    assert "value='bob'" in page  # login_hint fills it in
    assert "<option value='known-account'>" in page
    assert "value='allow'>Allow</button>" in page
    assert "<script>" not in page  # what the app sent is escaped
    assert "&lt;script&gt;" in page


def test_allow_sends_the_browser_back_with_a_code_and_the_state(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    query = consent(emulator_server, redirect_uri=f"{REDIRECT_URI}?tenant=7", state="a b&c=d")

    assert query["state"] == ["a b&c=d"]
    assert query["tenant"] == ["7"]  # the redirect URI's own query is kept
    [code] = query["code"]
    assert code.startswith("4/")
    assert query["scope"] == [SCOPES]


def test_deny_sends_access_denied_and_the_state(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    query = consent(emulator_server, decision="deny")

    assert query == {"state": ["state-123"], "error": ["access_denied"]}


@pytest.mark.parametrize(
    ("overrides", "error", "description"),
    [
        ({"client_id": ""}, "invalid_request", "Missing required parameter: client_id"),
        ({"redirect_uri": ""}, "invalid_request", "Missing required parameter: redirect_uri"),
        ({"redirect_uri": "/callback"}, "invalid_request", "Invalid parameter value"),
        ({"response_type": ""}, "invalid_request", "Required parameter is missing"),
        ({"response_type": "token"}, "unsupported_response_type", "response_type=code"),
        ({"scope": ""}, "invalid_request", "Missing required parameter: scope"),
        ({"scope": "openid spreadsheets"}, "invalid_scope", "['spreadsheets']"),
        ({"access_type": "forever"}, "invalid_request", "Invalid access_type: forever"),
        ({"prompt": "none consent"}, "invalid_request", "Invalid prompt"),
    ],
)
def test_a_bad_request_gets_googles_error_page_and_no_redirect(
    emulator_server: EmulatorServer,
    emulator_admin: EmulatorAdmin,
    overrides: dict[str, str],
    error: str,
    description: str,
) -> None:
    params = {**authorization(**overrides), "emulator_account": "a", "emulator_decision": "allow"}

    response = requests.get(
        auth_url(emulator_server), params=params, allow_redirects=False, timeout=5
    )

    assert response.status_code == 400
    assert "Location" not in response.headers
    assert f"Error 400: <code>{error}</code>" in response.text
    assert description.replace("'", "&#x27;") in response.text


def test_an_account_id_with_spaces_is_refused(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    params = {**authorization(), "emulator_account": "two words", "emulator_decision": "allow"}

    response = requests.get(auth_url(emulator_server), params=params, timeout=5)

    assert response.status_code == 400
    assert "emulator_account must be" in response.text


# -- the authorization_code grant ---------------------------------------------------------


def test_a_code_buys_tokens_that_work_and_an_id_token_that_names_the_account(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    before = int(time.time())

    tokens = tokens_for(emulator_server, "alice", nonce="n-0S6")

    assert set(tokens) == {
        "access_token",
        "expires_in",
        "refresh_token",
        "scope",
        "token_type",
        "id_token",
    }
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3599
    assert tokens["scope"] == SCOPES
    assert tokens["refresh_token"].startswith("1//")
    claims = jwt.decode(tokens["id_token"], verify=False)
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["aud"] == claims["azp"] == CLIENT_ID
    assert claims["sub"] == "alice"
    assert claims["nonce"] == "n-0S6"
    assert before <= claims["iat"] <= int(time.time())
    assert claims["exp"] == claims["iat"] + 3600
    # HS256 over the client secret: the emulator has no key pair of Google's.
    signing_input, _, signature = tokens["id_token"].rpartition(".")
    expected = hmac.new(CLIENT_SECRET.encode(), signing_input.encode(), hashlib.sha256)
    assert base64.urlsafe_b64encode(expected.digest()).rstrip(b"=").decode() == signature
    # The access token is the account's, and so is what it creates.
    spreadsheet_id = create_spreadsheet(emulator_server, tokens["access_token"])
    assert emulator_admin.spreadsheet(spreadsheet_id)["owner"] == "alice"
    # The refresh token refreshes through google-auth, for the same account.
    credentials = refreshed(emulator_server, tokens["refresh_token"])
    assert credentials.valid
    create_spreadsheet(emulator_server, credentials.token)
    assert emulator_admin.stats()["token"] == {"refreshes": 1, "failures": 0}


def test_a_code_is_spent_once(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    [code] = consent(emulator_server)["code"]
    assert exchange(emulator_server, code).status_code == 200

    again = exchange(emulator_server, code)

    assert again.status_code == 400
    assert again.json() == {"error": "invalid_grant", "error_description": "Bad Request"}


@pytest.mark.parametrize(
    ("overrides", "status", "body"),
    [
        (
            {"code": "4/not-a-code"},
            400,
            {"error": "invalid_grant", "error_description": "Malformed auth code."},
        ),
        (
            {"redirect_uri": "http://127.0.0.1:5000/elsewhere"},
            400,
            {"error": "redirect_uri_mismatch", "error_description": "Bad Request"},
        ),
        (
            {"client_id": "another-client"},
            400,
            {"error": "invalid_grant", "error_description": "Bad Request"},
        ),
        (
            {"client_id": ""},
            401,
            {"error": "invalid_client", "error_description": "The OAuth client was not found."},
        ),
        (
            {"code": ""},
            400,
            {"error": "invalid_request", "error_description": "Missing required parameter: code"},
        ),
        (
            {"redirect_uri": ""},
            400,
            {
                "error": "invalid_request",
                "error_description": "Missing required parameter: redirect_uri",
            },
        ),
    ],
)
def test_a_bad_exchange_gets_googles_error_and_leaves_the_code_usable(
    emulator_server: EmulatorServer,
    emulator_admin: EmulatorAdmin,
    overrides: dict[str, str],
    status: int,
    body: dict[str, str],
) -> None:
    [code] = consent(emulator_server)["code"]

    refused = exchange(emulator_server, code, **overrides)

    assert (refused.status_code, refused.json()) == (status, body)
    assert exchange(emulator_server, code).status_code == 200


def test_the_client_may_authenticate_with_http_basic(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    [code] = consent(emulator_server)["code"]

    response = requests.post(
        emulator_server.token_uri,
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI},
        auth=(CLIENT_ID, CLIENT_SECRET),
        timeout=5,
    )

    assert response.status_code == 200, response.text
    assert jwt.decode(response.json()["id_token"], verify=False)["aud"] == CLIENT_ID


def test_a_reset_forgets_the_codes(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    [code] = consent(emulator_server)["code"]
    emulator_admin.reset()

    assert exchange(emulator_server, code).json()["error"] == "invalid_grant"


def test_token_faults_apply_to_an_exchange(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    [code] = consent(emulator_server)["code"]
    emulator_admin.add_fault("token", 1, "error", status=503)

    assert exchange(emulator_server, code).status_code == 503
    assert exchange(emulator_server, code).status_code == 200


# -- refresh tokens as Google gives them ---------------------------------------------------


def test_a_refresh_token_comes_with_the_first_offline_consent_then_only_with_prompt_consent(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    first = tokens_for(emulator_server, "alice", prompt="")
    second = tokens_for(emulator_server, "alice", prompt="")
    forced = tokens_for(emulator_server, "alice", prompt="consent")
    online = tokens_for(emulator_server, "bob", access_type="", prompt="consent")

    assert "refresh_token" in first
    assert "refresh_token" not in second  # granted already: no new refresh token
    assert "refresh_token" not in online  # no offline access asked for
    assert forced["refresh_token"] != first["refresh_token"]
    for tokens in (second, online):  # an access token all the same
        create_spreadsheet(emulator_server, tokens["access_token"])
    # Both refresh tokens of alice stay valid (Google keeps up to 100 per client).
    assert refreshed(emulator_server, first["refresh_token"]).valid
    assert refreshed(emulator_server, forced["refresh_token"]).valid


def test_after_a_revocation_the_next_consent_is_a_first_one(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    first = tokens_for(emulator_server, "alice", prompt="")
    emulator_admin.revoke("alice")
    with pytest.raises(Exception, match="invalid_grant"):
        refreshed(emulator_server, first["refresh_token"])

    again = tokens_for(emulator_server, "alice", prompt="")

    assert refreshed(emulator_server, again["refresh_token"]).valid
    create_spreadsheet(emulator_server, again["access_token"])


def test_a_scope_the_person_unticked_is_not_granted(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    query = consent(emulator_server, scopes=[""])  # the page's form, every box unticked

    assert query["scope"] == ["openid"]
    [code] = query["code"]
    assert exchange(emulator_server, code).json()["scope"] == "openid"


def test_without_openid_there_is_no_id_token(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    tokens = tokens_for(emulator_server, scope=SHEETS)

    assert "id_token" not in tokens
    assert tokens["scope"] == SHEETS


# -- PKCE ----------------------------------------------------------------------------------


def test_pkce_s256_needs_the_verifier(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    verifier = "v" * 50
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )
    [code] = consent(emulator_server, code_challenge=challenge, code_challenge_method="S256")[
        "code"
    ]

    missing = exchange(emulator_server, code)
    wrong = exchange(emulator_server, code, code_verifier="w" * 50)
    right = exchange(emulator_server, code, code_verifier=verifier)

    assert missing.json() == {
        "error": "invalid_grant",
        "error_description": "Missing code verifier.",
    }
    assert wrong.json() == {"error": "invalid_grant", "error_description": "Invalid code verifier."}
    assert right.status_code == 200, right.text


# -- a client library's whole flow ---------------------------------------------------------


def test_google_auth_oauthlibs_flow_runs_against_the_emulator(
    emulator_server: EmulatorServer,
    emulator_admin: EmulatorAdmin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google_auth_oauthlib.flow import Flow  # gspread's dependency, in the test extra

    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the emulator is plain http
    flow = Flow.from_client_config(
        {
            "web": {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "auth_uri": auth_url(emulator_server),
                "token_uri": emulator_server.token_uri,
            }
        },
        scopes=["openid", SHEETS],
        redirect_uri=REDIRECT_URI,
    )
    url, state = flow.authorization_url(access_type="offline", prompt="consent")

    response = requests.get(
        url,
        params={"emulator_account": "carol", "emulator_decision": "allow"},
        allow_redirects=False,
        timeout=5,
    )
    flow.fetch_token(authorization_response=response.headers["Location"])

    credentials = flow.credentials
    assert parse_qs(urlsplit(response.headers["Location"]).query)["state"] == [state]
    assert jwt.decode(credentials.id_token, verify=False)["sub"] == "carol"
    assert credentials.refresh_token
    spreadsheet_id = create_spreadsheet(emulator_server, credentials.token)
    assert emulator_admin.spreadsheet(spreadsheet_id)["owner"] == "carol"


# -- the code book, on a clock of its own ----------------------------------------------------


def test_a_code_expires() -> None:
    book = ConsentBook()
    request = AuthorizationRequest.parse(authorization())
    code = book.consent(request, "alice", request.scopes, first_again=True, now=1000.0)

    with pytest.raises(OAuthError) as caught:
        book.redeem(
            code,
            client_id=CLIENT_ID,
            redirect_uri=REDIRECT_URI,
            code_verifier=None,
            now=1000.0 + 600,
        )

    assert caught.value.body == {"error": "invalid_grant", "error_description": "Bad Request"}
