"""Google's failures in our words: each Sheets or OAuth failure as one of three classes by
what retrying can do (transient, credential, permanent; docs/ARCHITECTURE.md,
"Failures"), with a message of ours: the HTTP status, Google's status and reason codes,
and a fixed text.

Google's own text can quote the request's values (personal info): it is logged at DEBUG
on :data:`GOOGLE_TEXT_LOGGER` only, never stored, alerted, returned or chained. Importing
this module also withholds that text from googleapiclient's own warnings.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import google.auth.exceptions
import httplib2
import urllib3.exceptions
from googleapiclient.errors import HttpError

from sheetsync.errors import (
    ContentRefusedError,
    CredentialError,
    PermanentError,
    SheetFullError,
    SheetsError,
    TransientError,
    UnexplainedRefusalError,
)

#: The one logger that sees Google's own error text, at DEBUG only: its messages can
#: quote the request's values (personal info). Keep it below INFO wherever logs are kept.
GOOGLE_TEXT_LOGGER = "sheetsync.sheets.google_text"
_google_text = logging.getLogger(GOOGLE_TEXT_LOGGER)


def translate_error(exc: BaseException, *, write: bool) -> SheetsError:
    """Map a google-api-python-client / google-auth / socket failure to our three classes.

    The message keeps the HTTP status, Google's status and reason codes and a text of
    ours for the case, never Google's own text: its 400s quote the request's values,
    which are decrypted personal info. That text goes to :data:`GOOGLE_TEXT_LOGGER` at
    DEBUG, and nowhere else.
    """
    if isinstance(exc, SheetsError):
        return exc
    if isinstance(exc, HttpError):
        return _from_http_error(exc, write=write)
    _google_text.debug("Sheets request failed: %r", exc)
    if isinstance(exc, google.auth.exceptions.RefreshError):
        return _from_refresh_error(exc)
    if isinstance(exc, TimeoutError | socket.timeout | urllib3.exceptions.TimeoutError):
        return TransientError("Sheets request timed out", status=None, ambiguous=write)
    if isinstance(
        exc,
        ConnectionError
        | http.client.HTTPException
        | httplib2.HttpLib2Error
        | google.auth.exceptions.TransportError
        | urllib3.exceptions.HTTPError
        | OSError,
    ):
        kind = type(exc).__name__
        return TransientError(f"Sheets connection failed ({kind})", status=None, ambiguous=write)
    return TransientError(
        f"unexpected Sheets failure ({type(exc).__name__})", status=None, ambiguous=write
    )


#: Google's ``status``, a canonical code (google.rpc.Code: ``PERMISSION_DENIED``).
_STATUS = re.compile(r"[A-Z]+(?:_[A-Z]+){0,3}")
#: A reason code as Google writes one (``rateLimitExceeded``, ``invalid_grant``); any
#: other text in a reason field is dropped.
_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
#: How Google's 400s for the values of a write begin (the sheet itself is fine).
_CONTENT_REFUSALS = ("Invalid values[", "Your input contains more than the maximum")
#: Our words for a 400 on the values of a write.
VALUES_REFUSED = "Google refused the values of a row"
#: How Google's front end refuses a body above its size limit (10 MiB) with a 400; a
#: larger one may get a 413 instead.
_TOO_LARGE = "Request payload size exceeds the limit"
#: Google's 400 for a write past the spreadsheet's cell limit (a batchUpdate puts
#: "Invalid requests[0].addSheet: " in front).
_CELL_LIMIT = "This action would increase the number of cells in the workbook above the limit"
#: What the operator reads when Google refuses a refresh token, by OAuth error code.
_GRANT_REFUSED = {
    "invalid_grant": "Google refused the owner's refresh token (revoked or expired)",
    "invalid_client": "Google refused the OAuth client (SHEETSYNC_GOOGLE_CLIENT_ID/_SECRET)",
}


@dataclass(frozen=True, slots=True)
class _GoogleAnswer:
    """What an error body says: Google's message (to classify, never to keep) and codes."""

    message: str = ""
    status: str | None = None
    reasons: tuple[str, ...] = ()

    @property
    def code(self) -> str | None:
        """The codes as messages show them: ``RESOURCE_EXHAUSTED (rateLimitExceeded)``."""
        reasons = f"({', '.join(self.reasons)})" if self.reasons else ""
        return " ".join(part for part in (self.status, reasons) if part) or None

    def names_rate_limit(self) -> bool:
        return any("ratelimit" in r.lower().replace("_", "") for r in self.reasons)


def _from_http_error(exc: HttpError, *, write: bool) -> SheetsError:
    """The class by what retrying can do; the message: status, codes and a fixed text."""
    status = int(exc.resp.status)
    _google_text.debug("Sheets API %d answered: %s", status, _raw_text(exc.content))
    answer = _google_answer(exc.content)
    code = answer.code
    head = f"Sheets API {status} {code}" if code else f"Sheets API {status}"
    fields: dict[str, Any] = {"status": status, "google_code": code}
    if status == 429 or (status == 403 and answer.names_rate_limit()):
        return TransientError(f"{head}: Google's rate limit was reached", ambiguous=False, **fields)
    if status >= 500 or status == 408:
        return TransientError(
            f"{head}: Google could not complete the request", ambiguous=write, **fields
        )
    if status == 401:
        return CredentialError(f"{head}: Google refused the access token", **fields)
    if status == 400 and write and _CELL_LIMIT in answer.message:
        return SheetFullError(f"{head}: the spreadsheet is at Google's cell limit", **fields)
    if status == 400 and write and answer.message.startswith(_CONTENT_REFUSALS):
        return ContentRefusedError(f"{head}: {VALUES_REFUSED}", **fields)
    if write and (status == 413 or (status == 400 and answer.message.startswith(_TOO_LARGE))):
        return ContentRefusedError(f"{head}: the request was too large for Google", **fields)
    if status == 400 and answer.message.startswith("Unable to parse range"):
        return PermanentError(f"{head}: no such range (was the tab renamed?)", **fields)
    if status == 403:
        return PermanentError(f"{head}: the owner has no access to the spreadsheet", **fields)
    if status == 404:
        return PermanentError(f"{head}: the spreadsheet was not found", **fields)
    if write and 400 <= status < 500:
        return UnexplainedRefusalError(f"{head}: Google refused the request", **fields)
    return PermanentError(f"{head}: Google refused the request", **fields)


def _from_refresh_error(exc: google.auth.exceptions.RefreshError) -> SheetsError:
    """google-auth's refresh failure, by the OAuth ``error`` code alone: its text also
    carries Google's ``error_description``."""
    code = _oauth_code(exc)
    head = f"Google OAuth {code}" if code else "Google OAuth"
    if code in _GRANT_REFUSED:
        return CredentialError(f"{head}: {_GRANT_REFUSED[code]}", status=400, google_code=code)
    return TransientError(
        f"{head}: the access token could not be refreshed",
        status=None,
        ambiguous=False,
        google_code=code,
    )


def _oauth_code(exc: google.auth.exceptions.RefreshError) -> str | None:
    data = exc.args[1] if len(exc.args) > 1 else None
    if isinstance(data, Mapping):
        code = data.get("error")
        return code if isinstance(code, str) and _CODE.fullmatch(code) else None
    text = str(exc.args[0]) if exc.args else ""
    return next((grant for grant in _GRANT_REFUSED if text.startswith(grant)), None)


def _google_answer(content: object) -> _GoogleAnswer:
    """Google's ``{"error": {"message", "status", "errors": [{"reason"}], "details":
    [{"reason"}]}}``, or a list of such (batch). Anything else gives no codes."""
    try:
        body = json.loads(content) if isinstance(content, bytes | str) else None
    except ValueError:
        return _GoogleAnswer()
    if isinstance(body, list) and body:
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return _GoogleAnswer(reasons=_codes([error]))
    entries = [e for key in ("errors", "details") for e in _list(error.get(key))]
    status = error.get("status")
    return _GoogleAnswer(
        message=str(error.get("message", "")),
        status=status if isinstance(status, str) and _STATUS.fullmatch(status) else None,
        reasons=_codes([e.get("reason") for e in entries if isinstance(e, dict)]),
    )


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _codes(values: Sequence[object]) -> tuple[str, ...]:
    """The values that read as codes, each once, at most three."""
    kept = [v for v in values if isinstance(v, str) and _CODE.fullmatch(v)]
    return tuple(dict.fromkeys(kept))[:3]


def _raw_text(content: object) -> str:
    raw = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)
    return raw[:2000]


class _WithholdGoogleText(logging.Filter):
    """googleapiclient logs, at WARNING, a 403's reason (Google's message when the body
    names no code) and any error body that is not JSON: keep codes, withhold the rest
    (it goes to :data:`GOOGLE_TEXT_LOGGER` at DEBUG)."""

    REASON_403 = 'Encountered 403 Forbidden with reason "%s"'
    NOT_JSON = "Invalid JSON content from response: %s"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in (self.REASON_403, self.NOT_JSON) and isinstance(record.args, tuple):
            _google_text.debug("googleapiclient: %s", record.getMessage())
            said = record.args[0] if record.args else None
            keep = record.msg == self.REASON_403 and _codes([said])
            record.args = (said if keep else "(Google's text withheld)",)
        return True


logging.getLogger("googleapiclient.http").addFilter(_WithholdGoogleText())
