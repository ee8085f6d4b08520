"""Helpers shared by the emulator's handlers: the state key, JSON answers, dropping."""

from __future__ import annotations

import functools
import json
from typing import Any

from aiohttp import web

from sheets_emulator.api_errors import ApiError
from sheets_emulator.state import EmulatorState

#: Where the application keeps its :class:`EmulatorState`.
STATE_KEY = web.AppKey("state", EmulatorState)

_dumps = functools.partial(json.dumps, ensure_ascii=False)


def json_response(payload: Any, status: int = 200) -> web.Response:
    """JSON as Google sends it: UTF-8, not ASCII-escaped."""
    return web.json_response(payload, status=status, dumps=_dumps)


def error_response(state: EmulatorState, error: ApiError) -> web.Response:
    """A Google-style error body, counted in the stats by status."""
    state.stats.record_error(error.status)
    return json_response(error.body, error.status)


def base_url(request: web.Request) -> str:
    """``http://host:port`` as the client reached us."""
    return f"{request.scheme}://{request.host}"


def drop_connection(request: web.Request) -> web.Response:
    """Close the connection so the client gets no response at all.

    aiohttp skips writing the returned response to a closed transport.
    """
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=204)


def json_body(raw_body: bytes) -> dict[str, Any]:
    """The request's JSON object ({} when there is no body); 400 when it is not JSON."""
    if not raw_body.strip():
        return {}
    try:
        body = json.loads(raw_body)
    except ValueError as error:
        raise ApiError.invalid_argument(f"Invalid JSON payload received. {error}") from error
    if not isinstance(body, dict):
        raise ApiError.invalid_argument("Invalid JSON payload received. Expected an object.")
    return body
