"""A thin client over google-api-python-client: one method per Sheets endpoint we use.

Every request goes through :meth:`SheetsClient._execute`, which
- takes a rate-limit slot right before sending (``acquire``), so the slot and the
  request's arrival at Google are as close together as they can be;
- never retries (``num_retries=0``): ``values.append`` is not idempotent, and the flush
  has its own crash-safe retry;
- raises every failure as one of three classes by what retrying can do (transient,
  credential, permanent), as :func:`sheetsync.sheets.google_errors.translate_error`
  words it: never with Google's own text, and never chained to Google's exception.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import google.oauth2.credentials
import google_auth_httplib2
import httplib2
from googleapiclient.discovery import Resource, build

from sheetsync.errors import ConfigError, CredentialError, PermanentError
from sheetsync.metrics import events
from sheetsync.redis_keys import RateKind
from sheetsync.settings import GoogleClient, Settings, get_settings
from sheetsync.sheets.google_errors import translate_error
from sheetsync.sheets.transport import SingleShotHttp

#: The OAuth scope sheetsync asks for.
SHEETS_SCOPE = "https://www.googleapis.com/auth/spreadsheets"
_ROW_RANGE = re.compile(r"![A-Z]+(?P<first>\d+)(?::[A-Z]+(?P<last>\d+))?$")

#: Takes a rate-limit slot of the given kind (``"read"`` or ``"write"``) for a request.
Acquire = Callable[[RateKind], None]
#: A new sheet's width, when a reply leaves it out.
DEFAULT_COLUMN_COUNT = 26


def _no_limit(kind: RateKind) -> None:
    return None


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an append landed. A 2xx means the rows are in the sheet; a reply whose range
    does not parse leaves the rows (None) unknown, never "not landed"."""

    updated_range: str
    first_row: int | None
    last_row: int | None


@dataclass(frozen=True, slots=True)
class SheetFacts:
    """What a first write needs to know of its tab, read in one request."""

    title: str
    #: The spreadsheet's time zone; None when Google gives none.
    time_zone: str | None
    #: Row 1 as text (formatted values), trailing empty cells left out, as values.get.
    first_row: list[str]
    #: The tab's grid width: a header write beyond it adds columns first.
    column_count: int


#: The fields of a :meth:`SheetsClient.sheet_facts` reply.
_FACTS_FIELDS = (
    "properties.timeZone,sheets(properties(sheetId,title,gridProperties.columnCount),"
    "data.rowData.values.formattedValue)"
)
#: The fields of a :meth:`SheetsClient.sheet_grid` reply.
_GRID_FIELDS = "sheets.properties(sheetId,title,gridProperties.columnCount)"


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


def build_resources(settings: Settings) -> None:
    """Build this process's Sheets resources now (a worker, before its pool forks)."""
    _resources(settings.google_api_endpoint)


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

    def get(
        self, refresh_token: str, settings: Settings, client: GoogleClient
    ) -> google_auth_httplib2.AuthorizedHttp:
        key = (refresh_token, settings.google_token_uri, client.client_id or "")
        authed = self._entries.get(key)
        if authed is None:
            if len(self._entries) > 1000:
                self._entries.clear()
            secret = client.client_secret
            credentials = google.oauth2.credentials.Credentials(  # type: ignore[no-untyped-call]
                token=None,
                refresh_token=refresh_token,
                token_uri=settings.google_token_uri,
                client_id=client.client_id,
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
        google_client: str | None = None,
    ) -> None:
        """``google_client``: the OAuth client the owner consented to, by its name in
        ``GOOGLE_CLIENTS_FILE`` (None: ``GOOGLE_CLIENT_ID``'s)."""
        self.settings = settings or get_settings()
        if not (self.settings.google_client_id and self.settings.google_client_secret):
            raise ConfigError(
                "SHEETSYNC_GOOGLE_CLIENT_ID and SHEETSYNC_GOOGLE_CLIENT_SECRET must be set "
                "to refresh Google credentials"
            )
        self._refresh_token = refresh_token
        self._http = _credentials.get(
            refresh_token, self.settings, self.settings.google_client(google_client)
        )
        self._sheets, self._values = _resources(self.settings.google_api_endpoint)
        self._acquire = acquire
        #: A monotonic time no request may outlive (a flush sets it from its lease at
        #: every renewal), or None: then only ``google_timeout_s`` bounds a request.
        self.deadline: float | None = None

    def sheet_titles(self, spreadsheet_id: str) -> dict[int, str]:
        """``{gid: title}`` of every sheet in the spreadsheet (one read)."""
        return {gid: title for gid, (title, _) in self.sheet_grid(spreadsheet_id).items()}

    def sheet_title(self, spreadsheet_id: str, gid: int) -> str:
        """The title of sheet ``gid`` (one read); a missing sheet is permanent."""
        title = self.sheet_titles(spreadsheet_id).get(gid)
        if title is None:
            raise PermanentError(
                f"sheet gid {gid} not found in spreadsheet {spreadsheet_id}", status=400
            )
        return title

    def sheet_facts(self, spreadsheet_id: str, gid: int) -> SheetFacts:
        """The title of sheet ``gid``, the spreadsheet's time zone and the tab's row 1,
        in one read: ``spreadsheets.getByDataFilter`` selects row 1 of the tab by its gid
        (``spreadsheets.get`` could only name it by the title it is asked for). A missing
        sheet is permanent."""
        request = self._sheets.getByDataFilter(
            spreadsheetId=spreadsheet_id,
            fields=_FACTS_FIELDS,
            body={
                "dataFilters": [
                    {"gridRange": {"sheetId": gid, "startRowIndex": 0, "endRowIndex": 1}}
                ]
            },
        )
        body = self._execute(request, write=False)
        for sheet in body.get("sheets", []):
            properties = sheet.get("properties", {})
            if int(properties.get("sheetId", 0)) != gid:  # protobuf omits a 0
                continue
            row: list[str] = []
            for data in sheet.get("data", [])[:1]:
                for row_data in data.get("rowData", [])[:1]:
                    row = [
                        str(cell.get("formattedValue", "")) for cell in row_data.get("values", [])
                    ]
            while row and not row[-1]:
                row.pop()
            time_zone = body.get("properties", {}).get("timeZone")
            return SheetFacts(
                title=str(properties["title"]),
                time_zone=str(time_zone) if time_zone else None,
                first_row=row,
                column_count=_column_count(properties),
            )
        raise PermanentError(
            f"sheet gid {gid} not found in spreadsheet {spreadsheet_id}", status=400
        )

    def sheet_grid(self, spreadsheet_id: str) -> dict[int, tuple[str, int]]:
        """``{gid: (title, column count)}`` of every sheet in the spreadsheet (one read)."""
        request = self._sheets.get(spreadsheetId=spreadsheet_id, fields=_GRID_FIELDS)
        body = self._execute(request, write=False)
        grid: dict[int, tuple[str, int]] = {}
        for sheet in body.get("sheets", []):
            properties = sheet["properties"]
            grid[int(properties.get("sheetId", 0))] = (
                str(properties["title"]),
                _column_count(properties),
            )
        return grid

    def write_header(
        self,
        spreadsheet_id: str,
        gid: int,
        cells: Mapping[int, str],
        formats: Mapping[int, tuple[str, str]],
        *,
        column_count: int,
    ) -> None:
        """Write ``{column index: text}`` into row 1 of sheet ``gid`` as text and set
        ``{column index: (type, pattern)}`` number formats below row 1, in one
        ``batchUpdate`` (``updateCells`` per run of adjacent cells, ``repeatCell`` per
        format), which Google applies whole or not at all. ``updateCells`` never widens
        a grid (``values.update`` did), so a header wider than ``column_count`` (the
        tab's width as just read) starts with an ``appendDimension`` of the columns
        missing. Idempotent but for that: a retry after a lost reply may add them twice
        (empty columns at the right, nothing moves)."""
        wanted = max([*cells, *formats], default=-1) + 1
        requests: list[dict[str, Any]] = []
        if wanted > column_count:
            requests.append(
                {
                    "appendDimension": {
                        "sheetId": gid,
                        "dimension": "COLUMNS",
                        "length": wanted - column_count,
                    }
                }
            )
        requests += [
            {
                "updateCells": {
                    "start": {"sheetId": gid, "rowIndex": 0, "columnIndex": start},
                    "rows": [{"values": [{"userEnteredValue": {"stringValue": t}} for t in texts]}],
                    "fields": "userEnteredValue",
                }
            }
            for start, texts in _runs(cells)
        ]
        requests += _format_requests(gid, formats)
        if requests:
            request = self._sheets.batchUpdate(
                spreadsheetId=spreadsheet_id, body={"requests": requests}
            )
            self._execute(request, write=True)

    def read_values(self, spreadsheet_id: str, a1_range: str) -> list[list[str]]:
        """The cells of a range as text (one read). An empty range gives ``[]``."""
        request = self._values.get(
            spreadsheetId=spreadsheet_id, range=a1_range, majorDimension="ROWS"
        )
        body = self._execute(request, write=False)
        return [[str(cell) for cell in row] for row in body.get("values", [])]

    def read_ranges(self, spreadsheet_id: str, a1_ranges: Sequence[str]) -> list[list[list[str]]]:
        """The cells of several ranges as text, in one read (``values.batchGet``)."""
        request = self._values.batchGet(
            spreadsheetId=spreadsheet_id, ranges=list(a1_ranges), majorDimension="ROWS"
        )
        body = self._execute(request, write=False)
        return [
            [[str(cell) for cell in row] for row in value_range.get("values", [])]
            for value_range in body.get("valueRanges", [])
        ]

    def update_ranges(
        self, spreadsheet_id: str, data: Sequence[tuple[str, Sequence[Sequence[str | int | float]]]]
    ) -> None:
        """Write each ``(range, rows)`` RAW, in one ``values.batchUpdate`` (Google applies
        it whole or not at all). Idempotent."""
        body = {
            "valueInputOption": "RAW",
            "data": [
                {"range": a1_range, "majorDimension": "ROWS", "values": rows}
                for a1_range, rows in data
            ],
        }
        self._execute(self._values.batchUpdate(spreadsheetId=spreadsheet_id, body=body), write=True)

    def delete_rows(self, spreadsheet_id: str, spans: Sequence[tuple[int, int, int]]) -> None:
        """Delete rows ``[start, end)`` (0 is row 1) of tab ``gid`` for each ``(gid, start,
        end)``, in the order given, in one ``batchUpdate`` (whole or not at all): the
        caller orders each tab's spans bottom up, so none moves another."""
        requests = [
            {
                "deleteDimension": {
                    "range": {
                        "sheetId": gid,
                        "dimension": "ROWS",
                        "startIndex": start,
                        "endIndex": end,
                    }
                }
            }
            for gid, start, end in spans
        ]
        body = {"requests": requests}
        self._execute(self._sheets.batchUpdate(spreadsheetId=spreadsheet_id, body=body), write=True)

    def append_rows(
        self,
        spreadsheet_id: str,
        a1_range: str,
        rows: Sequence[Sequence[str | int | float]],
    ) -> AppendResult:
        """Append rows RAW below the table (one write). Never retried here, and never
        running past :attr:`deadline` (the run's lease ends soon after)."""
        request = self._values.append(
            spreadsheetId=spreadsheet_id,
            range=a1_range,
            valueInputOption="RAW",
            insertDataOption="INSERT_ROWS",
            body={"values": rows},
        )
        body = self._execute(request, write=True)
        updated = str(body.get("updates", {}).get("updatedRange", ""))
        try:
            first, last = row_span(updated)
        except PermanentError:
            return AppendResult(updated, None, None)
        return AppendResult(updated, first, last)

    def add_sheet_with_rows(
        self,
        spreadsheet_id: str,
        title: str,
        *,
        sheet_id: int,
        rows: Sequence[Sequence[str]],
    ) -> int:
        """Add a tab sized to ``rows`` exactly and holding them as text, in one
        ``batchUpdate`` (Google applies it whole or not at all). Returns its gid."""
        width = max((len(row) for row in rows), default=1)
        cells = [
            {"values": [{"userEnteredValue": {"stringValue": str(cell)}} for cell in row]}
            for row in rows
        ]
        body = {
            "requests": [
                {
                    "addSheet": {
                        "properties": {
                            "sheetId": sheet_id,
                            "title": title,
                            "gridProperties": {"rowCount": max(len(rows), 1), "columnCount": width},
                        }
                    }
                },
                {"appendCells": {"sheetId": sheet_id, "rows": cells, "fields": "userEnteredValue"}},
            ]
        }
        request = self._sheets.batchUpdate(spreadsheetId=spreadsheet_id, body=body)
        reply = self._execute(request, write=True)
        try:
            return int(reply["replies"][0]["addSheet"]["properties"]["sheetId"])
        except (KeyError, IndexError, TypeError, ValueError):
            return sheet_id

    def create_spreadsheet(self, title: str, sheet_titles: Sequence[str]) -> dict[str, Any]:
        """Create a spreadsheet with the given sheets (one write); returns the resource."""
        body = {
            "properties": {"title": title},
            "sheets": [{"properties": {"title": name}} for name in sheet_titles],
        }
        return self._execute(self._sheets.create(body=body), write=True)

    def authorize(self) -> None:
        """Get an access token now unless a valid one is cached: one request to Google's
        token endpoint (no Sheets quota). A refused credential raises here, before the
        caller takes a lock that its Sheets requests would otherwise hold while the
        token is refreshed."""
        credentials = self._http.credentials
        if credentials.valid:
            return
        transport: SingleShotHttp = self._http.http
        transport.deadline = self.deadline
        try:
            credentials.refresh(google_auth_httplib2.Request(transport))
        except Exception as exc:
            error = translate_error(exc, write=False)
            if isinstance(error, CredentialError):
                _credentials.forget(self._refresh_token)
            raise error from None  # not chained: Google's text stays out (translate_error)
        finally:
            transport.deadline = None

    def _execute(self, request: Any, *, write: bool) -> dict[str, Any]:
        self._acquire("write" if write else "read")
        transport: SingleShotHttp = self._http.http
        transport.deadline = self.deadline
        kind = str(getattr(request, "methodId", None) or "unknown").removeprefix("sheets.")
        try:
            result: dict[str, Any] = request.execute(http=self._http, num_retries=0)
        except Exception as exc:
            error = translate_error(exc, write=write)
            events.sheets_request(kind, error)
            if isinstance(error, CredentialError):
                _credentials.forget(self._refresh_token)
            # Not chained: a traceback would print Google's text (see translate_error).
            raise error from None
        finally:
            transport.deadline = None
        events.sheets_request(kind)
        return result


def _column_count(properties: Mapping[str, Any]) -> int:
    """A sheet's ``gridProperties.columnCount`` (Google's default 26 when absent)."""
    return int(properties.get("gridProperties", {}).get("columnCount", DEFAULT_COLUMN_COUNT))


def _format_requests(gid: int, formats: Mapping[int, tuple[str, str]]) -> list[dict[str, Any]]:
    """A ``repeatCell`` per ``{column index: (type, pattern)}``, below row 1."""
    return [
        {
            "repeatCell": {
                "range": {
                    "sheetId": gid,
                    "startRowIndex": 1,
                    "startColumnIndex": column,
                    "endColumnIndex": column + 1,
                },
                "cell": {"userEnteredFormat": {"numberFormat": {"type": kind, "pattern": pattern}}},
                "fields": "userEnteredFormat.numberFormat",
            }
        }
        for column, (kind, pattern) in sorted(formats.items())
    ]


def _runs(cells: Mapping[int, str]) -> list[tuple[int, list[str]]]:
    """``{column index: text}`` as runs of adjacent cells: ``[(first index, texts)]``."""
    runs: list[tuple[int, list[str]]] = []
    for index in sorted(cells):
        if runs and runs[-1][0] + len(runs[-1][1]) == index:
            runs[-1][1].append(cells[index])
        else:
            runs.append((index, [cells[index]]))
    return runs
