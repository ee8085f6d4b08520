"""``POST /token``: the refresh_token grant of Google's OAuth 2 token endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from sheets_emulator.accounts import ACCESS_TOKEN_LIFETIME_S, DEFAULT_SCOPE
from sheets_emulator.api_errors import OAuthError
from sheets_emulator.responses import STATE_KEY, drop_connection, json_response
from sheets_emulator.state import EmulatorState


async def token(request: web.Request) -> web.StreamResponse:
    """Exchange a refresh token for an access token (faults of kind ``token`` apply)."""
    state = request.app[STATE_KEY]
    form = await _token_form(request)
    refresh_token = form.get("refresh_token", "")
    fault = state.faults.take("token", state.accounts.account_for_refresh_token(refresh_token))
    if fault is not None:
        state.stats.record_fault(fault.action)
        if fault.action == "error":
            state.stats.record_token(ok=False)
            reason = _FAULT_REASONS.get(
                fault.status, "internal_failure" if fault.status >= 500 else "invalid_request"
            )
            return json_response(
                {"error": reason, "error_description": "Injected by the emulator."}, fault.status
            )
        if fault.action == "hang":
            await asyncio.sleep(fault.seconds)
    try:
        payload = _grant(state, form)
    except OAuthError as error:
        state.stats.record_token(ok=False)
        response = json_response(error.body, error.status)
    else:
        state.stats.record_token(ok=True)
        response = json_response(payload)
    if fault is not None and fault.action == "drop":
        return drop_connection(request)
    return response


#: OAuth error codes for injected token-endpoint errors. google-auth retries the
#: server-side ones (``internal_failure``, ``temporarily_unavailable``) with backoff.
_FAULT_REASONS = {
    400: "invalid_request",
    401: "invalid_client",
    429: "rate_limit_exceeded",
    503: "temporarily_unavailable",
}


async def _token_form(request: web.Request) -> dict[str, str]:
    if request.content_type == "application/json":
        try:
            data = await request.json()
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(key): str(value) for key, value in data.items()}
    form = await request.post()
    return {key: value for key, value in form.items() if isinstance(value, str)}


def _grant(state: EmulatorState, form: dict[str, str]) -> dict[str, Any]:
    grant_type = form.get("grant_type", "")
    if grant_type != "refresh_token":
        raise OAuthError(400, "unsupported_grant_type", f"Invalid grant_type: {grant_type}")
    if not form.get("client_id"):
        raise OAuthError(401, "invalid_client", "The OAuth client was not found.")
    refresh_token = form.get("refresh_token", "")
    if not refresh_token:
        raise OAuthError(400, "invalid_request", "Missing required parameter: refresh_token")
    _, access_token = state.accounts.refresh(refresh_token, state.clock())
    return {
        "access_token": access_token,
        "expires_in": ACCESS_TOKEN_LIFETIME_S,
        "token_type": "Bearer",
        "scope": form.get("scope") or DEFAULT_SCOPE,
    }
