"""The Sheets v4 endpoints: which path is which call, and what each call does.

Paths follow Google's discovery document. The range arrives percent-encoded in the
path (``Sheet1%21A1%3AZ1:append``), so paths are split on the raw (encoded) form and
each segment is decoded on its own; ``:append`` is split off the decoded range from
the right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from multidict import MultiMapping

from sheets_emulator.api_errors import ApiError
from sheets_emulator.batch import batch_update
from sheets_emulator.faults import ENDPOINTS
from sheets_emulator.grid_data import get_by_data_filter
from sheets_emulator.partial import parse_fields
from sheets_emulator.quotas import Access
from sheets_emulator.state import EmulatorState, check_time_zone
from sheets_emulator.values import (
    append_values,
    batch_get_values,
    clear_values,
    get_values,
    update_values,
)
from sheets_emulator.values_batch import batch_clear_values, batch_update_values

API_PREFIX = "/v4/spreadsheets"
#: spreadsheets.get with grid data: cells with their formats, notes and metadata.
GRID_DATA_UNSUPPORTED = (
    "The Sheets API emulator does not serve grid data from spreadsheets.get "
    "(includeGridData, sheets.data fields): read cell values with values.get, "
    "values.batchGet or spreadsheets.getByDataFilter."
)


@dataclass(frozen=True)
class Call:
    """One Sheets API request, recognised from its method and path."""

    endpoint: str
    spreadsheet_id: str = ""
    range_text: str = ""

    @property
    def access(self) -> Access:
        return "read" if ENDPOINTS[self.endpoint] == "read" else "write"


@dataclass(frozen=True)
class CallContext:
    """What a handler needs besides the call: who asks, with what query and body."""

    state: EmulatorState
    account: str
    query: MultiMapping[str]
    body: dict[str, Any]
    base_url: str


#: ``/v4/spreadsheets/{id}/values:...`` calls on several ranges at once, by method and verb.
_BATCH_CALLS = {
    ("GET", "values:batchGet"): "values.batchGet",
    ("POST", "values:batchUpdate"): "values.batchUpdate",
    ("POST", "values:batchClear"): "values.batchClear",
}


def recognise(method: str, raw_path: str) -> Call | None:
    """The call for ``method`` and the still-encoded path, or None when there is none."""
    if not raw_path.startswith(API_PREFIX):
        return None
    rest = raw_path[len(API_PREFIX) :]
    if rest in ("", "/"):
        return Call("spreadsheets.create") if method == "POST" else None
    if not rest.startswith("/"):
        return None
    segments = rest[1:].split("/")
    head = unquote(segments[0])
    if len(segments) == 1:
        spreadsheet_id, colon, verb = head.partition(":")
        if not colon and method == "GET":
            return Call("spreadsheets.get", spreadsheet_id)
        if verb == "batchUpdate" and method == "POST":
            return Call("spreadsheets.batchUpdate", spreadsheet_id)
        if verb == "getByDataFilter" and method == "POST":
            return Call("spreadsheets.getByDataFilter", spreadsheet_id)
        return None
    if len(segments) == 2:
        batch = _BATCH_CALLS.get((method, unquote(segments[1])))
        return None if batch is None else Call(batch, head)
    if len(segments) != 3 or segments[1] != "values" or not head:
        return None
    range_text = unquote(segments[2])
    if method == "POST" and range_text.endswith(":clear"):
        return Call("values.clear", head, range_text[: -len(":clear")])
    if method == "GET":
        return Call("values.get", head, range_text)
    if method == "PUT":
        return Call("values.update", head, range_text)
    if method == "POST" and range_text.endswith(":append"):
        return Call("values.append", head, range_text[: -len(":append")])
    return None


def handle(call: Call, context: CallContext) -> dict[str, Any]:
    """Run the call against the state; raises :class:`ApiError` for Google's errors."""
    return _HANDLERS[call.endpoint](call, context)


def _create(call: Call, context: CallContext) -> dict[str, Any]:
    body = context.body
    properties = body.get("properties") or {}
    sheets = body.get("sheets") or []
    if not isinstance(properties, dict) or not isinstance(sheets, list):
        raise ApiError.invalid_argument("Invalid JSON payload received.")
    sheet_properties = [
        (sheet.get("properties") or {}) if isinstance(sheet, dict) else {} for sheet in sheets
    ]
    time_zone = properties.get("timeZone")
    time_zone = None if time_zone is None else check_time_zone(time_zone)
    spreadsheet = context.state.create_spreadsheet(
        context.account, properties.get("title"), sheet_properties or None
    )
    if time_zone is not None:
        spreadsheet.time_zone = time_zone
    return spreadsheet.resource(context.base_url)


def _get(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    if _flag(context.query.get("includeGridData")) or _names_grid_data(context.query):
        raise ApiError.google(501, GRID_DATA_UNSUPPORTED)
    return spreadsheet.resource(context.base_url)


def _names_grid_data(query: MultiMapping[str]) -> bool:
    """Whether ``fields`` asks for ``sheets.data`` (cells with their formats and notes)."""
    sheets = parse_fields(query.get("fields", "")).get("sheets")
    return sheets is not None and "data" in sheets


def _get_by_data_filter(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    fields = context.query.get("fields", "")
    return get_by_data_filter(spreadsheet, context.body, context.base_url, fields)


def _batch_update(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return batch_update(spreadsheet, context.body, context.base_url)


def _values_get(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return get_values(
        spreadsheet,
        call.range_text,
        context.query.get("valueRenderOption", "FORMATTED_VALUE"),
        context.query.get("majorDimension", "ROWS"),
        context.query.get("dateTimeRenderOption", "SERIAL_NUMBER"),
    )


def _values_batch_get(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return batch_get_values(
        spreadsheet,
        context.query.getall("ranges", []),
        context.query.get("valueRenderOption", "FORMATTED_VALUE"),
        context.query.get("majorDimension", "ROWS"),
        context.query.get("dateTimeRenderOption", "SERIAL_NUMBER"),
    )


def _values_batch_update(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return batch_update_values(spreadsheet, context.body)


def _values_batch_clear(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return batch_clear_values(spreadsheet, context.body)


def _values_clear(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return clear_values(spreadsheet, call.range_text)


def _values_update(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    body = dict(context.body)
    body["includeValuesInResponse"] = _flag(context.query.get("includeValuesInResponse"))
    return update_values(spreadsheet, call.range_text, body, context.query.get("valueInputOption"))


def _values_append(call: Call, context: CallContext) -> dict[str, Any]:
    spreadsheet = context.state.spreadsheet_for(call.spreadsheet_id, context.account)
    return append_values(
        spreadsheet,
        call.range_text,
        context.body,
        context.query.get("valueInputOption"),
        insert_data_option=context.query.get("insertDataOption", "OVERWRITE"),
        include_values=_flag(context.query.get("includeValuesInResponse")),
    )


def _flag(value: str | None) -> bool:
    return (value or "").lower() == "true"


_HANDLERS: dict[str, Callable[[Call, CallContext], dict[str, Any]]] = {
    "spreadsheets.create": _create,
    "spreadsheets.get": _get,
    "spreadsheets.getByDataFilter": _get_by_data_filter,
    "spreadsheets.batchUpdate": _batch_update,
    "values.get": _values_get,
    "values.batchGet": _values_batch_get,
    "values.batchUpdate": _values_batch_update,
    "values.batchClear": _values_batch_clear,
    "values.clear": _values_clear,
    "values.update": _values_update,
    "values.append": _values_append,
}
