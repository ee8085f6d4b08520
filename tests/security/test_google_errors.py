"""Google's error text never becomes a message sheetsync keeps (security item 4).

Google's 400s quote the request's values, which are decrypted personal info. Every shape
of failure a Sheets call can raise becomes an error whose message holds the HTTP status,
Google's status and reason codes and a fixed text of ours: the quoted value is not in
it, nor in its pickle, its traceback or any log record but the DEBUG records of
``GOOGLE_TEXT_LOGGER``.
"""

from __future__ import annotations

import json
import logging
import pickle
import traceback
from typing import Any

import google.auth.exceptions
import httplib2
import pytest
import urllib3.exceptions
from googleapiclient.errors import HttpError
from googleapiclient.http import _should_retry_response

from sheetsync.errors import (
    ContentRefusedError,
    CredentialError,
    PermanentError,
    SheetsError,
    TransientError,
    UnexplainedRefusalError,
)
from sheetsync.settings import Settings
from sheetsync.sheets.client import SheetsClient
from sheetsync.sheets.google_errors import GOOGLE_TEXT_LOGGER, translate_error

#: A fake national id number, as a respondent's answer would hold it.
CANARY = "880214-1637290"


def http_error(status: int, body: Any) -> HttpError:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    uri = "https://sheets.googleapis.com/v4/spreadsheets/s1/values/'Form'!A1:append?alt=json"
    return HttpError(httplib2.Response({"status": str(status)}), content, uri=uri)


def google_error(status: int, state: str | None, message: str, **extra: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": status, "message": message, **extra}
    if state is not None:
        error["status"] = state
    return {"error": error}


def refresh_error(code: str, description: str) -> google.auth.exceptions.RefreshError:
    """What google-auth raises for a token endpoint's error (google.oauth2._client)."""
    data = {"error": code, "error_description": description}
    return google.auth.exceptions.RefreshError(f"{code}: {description}", data, retryable=False)


RATE_LIMIT_INFO = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "RATE_LIMIT_EXCEEDED",
    "domain": "googleapis.com",
    "metadata": {"quota_limit": f"WriteRequestsPerMinutePerUser {CANARY}"},
}
FIELD_VIOLATION = {
    "@type": "type.googleapis.com/google.rpc.BadRequest",
    "fieldViolations": [{"field": "data.values[0]", "description": f'"{CANARY}"'}],
}

CASES = [
    pytest.param(
        http_error(
            400,
            google_error(
                400, "INVALID_ARGUMENT", f'Invalid values[1][4]: string_value: "{CANARY}"\n'
            ),
        ),
        True,
        ContentRefusedError,
        "Sheets API 400 INVALID_ARGUMENT: Google refused the values of a row",
        id="400-values",
    ),
    pytest.param(
        http_error(
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                f"Your input contains more than the maximum of 50000 characters: {CANARY}",
            ),
        ),
        True,
        ContentRefusedError,
        "Sheets API 400 INVALID_ARGUMENT: Google refused the values of a row",
        id="400-too-long",
    ),
    pytest.param(
        http_error(
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Invalid value at 'data.values[0]' "
                f'(type.googleapis.com/google.protobuf.ListValue), "{CANARY}"',
                errors=[
                    {
                        "message": f'Invalid value "{CANARY}"',
                        "domain": "global",
                        "reason": "badRequest",
                    }
                ],
                details=[FIELD_VIOLATION],
            ),
        ),
        True,
        UnexplainedRefusalError,
        "Sheets API 400 INVALID_ARGUMENT (badRequest): Google refused the request",
        id="400-other",
    ),
    pytest.param(
        http_error(400, google_error(400, "INVALID_ARGUMENT", f"Invalid data: {CANARY}")),
        False,
        PermanentError,
        "Sheets API 400 INVALID_ARGUMENT: Google refused the request",
        id="400-other-read",
    ),
    pytest.param(
        http_error(
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Request payload size exceeds the limit: 10485760 bytes.",
                details=[FIELD_VIOLATION],
            ),
        ),
        True,
        ContentRefusedError,
        "Sheets API 400 INVALID_ARGUMENT: the request was too large for Google",
        id="400-payload-size",
    ),
    pytest.param(
        http_error(413, f"<html>413. That's an error. {CANARY}</html>".encode()),
        True,
        ContentRefusedError,
        "Sheets API 413: the request was too large for Google",
        id="413",
    ),
    pytest.param(
        http_error(409, google_error(409, "ABORTED", f"Conflict: {CANARY}")),
        True,
        UnexplainedRefusalError,
        "Sheets API 409 ABORTED: Google refused the request",
        id="409-write",
    ),
    pytest.param(
        http_error(
            400, google_error(400, "INVALID_ARGUMENT", f"Unable to parse range: '{CANARY}'!A1")
        ),
        False,
        PermanentError,
        "Sheets API 400 INVALID_ARGUMENT: no such range (was the tab renamed?)",
        id="400-range",
    ),
    pytest.param(
        http_error(
            401, google_error(401, "UNAUTHENTICATED", f"Request had invalid credentials {CANARY}")
        ),
        False,
        CredentialError,
        "Sheets API 401 UNAUTHENTICATED: Google refused the access token",
        id="401",
    ),
    pytest.param(
        http_error(
            403,
            google_error(403, "PERMISSION_DENIED", f"The caller does not have permission {CANARY}"),
        ),
        True,
        PermanentError,
        "Sheets API 403 PERMISSION_DENIED: the owner has no access to the spreadsheet",
        id="403",
    ),
    pytest.param(
        http_error(
            403,
            google_error(
                403,
                None,
                f"User Rate Limit Exceeded {CANARY}",
                errors=[
                    {"message": CANARY, "domain": "usageLimits", "reason": "userRateLimitExceeded"}
                ],
            ),
        ),
        True,
        TransientError,
        "Sheets API 403 (userRateLimitExceeded): Google's rate limit was reached",
        id="403-rate-limit",
    ),
    pytest.param(
        http_error(
            404, google_error(404, "NOT_FOUND", f"Requested entity was not found: {CANARY}")
        ),
        False,
        PermanentError,
        "Sheets API 404 NOT_FOUND: the spreadsheet was not found",
        id="404",
    ),
    pytest.param(
        http_error(
            429,
            google_error(
                429, "RESOURCE_EXHAUSTED", f"Quota exceeded {CANARY}", details=[RATE_LIMIT_INFO]
            ),
        ),
        True,
        TransientError,
        "Sheets API 429 RESOURCE_EXHAUSTED (RATE_LIMIT_EXCEEDED): Google's rate limit was reached",
        id="429",
    ),
    pytest.param(
        http_error(500, google_error(500, "INTERNAL", f"Internal error encountered: {CANARY}")),
        True,
        TransientError,
        "Sheets API 500 INTERNAL: Google could not complete the request",
        id="500",
    ),
    pytest.param(
        http_error(502, f"<html><body>Bad Gateway {CANARY}</body></html>".encode()),
        False,
        TransientError,
        "Sheets API 502: Google could not complete the request",
        id="502-html",
    ),
    pytest.param(
        http_error(
            503, google_error(503, f"UNAVAILABLE {CANARY}", CANARY, errors=[{"reason": CANARY}])
        ),
        True,
        TransientError,
        "Sheets API 503: Google could not complete the request",
        id="503-codes-not-codes",
    ),
    pytest.param(
        refresh_error("invalid_grant", f"Token has been expired or revoked. {CANARY}"),
        False,
        CredentialError,
        "Google OAuth invalid_grant: Google refused the owner's refresh token (revoked or expired)",
        id="refresh-invalid-grant",
    ),
    pytest.param(
        refresh_error("invalid_client", f"The OAuth client was not found. {CANARY}"),
        False,
        CredentialError,
        "Google OAuth invalid_client: Google refused the OAuth client "
        "(SHEETSYNC_GOOGLE_CLIENT_ID/_SECRET)",
        id="refresh-invalid-client",
    ),
    pytest.param(
        refresh_error("internal_failure", f"Backend error {CANARY}"),
        False,
        TransientError,
        "Google OAuth internal_failure: the access token could not be refreshed",
        id="refresh-internal",
    ),
    pytest.param(
        google.auth.exceptions.RefreshError(f"<html>{CANARY}</html>", retryable=True),
        False,
        TransientError,
        "Google OAuth: the access token could not be refreshed",
        id="refresh-not-json",
    ),
    pytest.param(
        TimeoutError(f"timed out {CANARY}"),
        True,
        TransientError,
        "Sheets request timed out",
        id="socket-timeout",
    ),
    pytest.param(
        urllib3.exceptions.ReadTimeoutError(None, f"/v4/{CANARY}", "Read timed out."),
        True,
        TransientError,
        "Sheets request timed out",
        id="urllib3-timeout",
    ),
    pytest.param(
        ConnectionResetError(f"reset {CANARY}"),
        True,
        TransientError,
        "Sheets connection failed (ConnectionResetError)",
        id="connection-reset",
    ),
    pytest.param(
        google.auth.exceptions.TransportError(f"token endpoint unreachable {CANARY}"),
        False,
        TransientError,
        "Sheets connection failed (TransportError)",
        id="token-transport",
    ),
    pytest.param(
        ValueError(f"something unforeseen {CANARY}"),
        False,
        TransientError,
        "unexpected Sheets failure (ValueError)",
        id="unforeseen",
    ),
]


@pytest.mark.parametrize(("failure", "write", "expected_class", "expected"), CASES)
def test_every_failure_keeps_status_codes_and_our_text_only(
    failure, write, expected_class, expected, caplog
):
    caplog.set_level(logging.DEBUG)
    error = translate_error(failure, write=write)
    assert type(error) is expected_class
    assert str(error) == expected
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == expected and copy.status == error.status
    assert CANARY not in repr(copy.__dict__)
    from_google = isinstance(failure, HttpError | google.auth.exceptions.RefreshError)
    assert_only_debug_google_text_holds_it(caplog.records, expect_it=from_google)


def test_the_codes_are_fields_too():
    body = google_error(429, "RESOURCE_EXHAUSTED", CANARY, details=[RATE_LIMIT_INFO])
    error = translate_error(http_error(429, body), write=True)
    assert isinstance(error, TransientError)
    assert (error.status, error.google_code, error.ambiguous) == (
        429,
        "RESOURCE_EXHAUSTED (RATE_LIMIT_EXCEEDED)",
        False,
    )
    revoked = translate_error(refresh_error("invalid_grant", CANARY), write=False)
    assert (revoked.status, revoked.google_code) == (400, "invalid_grant")
    assert pickle.loads(pickle.dumps(revoked)).google_code == "invalid_grant"
    assert TransientError("ours").google_code is None


def test_a_raised_error_does_not_chain_googles_text(caplog):
    """The client raises without ``from exc``: a traceback (Celery logs one for a task
    that fails, and ships it to Flower) would print the HttpError, Google's text and all."""
    caplog.set_level(logging.DEBUG)
    settings = Settings.load(
        google_api_endpoint="https://sheets.googleapis.com",
        google_token_uri="https://oauth2.googleapis.com/token",
        google_client_id="client",
        google_client_secret="secret",
    )
    client = SheetsClient("refresh-unit-test", settings=settings)
    failure = http_error(
        400, google_error(400, "INVALID_ARGUMENT", f"Invalid values[0][1]: {CANARY}")
    )

    class Request:
        def execute(self, **_: Any) -> dict[str, Any]:
            raise failure

    with pytest.raises(SheetsError) as raised:
        client._execute(Request(), write=True)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    printed = "".join(traceback.format_exception(raised.value))
    assert "HttpError" not in printed and CANARY not in printed
    assert_only_debug_google_text_holds_it(caplog.records)


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        (json.dumps(google_error(403, None, f"No access for {CANARY}")).encode(), None),
        (f"<html>{CANARY}</html>".encode(), None),
        (json.dumps(google_error(403, "PERMISSION_DENIED", CANARY)).encode(), "PERMISSION_DENIED"),
    ],
    ids=["message-only", "not-json", "status"],
)
def test_googleapiclient_warnings_keep_codes_only(content, kept, caplog):
    """googleapiclient logs a 403's "reason" at WARNING: its message when the body names
    no code, the whole body when it is not JSON."""
    caplog.set_level(logging.DEBUG)
    _should_retry_response(403, content)
    [warning] = [r for r in caplog.records if r.name == "googleapiclient.http"]
    assert warning.levelno == logging.WARNING
    if kept is not None:
        assert warning.getMessage() == f'Encountered 403 Forbidden with reason "{kept}"'
    else:
        assert "(Google's text withheld)" in warning.getMessage()
    assert_only_debug_google_text_holds_it(caplog.records, expect_it=kept is None)


def assert_only_debug_google_text_holds_it(
    records: list[logging.LogRecord], *, expect_it: bool = True
) -> None:
    """The canary is in no record but DEBUG records of GOOGLE_TEXT_LOGGER (where the
    failures that carried it must have put it)."""
    holding = [r for r in records if CANARY in r.getMessage()]
    assert all(r.name == GOOGLE_TEXT_LOGGER and r.levelno == logging.DEBUG for r in holding)
    if expect_it:
        assert holding, "Google's text should be logged at DEBUG for whoever debugs"
