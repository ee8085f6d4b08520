"""A thin client over google-api-python-client: one method per Sheets endpoint we use.

Every request goes through :meth:`SheetsClient._execute`, which
- takes a rate-limit slot right before sending (``acquire``), so the slot and the
  request's arrival at Google are as close together as they can be;
- never retries (``num_retries=0``): ``values.append`` is not idempotent, and the flush
  has its own crash-safe retry;
- translates every failure into one of three classes by what retrying can do:
  transient, credential, permanent (docs/ARCHITECTURE.md, "Failures").
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import google.auth.exceptions
import google.oauth2.credentials
import google_auth_httplib2
import httplib2
import urllib3.exceptions
from googleapiclient.discovery import Resource, build
from googleapiclient.errors import HttpError

from sheetsync.errors import (
    ConfigError,
    CredentialError,
    PermanentError,
    SheetsError,
    TransientError,
)
from sheetsync.settings import Settings, get_settings
from sheetsync.sheets.transport import SingleShotHttp

#: The OAuth scope sheetsync asks for.
SHEETS_SCOPE = "https://www.googleapis.com/auth/spreadsheets"

_ROW_RANGE = re.compile(r"![A-Z]+(?P<first>\d+)(?::[A-Z]+(?P<last>\d+))?$")

Acquire = Callable[[], None]


def _no_limit() -> None:
    return None


@dataclass(frozen=True, slots=True)
class AppendResult:
    updated_range: str
    first_row: int
    last_row: int


def quote_title(title: str) -> str:
    """A sheet title as A1 notation wants it: always quoted, quotes doubled."""
    return "'" + title.replace("'", "''") + "'"


def row_span(a1_range: str) -> tuple[int, int]:
    """(first, last) row numbers of an ``updatedRange`` such as ``'S'!A11:F20``."""
    match = _ROW_RANGE.search(a1_range)
    if match is None:
        raise PermanentError(f"unexpected range in Sheets response: {a1_range[:120]}")
    first = int(match["first"])
    return first, int(match["last"] or first)


@functools.cache
def _resources(api_endpoint: str) -> tuple[Resource, Resource]:
    """``(spreadsheets, spreadsheets.values)``, built once per process: each build
    renders the discovery document's docstrings, tens of milliseconds of CPU."""
    spreadsheets = _service(api_endpoint).spreadsheets()
    return spreadsheets, spreadsheets.values()


def _service(api_endpoint: str) -> Resource:
    # The discovery document ships with the library (static_discovery), so building is
    # local; per-call credentials are passed as the ``http`` of each execute().
    return build(
        "sheets",
        "v4",
        http=httplib2.Http(),
        static_discovery=True,
        cache_discovery=False,
        client_options={"api_endpoint": api_endpoint},
    )


class _CredentialCache(threading.local):
    """Per-thread cache of authorized transports, so access tokens are reused.

    Per thread because httplib2 connections are not thread-safe.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str], google_auth_httplib2.AuthorizedHttp] = {}

    def get(self, refresh_token: str, settings: Settings) -> google_auth_httplib2.AuthorizedHttp:
        key = (refresh_token, settings.google_token_uri, settings.google_client_id or "")
        authed = self._entries.get(key)
        if authed is None:
            if len(self._entries) > 1000:
                self._entries.clear()
            secret = settings.google_client_secret
            credentials = google.oauth2.credentials.Credentials(  # type: ignore[no-untyped-call]
                token=None,
                refresh_token=refresh_token,
                token_uri=settings.google_token_uri,
                client_id=settings.google_client_id,
                client_secret=secret.get_secret_value() if secret else None,
                scopes=[SHEETS_SCOPE],
            )
            authed = google_auth_httplib2.AuthorizedHttp(
                credentials, http=SingleShotHttp(settings.google_timeout_s)
            )
            self._entries[key] = authed
        return authed

    def forget(self, refresh_token: str) -> None:
        for key in [k for k in self._entries if k[0] == refresh_token]:
            del self._entries[key]


_credentials = _CredentialCache()


class SheetsClient:
    """The Sheets calls of one Google account. Not thread-safe (httplib2 isn't)."""

    def __init__(
        self,
        refresh_token: str,
        *,
        settings: Settings | None = None,
        acquire: Acquire = _no_limit,
    ) -> None:
        self.settings = settings or get_settings()
        if not (self.settings.google_client_id and self.settings.google_client_secret):
            raise ConfigError(
                "SHEETSYNC_GOOGLE_CLIENT_ID and SHEETSYNC_GOOGLE_CLIENT_SECRET must be set "
                "to refresh Google credentials"
            )
        self._refresh_token = refresh_token
        self._http = _credentials.get(refresh_token, self.settings)
        self._sheets, self._values = _resources(self.settings.google_api_endpoint)
        self._acquire = acquire

    def sheet_titles(self, spreadsheet_id: str) -> dict[int, str]:
        """``{gid: title}`` of every sheet in the spreadsheet (one read)."""
        request = self._sheets.get(
            spreadsheetId=spreadsheet_id, fields="sheets.properties(sheetId,title)"
        )
        body = self._execute(request, write=False)
        return {
            int(sheet["properties"]["sheetId"]): str(sheet["properties"]["title"])
            for sheet in body.get("sheets", [])
        }

    def sheet_title(self, spreadsheet_id: str, gid: int) -> str:
        """The title of sheet ``gid`` (one read); a missing sheet is permanent."""
        title = self.sheet_titles(spreadsheet_id).get(gid)
        if title is None:
            raise PermanentError(
                f"sheet gid {gid} not found in spreadsheet {spreadsheet_id}", status=400
            )
        return title

    def read_values(self, spreadsheet_id: str, a1_range: str) -> list[list[str]]:
        """The cells of a range as text (one read). An empty range gives ``[]``."""
        request = self._values.get(
            spreadsheetId=spreadsheet_id, range=a1_range, majorDimension="ROWS"
        )
        body = self._execute(request, write=False)
        return [[str(cell) for cell in row] for row in body.get("values", [])]

    def append_rows(
        self, spreadsheet_id: str, a1_range: str, rows: Sequence[Sequence[str]]
    ) -> AppendResult:
        """Append rows RAW below the table (one write). Never retried here."""
        request = self._values.append(
            spreadsheetId=spreadsheet_id,
            range=a1_range,
            valueInputOption="RAW",
            insertDataOption="INSERT_ROWS",
            body={"values": rows},
        )
        body = self._execute(request, write=True)
        updated = str(body["updates"]["updatedRange"])
        first, last = row_span(updated)
        return AppendResult(updated, first, last)

    def create_spreadsheet(self, title: str, sheet_titles: Sequence[str]) -> dict[str, Any]:
        """Create a spreadsheet with the given sheets (one write); returns the resource."""
        body = {
            "properties": {"title": title},
            "sheets": [{"properties": {"title": name}} for name in sheet_titles],
        }
        return self._execute(self._sheets.create(body=body), write=True)

    def _execute(self, request: Any, *, write: bool) -> dict[str, Any]:
        self._acquire()
        try:
            result: dict[str, Any] = request.execute(http=self._http, num_retries=0)
        except Exception as exc:
            error = translate_error(exc, write=write)
            if isinstance(error, CredentialError):
                _credentials.forget(self._refresh_token)
            raise error from exc
        return result


def translate_error(exc: BaseException, *, write: bool) -> SheetsError:
    """Map a google-api-python-client / google-auth / socket failure to our three classes."""
    if isinstance(exc, SheetsError):
        return exc
    if isinstance(exc, HttpError):
        return _from_http_error(exc, write=write)
    if isinstance(exc, google.auth.exceptions.RefreshError):
        if "invalid_grant" in str(exc) or "invalid_client" in str(exc):
            return CredentialError("Google refused the refresh token (invalid_grant)", status=400)
        return TransientError(f"token refresh failed: {_clip(exc)}", status=None, ambiguous=False)
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


def _from_http_error(exc: HttpError, *, write: bool) -> SheetsError:
    status = int(exc.resp.status)
    message, reason = _google_message(exc)
    text = f"Sheets API {status}: {message}"
    if status == 429 or (status == 403 and "rateLimit" in reason):
        return TransientError(text, status=status, ambiguous=False)
    if status >= 500 or status == 408:
        return TransientError(text, status=status, ambiguous=write)
    if status == 401:
        return CredentialError(text, status=status)
    return PermanentError(text, status=status)


def _google_message(exc: HttpError) -> tuple[str, str]:
    try:
        error = json.loads(exc.content.decode("utf-8"))["error"]
        message = str(error.get("message", ""))
        reasons = [str(e.get("reason", "")) for e in error.get("errors", [])]
        return _clip(message), " ".join(reasons)
    except (ValueError, KeyError, TypeError, AttributeError):
        return _clip(exc.reason or ""), ""


def _clip(value: object) -> str:
    return str(value).replace("\n", " ")[:300]
