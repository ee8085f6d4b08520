"""One JSON POST to an operator's webhook: no redirect followed, one deadline per call.

``urllib.request`` follows redirects (a 302 turns the POST into a GET to wherever the
answer points, ``http://`` or an internal address) and its timeout bounds each socket
read, so a server that drips a byte a second holds the caller for as long as it likes.
Here the standard library's ``http.client`` sends the request and a timer shuts the
socket down when the call's deadline passes, whatever phase it is in; a 3xx is a
refusal. ``HTTPS_PROXY`` and ``NO_PROXY`` are honoured (a CONNECT tunnel), as urllib
did. Hand-written because no well-kept client offers a deadline for the whole call:
httpx, urllib3 and requests all time each read.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from sheetsync.errors import SheetSyncError


class WebhookError(SheetSyncError):
    """A webhook did not take a POST: refused, redirected, unreachable or too slow."""


def post_json(url: str, payload: Any, *, deadline_s: float) -> None:
    """POST ``payload`` as JSON to ``url``; raise :class:`WebhookError` (one line that
    never repeats the URL, which may hold a secret) unless it answers 2xx in time."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookError("webhook URL is not http(s)")
    deadline = time.monotonic() + deadline_s
    connection = _connection(parts.scheme, parts.hostname, parts.port, deadline_s)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    body = json.dumps(payload).encode("utf-8")
    expired = threading.Event()
    watchdog = threading.Timer(deadline_s, _cut, args=(connection, expired))
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request("POST", target, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set() or time.monotonic() >= deadline:
            raise WebhookError(f"webhook gave no answer within {deadline_s:g} s") from None
        raise WebhookError(f"webhook unreachable: {type(exc).__name__}") from None
    finally:
        watchdog.cancel()
        connection.close()
    if 300 <= status < 400:
        raise WebhookError(f"webhook answered {status}: redirects are not followed")
    if not 200 <= status < 300:
        raise WebhookError(f"webhook answered {status}")


def _connection(
    scheme: str, host: str, port: int | None, timeout_s: float
) -> http.client.HTTPConnection:
    """A connection to ``host``; https through the environment's proxy, if one is set.
    Plain http is allowed to loopback addresses only (the settings check), which no proxy
    could reach."""
    if scheme == "http":
        return http.client.HTTPConnection(host, port or 80, timeout=timeout_s)
    context = ssl.create_default_context()
    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get("https")
    if not proxy:
        return http.client.HTTPSConnection(host, port or 443, timeout=timeout_s, context=context)
    tunnel = http.client.HTTPSConnection(*_proxy_address(proxy), timeout=timeout_s, context=context)
    tunnel.set_tunnel(host, port or 443)
    return tunnel


def _proxy_address(proxy: str) -> tuple[str, int]:
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if not parts.hostname:
        raise WebhookError("the proxy setting (HTTPS_PROXY) names no host")
    return parts.hostname, parts.port or 8080


def _cut(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The deadline passed: end the call now, in whatever read or write it is blocked."""
    expired.set()
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed: nothing left to end
            sock.shutdown(socket.SHUT_RDWR)
