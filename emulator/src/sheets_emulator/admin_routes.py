"""The admin API under ``/_emulator/``: accounts, spreadsheets, stats, faults, quotas,
projects.

Admin requests need no token and never count toward quotas or stats, and faults do not
apply to them. Errors use the same ``{"error": {"code", "message", "status"}}`` body as
the Sheets API. ``POST spreadsheets/{id}/batchUpdate``, ``PUT spreadsheets/{id}/values``
and ``POST spreadsheets/{id}/values:clear`` change a sheet as a person in the Sheets UI
would (the API's batchUpdate, values.update and values.clear, with the same bodies,
answers and 400s, but any owner).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from sheets_emulator.api_errors import ApiError
from sheets_emulator.batch import batch_update
from sheets_emulator.errors import EmulatorConfigError
from sheets_emulator.faults import parse_fault
from sheets_emulator.pages import index_page, sheet_page, spreadsheet_page
from sheets_emulator.responses import (
    STATE_KEY,
    base_url,
    json_body,
    json_response,
)
from sheets_emulator.sheets import Spreadsheet
from sheets_emulator.state import EmulatorState, check_time_zone
from sheets_emulator.values import (
    clear_values,
    formatted_rows,
    numeric_cells,
    update_values,
)

PREFIX = "/_emulator"


def _state(request: web.Request) -> EmulatorState:
    return request.app[STATE_KEY]


def _wants_html(request: web.Request) -> bool:
    requested = request.query.get("format")
    if requested is not None:
        return requested == "html"
    return "text/html" in request.headers.get("Accept", "")


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8")


def _required_text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError.invalid_argument(f"'{name}' must be a non-empty string")
    return value


def _spreadsheet(request: web.Request) -> Spreadsheet:
    spreadsheet = _state(request).spreadsheets.get(request.match_info["spreadsheet_id"])
    if spreadsheet is None:
        raise ApiError.not_found()
    return spreadsheet


@web.middleware
async def _admin_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
    except ApiError as error:
        return json_response(error.body, error.status)
    return response


async def index(request: web.Request) -> web.Response:
    spreadsheets = list(_state(request).spreadsheets.values())
    return _html(index_page(spreadsheets))


async def health(request: web.Request) -> web.Response:
    return json_response({"ok": True})


async def list_spreadsheets(request: web.Request) -> web.Response:
    state = _state(request)
    return json_response(
        {
            "spreadsheets": [
                spreadsheet.resource(base_url(request)) | {"owner": spreadsheet.owner}
                for spreadsheet in state.spreadsheets.values()
            ]
        }
    )


async def add_account(request: web.Request) -> web.Response:
    body = json_body(await request.read())
    account = _state(request).accounts.register(
        _required_text(body, "account_id"), _required_text(body, "refresh_token")
    )
    return json_response({"account_id": account.account_id, "revoked": account.revoked})


async def revoke_account(request: web.Request) -> web.Response:
    account_id = request.match_info["account_id"]
    if not _state(request).accounts.revoke(account_id):
        raise ApiError.not_found()
    return json_response({"account_id": account_id, "revoked": True})


async def create_spreadsheet(request: web.Request) -> web.Response:
    body = json_body(await request.read())
    owner = _required_text(body, "owner")
    titles = body.get("sheets")
    if titles is not None and (
        not isinstance(titles, list) or not all(isinstance(title, str) for title in titles)
    ):
        raise ApiError.invalid_argument("'sheets' must be a list of sheet titles")
    title = body.get("title")
    if title is not None and not isinstance(title, str):
        raise ApiError.invalid_argument("'title' must be a string")
    sheets = [{"title": sheet_title} for sheet_title in titles] if titles else None
    time_zone = body.get("time_zone")
    time_zone = None if time_zone is None else check_time_zone(time_zone)
    spreadsheet = _state(request).create_spreadsheet(owner, title, sheets)
    if time_zone is not None:
        spreadsheet.time_zone = time_zone
    return json_response(spreadsheet.resource(base_url(request)) | {"owner": owner})


async def get_spreadsheet(request: web.Request) -> web.Response:
    spreadsheet = _spreadsheet(request)
    if _wants_html(request):
        return _html(spreadsheet_page(spreadsheet))
    return json_response(spreadsheet.resource(base_url(request)) | {"owner": spreadsheet.owner})


async def delete_spreadsheet(request: web.Request) -> web.Response:
    spreadsheet = _spreadsheet(request)
    del _state(request).spreadsheets[spreadsheet.spreadsheet_id]
    return json_response({"spreadsheetId": spreadsheet.spreadsheet_id, "deleted": True})


async def edit_spreadsheet(request: web.Request) -> web.Response:
    """The body of the API's spreadsheets.batchUpdate; the same answer."""
    spreadsheet = _spreadsheet(request)
    body = json_body(await request.read())
    return json_response(batch_update(spreadsheet, body, base_url(request)))


async def write_values(request: web.Request) -> web.Response:
    """``{"range", "values", "valueInputOption"}`` (default ``USER_ENTERED``, as typed);
    the answer of the API's values.update."""
    spreadsheet = _spreadsheet(request)
    body = json_body(await request.read())
    range_text = _required_text(body, "range")
    input_option = body.get("valueInputOption", "USER_ENTERED")
    return json_response(update_values(spreadsheet, range_text, body, input_option))


async def clear_values_route(request: web.Request) -> web.Response:
    """``{"range"}``: the answer of the API's values.clear."""
    spreadsheet = _spreadsheet(request)
    body = json_body(await request.read())
    return json_response(clear_values(spreadsheet, _required_text(body, "range")))


async def sheet_view(request: web.Request) -> web.Response:
    spreadsheet = _spreadsheet(request)
    try:
        sheet = spreadsheet.sheet_by_id(int(request.match_info["sheet_id"]))
    except ValueError:
        sheet = None
    if sheet is None:
        raise ApiError.not_found()
    values = formatted_rows(sheet)
    if _wants_html(request):
        # ``?refresh=N``: the page reloads every N seconds (a demo watching rows arrive).
        refresh = request.query.get("refresh", "")
        every_s = int(refresh) if refresh.isdigit() and 0 < int(refresh) <= 60 else None
        return _html(sheet_page(spreadsheet, sheet, values, numeric_cells(sheet), every_s))
    return json_response(
        {
            "spreadsheetId": spreadsheet.spreadsheet_id,
            "sheetId": sheet.sheet_id,
            "title": sheet.title,
            "values": values,
        }
    )


async def stats(request: web.Request) -> web.Response:
    state = _state(request)
    snapshot = state.stats.snapshot(state.quotas.limits.window_s)
    snapshot["quota_usage"] = state.quotas.usage(state.clock(), state.projects.numbers())
    if request.query.get("times") == "1":
        # Every served request's time (seconds, the emulator's clock), for benchmarks.
        served = state.stats.served_times
        snapshot["served_times"] = sorted(served["read"] + served["write"])
        snapshot["served_times_by_access"] = {
            access: sorted(times) for access, times in served.items()
        }
        by_account: dict[str, dict[str, list[float]]] = {}
        for (account, access), times in state.stats.served_times_by_account.items():
            by_account.setdefault(account, {"read": [], "write": []})[access] = sorted(times)
        snapshot["served_times_by_account"] = by_account
        snapshot["served_times_by_kind"] = {
            kind: sorted(times) for kind, times in state.stats.served_times_by_kind.items()
        }
    return json_response(snapshot)


async def reset_stats(request: web.Request) -> web.Response:
    _state(request).stats.reset()
    return json_response({"reset": "stats"})


async def list_faults(request: web.Request) -> web.Response:
    return json_response({"faults": _state(request).faults.pending()})


async def add_fault(request: web.Request) -> web.Response:
    body = json_body(await request.read())
    try:
        fault = parse_fault(body)
    except ValueError as error:
        raise ApiError.invalid_argument(str(error)) from error
    state = _state(request)
    state.faults.add(fault)
    return json_response({"faults": state.faults.pending()})


async def clear_faults(request: web.Request) -> web.Response:
    _state(request).faults.clear()
    return json_response({"faults": []})


async def get_quotas(request: web.Request) -> web.Response:
    return json_response(_state(request).quotas.limits.as_dict())


async def set_quotas(request: web.Request) -> web.Response:
    body = json_body(await request.read())
    state = _state(request)
    try:
        state.quotas.limits = state.quotas.limits.updated(body)
    except (TypeError, EmulatorConfigError) as error:
        raise ApiError.invalid_argument(str(error)) from error
    return json_response(state.quotas.limits.as_dict())


async def get_projects(request: web.Request) -> web.Response:
    return json_response(_state(request).projects.assignments())


async def set_projects(request: web.Request) -> web.Response:
    """``{"<client id>": "<project number>"}``: put OAuth clients in Cloud projects
    (``null``: back in the default one); the others stay. Answers every assignment."""
    body = json_body(await request.read())
    projects = _state(request).projects
    try:
        projects.update(body)
    except EmulatorConfigError as error:
        raise ApiError.invalid_argument(str(error)) from error
    return json_response(projects.assignments())


async def get_settings(request: web.Request) -> web.Response:
    return json_response(_state(request).settings())


async def set_settings(request: web.Request) -> web.Response:
    """``{"max_cells": N, "time_zone": "Europe/Paris", "max_request_bytes": N}`` (any):
    the cell limit of every spreadsheet, the time zone of new ones, the largest request
    body the Sheets API takes."""
    body = json_body(await request.read())
    state = _state(request)
    state.update_settings(body)
    return json_response(state.settings())


async def reset_all(request: web.Request) -> web.Response:
    _state(request).reset()
    return json_response({"reset": "all"})


def add_admin_routes(app: web.Application) -> None:
    """Mount the admin API on ``app``; its errors are answered as JSON."""
    admin = web.Application(middlewares=[_admin_errors])
    admin[STATE_KEY] = app[STATE_KEY]
    routes = [
        web.get("/", index),
        web.get("/health", health),
        web.post("/accounts", add_account),
        web.post("/accounts/{account_id}/revoke", revoke_account),
        web.get("/spreadsheets", list_spreadsheets),
        web.post("/spreadsheets", create_spreadsheet),
        web.get("/spreadsheets/{spreadsheet_id}", get_spreadsheet),
        web.delete("/spreadsheets/{spreadsheet_id}", delete_spreadsheet),
        web.post("/spreadsheets/{spreadsheet_id}/batchUpdate", edit_spreadsheet),
        web.put("/spreadsheets/{spreadsheet_id}/values", write_values),
        web.post("/spreadsheets/{spreadsheet_id}/values:clear", clear_values_route),
        web.get("/spreadsheets/{spreadsheet_id}/sheets/{sheet_id}", sheet_view),
        web.get("/stats", stats),
        web.post("/stats/reset", reset_stats),
        web.get("/faults", list_faults),
        web.post("/faults", add_fault),
        web.delete("/faults", clear_faults),
        web.get("/quotas", get_quotas),
        web.put("/quotas", set_quotas),
        web.get("/projects", get_projects),
        web.put("/projects", set_projects),
        web.get("/settings", get_settings),
        web.put("/settings", set_settings),
        web.post("/reset", reset_all),
    ]
    admin.add_routes(routes)
    app.add_subapp(PREFIX, admin)
