"""``POST /token``: Google's OAuth 2 token endpoint, its ``refresh_token`` and
``authorization_code`` grants (the codes come from :mod:`sheets_emulator.consent`).

Stats count refreshes (``token``: refreshes and failures); a code's exchange is not a
refresh and is not counted. Faults of kind ``token`` apply to both grants.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web

from sheets_emulator.accounts import ACCESS_TOKEN_LIFETIME_S, DEFAULT_SCOPE
from sheets_emulator.api_errors import OAuthError
from sheets_emulator.consent import consent_book, id_token, new_refresh_token
from sheets_emulator.responses import STATE_KEY, drop_connection, json_response
from sheets_emulator.state import EmulatorState


async def token(request: web.Request) -> web.StreamResponse:
    """Exchange a refresh token or an authorization code for an access token (faults of
    kind ``token`` apply)."""
    state = request.app[STATE_KEY]
    form = _with_basic_auth(await _token_form(request), request.headers.get("Authorization"))
    refreshing = form.get("grant_type") != "authorization_code"
    if refreshing:
        account = state.accounts.account_for_refresh_token(form.get("refresh_token", ""))
    else:
        account = consent_book(state).account_of(form.get("code", ""))
    fault = state.faults.take("token", account)
    if fault is not None:
        state.stats.record_fault(fault.action)
        if fault.action == "error":
            if refreshing:
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
        if refreshing:
            state.stats.record_token(ok=False)
        response = json_response(error.body, error.status)
    else:
        if refreshing:
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


def _with_basic_auth(form: dict[str, str], authorization: str | None) -> dict[str, str]:
    """The client's id and secret may come in HTTP Basic auth instead of the body."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() != "basic" or form.get("client_id"):
        return form
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return form
    client_id, _, client_secret = decoded.partition(":")
    return form | {
        "client_id": unquote_plus(client_id),
        "client_secret": unquote_plus(client_secret),
    }


def _grant(state: EmulatorState, form: dict[str, str]) -> dict[str, Any]:
    grant_type = form.get("grant_type", "")
    if grant_type == "authorization_code":
        return _code_grant(state, form)
    if grant_type != "refresh_token":
        raise OAuthError(400, "unsupported_grant_type", f"Invalid grant_type: {grant_type}")
    if not form.get("client_id"):
        raise OAuthError(401, "invalid_client", "The OAuth client was not found.")
    refresh_token = form.get("refresh_token", "")
    if not refresh_token:
        raise OAuthError(400, "invalid_request", "Missing required parameter: refresh_token")
    _, access_token = state.accounts.refresh(refresh_token, state.clock(), form["client_id"])
    return {
        "access_token": access_token,
        "expires_in": ACCESS_TOKEN_LIFETIME_S,
        "token_type": "Bearer",
        "scope": form.get("scope") or DEFAULT_SCOPE,
    }


def _code_grant(state: EmulatorState, form: dict[str, str]) -> dict[str, Any]:
    """Spend an authorization code: an access token, the refresh token when the consent
    gave one, and an ID token when ``openid`` was granted."""
    client_id = form.get("client_id", "")
    if not client_id:
        raise OAuthError(401, "invalid_client", "The OAuth client was not found.")
    for name in ("code", "redirect_uri"):
        if not form.get(name):
            raise OAuthError(400, "invalid_request", f"Missing required parameter: {name}")
    now = state.clock()
    grant = consent_book(state).redeem(
        form["code"],
        client_id=client_id,
        redirect_uri=form["redirect_uri"],
        code_verifier=form.get("code_verifier"),
        now=now,
    )
    # Registering a token restores a revoked account: the person has just consented again.
    # Without offline access the app gets no refresh token; the access token is minted
    # from one that is never shown.
    refresh_token = new_refresh_token()
    state.accounts.register(grant.account_id, refresh_token)
    _, access_token = state.accounts.refresh(refresh_token, now, client_id)
    payload: dict[str, Any] = {
        "access_token": access_token,
        "expires_in": ACCESS_TOKEN_LIFETIME_S,
        "scope": " ".join(grant.scopes),
        "token_type": "Bearer",
    }
    if grant.offline:
        payload["refresh_token"] = refresh_token
    if "openid" in grant.scopes:
        payload["id_token"] = id_token(grant, form.get("client_secret", ""))
    return payload
