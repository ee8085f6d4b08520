"""The aiohttp application: the Sheets API, the OAuth token endpoint and the admin API.

A Sheets API request goes through, in order: recognise the call, authenticate the
bearer token (401), injected faults (error / hang / drop), the quota of the Cloud project
of the token's OAuth client (429), a ``refuse`` fault (400), the handler, then a
``garble`` fault (the answer's ``updatedRange``). A ``drop`` fault lets the request be
served (quota and data: a write is committed) and then closes the connection instead of
answering.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from sheets_emulator.admin_routes import add_admin_routes
from sheets_emulator.api import Call, CallContext, handle, recognise
from sheets_emulator.api_errors import ApiError
from sheets_emulator.consent import AUTHORIZATION_PATH, authorize
from sheets_emulator.faults import Fault, garble, refusal
from sheets_emulator.oauth import token
from sheets_emulator.partial import parse_fields, select
from sheets_emulator.quotas import Access, QuotaExceededError, quota_exceeded
from sheets_emulator.responses import (
    STATE_KEY,
    base_url,
    drop_connection,
    error_response,
    json_body,
    json_response,
)
from sheets_emulator.state import EmulatorState

#: Largest request body aiohttp reads at all (its 413 above); below it, the Sheets API's
#: own limit (EmulatorState.max_request_bytes, Google's 10 MiB) answers a 400.
MAX_BODY_BYTES = 32 * 1024 * 1024


async def sheets_api(request: web.Request) -> web.StreamResponse:
    """Every ``/v4/spreadsheets...`` request."""
    state = request.app[STATE_KEY]
    # Quotas count a request when it arrives, as Google's front end does, not after its
    # body was read: a large append must not look later than it was.
    arrived = state.clock()
    call = recognise(request.method, request.rel_url.raw_path)
    if call is None:
        return error_response(state, ApiError.not_found())
    try:
        token = state.accounts.access_token(request.headers.get("Authorization"), state.clock())
    except ApiError as error:
        state.stats.record_request(call.endpoint, call.access, None)
        return error_response(state, error)
    account = token.account_id
    project = state.projects.project_of(token.client_id)
    state.stats.record_request(call.endpoint, call.access, account)
    # Read the whole body first: a client that times out during a hang closes the
    # connection, and the request it already sent must still be served after the hang.
    raw_body = await request.read()
    if len(raw_body) > state.max_request_bytes:
        return error_response(state, request_too_large(state.max_request_bytes))
    try:
        body: dict[str, Any] | None = json_body(raw_body)
    except ApiError:
        body = None  # answered with its 400 when served, after the faults and the quota
    fault = state.faults.take(call.endpoint, account, body)
    if fault is not None:
        state.stats.record_fault(fault.action)
        if fault.action == "error":
            return error_response(state, _fault_error(state, fault, call.access, project))
        if fault.action == "hang":
            await asyncio.sleep(fault.seconds)
    try:
        state.quotas.take(account, call.access, arrived, project)
    except QuotaExceededError as error:
        state.stats.record_rate_limited(account, error.scope, project)
        response = error_response(state, error)
    else:
        state.stats.record_served(account, call.access, arrived, call.endpoint)
        response = _serve(request, state, call, account, body if body is not None else raw_body)
    if fault is not None and fault.action == "drop":
        return drop_connection(request)
    return response


def _serve(
    request: web.Request,
    state: EmulatorState,
    call: Call,
    account: str,
    body: dict[str, Any] | bytes,
) -> web.Response:
    """Run the handler; ``body`` is the parsed JSON, or the raw bytes that did not parse."""
    try:
        if isinstance(body, bytes):
            body = json_body(body)  # raises its 400
        refused = state.faults.take(call.endpoint, account, body, actions=("refuse",))
        if refused is not None:
            state.stats.record_fault(refused.action)
            raise refusal(refused, body)
        context = CallContext(state, account, request.query, body, base_url(request))
        result = handle(call, context)
        fields = request.query.get("fields")
        if fields:
            result = select(result, parse_fields(fields))
    except ApiError as error:
        return error_response(state, error)
    garbled = state.faults.take(call.endpoint, account, body, actions=("garble",))
    if garbled is not None:
        state.stats.record_fault(garbled.action)
        garble(garbled, call.endpoint, result)
    return json_response(result)


def request_too_large(limit: int) -> ApiError:
    """Google's answer to a body above its size limit: before quotas, nothing written."""
    return ApiError.google(400, f"Request payload size exceeds the limit: {limit} bytes.")


def _fault_error(state: EmulatorState, fault: Fault, access: Access, project: str) -> ApiError:
    if fault.status == 429:
        limit = state.quotas.limits.limit(access, "account")
        return quota_exceeded(access, "account", limit, project)
    return ApiError.google(fault.status)


async def _to_admin_index(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/_emulator/")


def make_app(state: EmulatorState | None = None) -> web.Application:
    """The whole emulator as one aiohttp application."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[STATE_KEY] = state or EmulatorState()
    app.router.add_get("/", _to_admin_index)
    app.router.add_get("/_emulator", _to_admin_index)
    app.router.add_post("/token", token)
    app.router.add_get(AUTHORIZATION_PATH, authorize)
    app.router.add_route("*", "/v4/spreadsheets{tail:.*}", sheets_api)
    add_admin_routes(app)
    return app
