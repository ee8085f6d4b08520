"""A small client for the emulator's admin API (standard library only).

>>> admin = EmulatorAdmin("http://127.0.0.1:8085")  # doctest: +SKIP
>>> admin.add_account("owner-1", "refresh-1")  # doctest: +SKIP
>>> spreadsheet_id, gids = admin.create_spreadsheet("owner-1", "Answers")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from sheets_emulator.errors import EmulatorAdminError

#: Seconds an admin call may take.
DEFAULT_TIMEOUT_S = 10.0


class EmulatorAdmin:
    """The ``/_emulator/`` API of one emulator, e.g. ``EmulatorAdmin(server.url)``."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def add_account(self, account_id: str, refresh_token: str) -> None:
        """Register (or restore) an account whose refresh token the token endpoint accepts."""
        self._call("POST", "/accounts", {"account_id": account_id, "refresh_token": refresh_token})

    def revoke(self, account_id: str) -> None:
        """Invalidate the account's refresh and access tokens (refresh: ``invalid_grant``)."""
        self._call("POST", f"/accounts/{quote(account_id, safe='')}/revoke")

    def create_spreadsheet(
        self,
        owner: str,
        title: str = "Untitled spreadsheet",
        sheets: list[str] | None = None,
        *,
        time_zone: str | None = None,
    ) -> tuple[str, dict[str, int]]:
        """Create a spreadsheet owned by ``owner``; returns (spreadsheet id, {title: gid}).

        Without ``sheets`` it has one sheet, ``Sheet1`` with gid 0. Without ``time_zone``
        it has the emulator's default (:meth:`set_settings`). Not counted in quotas.
        """
        body: dict[str, Any] = {"owner": owner, "title": title}
        if sheets is not None:
            body["sheets"] = sheets
        if time_zone is not None:
            body["time_zone"] = time_zone
        resource = self._call("POST", "/spreadsheets", body)
        gids = {
            sheet["properties"]["title"]: sheet["properties"]["sheetId"]
            for sheet in resource["sheets"]
        }
        return resource["spreadsheetId"], gids

    def spreadsheet(self, spreadsheet_id: str) -> dict[str, Any]:
        """The spreadsheet resource, plus its ``owner``."""
        result: dict[str, Any] = self._call("GET", f"/spreadsheets/{quote(spreadsheet_id)}")
        return result

    def set_time_zone(self, spreadsheet_id: str, time_zone: str) -> None:
        """Change the spreadsheet's ``properties.timeZone``, as its owner can in the UI."""
        self.batch_update(
            spreadsheet_id,
            [
                {
                    "updateSpreadsheetProperties": {
                        "properties": {"timeZone": time_zone},
                        "fields": "timeZone",
                    }
                }
            ],
        )

    def delete_spreadsheet(self, spreadsheet_id: str) -> None:
        """Delete it: later API calls on it get 404."""
        self._call("DELETE", f"/spreadsheets/{quote(spreadsheet_id)}")

    def batch_update(self, spreadsheet_id: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply batchUpdate ``requests`` as the sheet's owner would in the UI, without a token,
        quota or faults; returns the API's answer (``{"spreadsheetId", "replies"}``).

        A request Google refuses raises :class:`EmulatorAdminError` with status 400 and
        Google's message; then nothing of the batch is applied.
        """
        path = f"/spreadsheets/{quote(spreadsheet_id)}/batchUpdate"
        result: dict[str, Any] = self._call("POST", path, {"requests": requests})
        return result

    def delete_rows(self, spreadsheet_id: str, gid: int, start_index: int, end_index: int) -> None:
        """Delete rows ``start_index`` to ``end_index - 1`` (0-based: row 1 is index 0), as a
        person does: the rows below move up and the grid shrinks."""
        self._dimension("deleteDimension", spreadsheet_id, gid, "ROWS", start_index, end_index)

    def insert_rows(self, spreadsheet_id: str, gid: int, start_index: int, end_index: int) -> None:
        """Insert ``end_index - start_index`` blank rows before row index ``start_index``
        (0-based); the rows from there move down."""
        self._dimension("insertDimension", spreadsheet_id, gid, "ROWS", start_index, end_index)

    def delete_columns(
        self, spreadsheet_id: str, gid: int, start_index: int, end_index: int
    ) -> None:
        """Delete columns ``start_index`` to ``end_index - 1`` (0-based: A is 0)."""
        self._dimension("deleteDimension", spreadsheet_id, gid, "COLUMNS", start_index, end_index)

    def insert_columns(
        self, spreadsheet_id: str, gid: int, start_index: int, end_index: int
    ) -> None:
        """Insert ``end_index - start_index`` blank columns before column ``start_index``."""
        self._dimension("insertDimension", spreadsheet_id, gid, "COLUMNS", start_index, end_index)

    def move_columns(
        self, spreadsheet_id: str, gid: int, start_index: int, end_index: int, destination: int
    ) -> None:
        """Move columns ``start_index..end_index - 1`` before column ``destination`` (an
        index counted before the move: to move A after C, say 3), as a person drags them."""
        source = {
            "sheetId": int(gid),
            "dimension": "COLUMNS",
            "startIndex": start_index,
            "endIndex": end_index,
        }
        request = {"moveDimension": {"source": source, "destinationIndex": destination}}
        self.batch_update(spreadsheet_id, [request])

    def sort_rows(
        self,
        spreadsheet_id: str,
        gid: int,
        column_index: int,
        descending: bool = False,
        start_row: int = 1,
    ) -> None:
        """Sort the sheet's rows from row index ``start_row`` down (the default keeps row 1,
        the header, in place) by column ``column_index`` (0-based), as a person sorts."""
        sort_range = {
            "range": {"sheetId": int(gid), "startRowIndex": start_row},
            "sortSpecs": [
                {
                    "dimensionIndex": column_index,
                    "sortOrder": "DESCENDING" if descending else "ASCENDING",
                }
            ],
        }
        self.batch_update(spreadsheet_id, [{"sortRange": sort_range}])

    def update_values(
        self,
        spreadsheet_id: str,
        a1_range: str,
        values: list[list[Any]],
        *,
        value_input_option: str = "USER_ENTERED",
    ) -> dict[str, Any]:
        """Write ``values`` at ``a1_range`` as a person typing (``""`` clears a cell); returns
        the answer of the API's values.update."""
        body = {"range": a1_range, "values": values, "valueInputOption": value_input_option}
        result: dict[str, Any] = self._call(
            "PUT", f"/spreadsheets/{quote(spreadsheet_id)}/values", body
        )
        return result

    def clear_values(self, spreadsheet_id: str, a1_range: str) -> dict[str, Any]:
        """Empty ``a1_range`` (``Sheet1`` for a whole sheet) as a person selecting it and
        pressing Delete (formats stay); returns the answer of the API's values.clear."""
        path = f"/spreadsheets/{quote(spreadsheet_id)}/values:clear"
        result: dict[str, Any] = self._call("POST", path, {"range": a1_range})
        return result

    def sheet_values(self, spreadsheet_id: str, gid: int) -> list[list[str]]:
        """Every cell of the sheet as shown (formatted), trailing blanks trimmed."""
        path = f"/spreadsheets/{quote(spreadsheet_id)}/sheets/{int(gid)}"
        values: list[list[str]] = self._call("GET", path)["values"]
        return values

    def sheet_html(self, spreadsheet_id: str, gid: int) -> str:
        """The sheet as the HTML page a browser gets."""
        path = f"/spreadsheets/{quote(spreadsheet_id)}/sheets/{int(gid)}"
        return self._request("GET", path, None, accept="text/html").decode("utf-8")

    def stats(self, *, times: bool = False) -> dict[str, Any]:
        """Requests by kind and account, 429s, token refreshes, busiest windows; with
        ``times``, also ``served_times``: when each served request arrived (and
        ``served_times_by_access``: the same, for reads and for writes apart, and
        ``served_times_by_account``: per account, for reads and for writes, and
        ``served_times_by_kind``: per kind of request, ``values.append`` say)."""
        result: dict[str, Any] = self._call("GET", "/stats?times=1" if times else "/stats")
        return result

    def reset_stats(self) -> None:
        self._call("POST", "/stats/reset")

    def add_fault(
        self,
        kind: str,
        count: int = 1,
        action: str = "error",
        *,
        status: int | None = None,
        seconds: float | None = None,
        account: str | None = None,
        match: str | None = None,
        updated_range: str | None = None,
    ) -> None:
        """Make the next ``count`` requests of ``kind`` fail (``error``), ``hang``, ``drop``,
        be refused (``refuse``) or get a garbled answer (``garble``).

        ``match`` limits the fault to ``values.append`` / ``values.update`` requests with a
        cell containing that text; ``updated_range`` is what ``garble`` answers as the
        updated range. See :mod:`sheets_emulator.faults` for kinds and actions.
        """
        spec: dict[str, Any] = {"kind": kind, "count": count, "action": action}
        options = {
            "status": status,
            "seconds": seconds,
            "account": account,
            "match": match,
            "range": updated_range,
        }
        spec.update({name: value for name, value in options.items() if value is not None})
        self._call("POST", "/faults", spec)

    def refuse(
        self,
        match: str,
        count: int = 1,
        *,
        kind: str = "values.append",
        account: str | None = None,
    ) -> None:
        """Answer the next ``count`` requests of ``kind`` that have a cell containing
        ``match`` with Google's 400 INVALID_ARGUMENT naming that cell; nothing is written.
        Other requests pass and do not use it up."""
        self.add_fault(kind, count, "refuse", match=match, account=account)

    def garble(
        self,
        count: int = 1,
        *,
        updated_range: str | None = None,
        kind: str = "values.append",
        match: str | None = None,
        account: str | None = None,
    ) -> None:
        """Serve the next ``count`` requests of ``kind`` (the rows are written) but answer
        ``updatedRange`` as ``updated_range`` (default ``'Sheet1'``: no rows to parse)."""
        self.add_fault(
            kind, count, "garble", match=match, account=account, updated_range=updated_range
        )

    def faults(self) -> list[dict[str, Any]]:
        """The faults not used up yet."""
        pending: list[dict[str, Any]] = self._call("GET", "/faults")["faults"]
        return pending

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def set_quotas(
        self,
        *,
        read_per_account: int | None = None,
        write_per_account: int | None = None,
        read_per_project: int | None = None,
        write_per_project: int | None = None,
        window_s: float | None = None,
    ) -> dict[str, Any]:
        """Change some limits (the others stay); returns all of them."""
        changes = {
            name: value
            for name, value in (
                ("read_per_account", read_per_account),
                ("write_per_account", write_per_account),
                ("read_per_project", read_per_project),
                ("write_per_project", write_per_project),
                ("window_s", window_s),
            )
            if value is not None
        }
        result: dict[str, Any] = self._call("PUT", "/quotas", changes)
        return result

    def set_settings(
        self,
        *,
        max_cells: int | None = None,
        time_zone: str | None = None,
        max_request_bytes: int | None = None,
    ) -> dict[str, Any]:
        """Change the cell limit of every spreadsheet (Google's: 10,000,000), the time
        zone of new ones (``Etc/GMT``) or the largest request body the Sheets API takes
        (Google's: 10 MiB); returns them all. :meth:`reset` restores them."""
        changes: dict[str, Any] = {}
        if max_cells is not None:
            changes["max_cells"] = max_cells
        if time_zone is not None:
            changes["time_zone"] = time_zone
        if max_request_bytes is not None:
            changes["max_request_bytes"] = max_request_bytes
        result: dict[str, Any] = self._call("PUT", "/settings", changes)
        return result

    def settings(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/settings")
        return result

    def quotas(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/quotas")
        return result

    def set_projects(self, projects: Mapping[str, str | None]) -> dict[str, str]:
        """Put OAuth clients in Cloud projects, ``{client_id: "project number"}`` (``None``:
        back in the default project, 123456789012); the others stay. A request counts
        against the quotas of its token's client's project. Returns :meth:`projects`."""
        result: dict[str, str] = self._call("PUT", "/projects", dict(projects))
        return result

    def projects(self) -> dict[str, str]:
        """Every client put in a project; any other is in the default project."""
        result: dict[str, str] = self._call("GET", "/projects")
        return result

    def reset(self) -> None:
        """Forget everything: spreadsheets, accounts, stats, faults, projects; quotas and
        settings as started."""
        self._call("POST", "/reset")

    def _dimension(
        self,
        request_kind: str,
        spreadsheet_id: str,
        gid: int,
        dimension: str,
        start_index: int,
        end_index: int,
    ) -> None:
        span = {
            "sheetId": int(gid),
            "dimension": dimension,
            "startIndex": start_index,
            "endIndex": end_index,
        }
        self.batch_update(spreadsheet_id, [{request_kind: {"range": span}}])

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return json.loads(self._request(method, path, body))

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, accept: str = "application/json"
    ) -> bytes:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(  # noqa: S310 - the URL is the emulator's, http(s)
            f"{self.url}/_emulator{path}", data=data, method=method
        )
        request.add_header("Accept", accept)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                payload: bytes = response.read()
                return payload
        except urllib.error.HTTPError as error:
            raise EmulatorAdminError(
                f"emulator admin {method} {path} failed with {error.code}: {_message(error)}",
                status=error.code,
            ) from None
        except (urllib.error.URLError, OSError) as error:
            raise EmulatorAdminError(
                f"emulator at {self.url} is unreachable: {error}", status=None
            ) from None


def _message(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read())
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return error.reason if isinstance(error.reason, str) else "error"
