"""One JSON POST to an operator's webhook: no redirect followed, one deadline per call,
a capped read of the answer.

``urllib.request`` follows redirects (a 302 turns the POST into a GET to wherever the
answer points, ``http://`` or an internal address) and its timeout bounds each socket
operation, not the call: a name lookup is not bounded at all, each address of a name gets
the whole timeout to connect, and a server that drips a byte a second holds the caller
for as long as it likes. Here the standard library's ``http.client`` sends the request,
and one deadline covers every phase:

- the name is looked up in a thread of its own, waited on no longer than the deadline
  (``getaddrinfo`` cannot be interrupted; a lookup that outlives its call ends in the
  background, and at most :data:`MAX_LOOKUPS` run at once);
- each address is connected to with what is left of the deadline;
- a timer shuts the connected socket down when the deadline passes, whatever the call is
  blocked in: a proxy's CONNECT, the TLS handshake, sending, reading the answer
  (:class:`sheetsync.deadlines.SocketDeadline`, shared with the Sheets transport).

A 3xx is a refusal. The answer's status decides; of its body at most :data:`BODY_CAP`
bytes are read (within the deadline), the rest is left unread, so a server that sends an
endless body neither fills memory nor turns a 2xx into a failure. ``HTTPS_PROXY`` and
``NO_PROXY`` are honoured (a CONNECT tunnel), as urllib did. Hand-written because no
well-kept client offers a deadline for the whole call: httpx, urllib3 and requests all
time each read.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any
from urllib.parse import urlsplit

from sheetsync.deadlines import SocketDeadline
from sheetsync.errors import SheetSyncError

#: The most of an answer's body read. The status is the answer; the body is read only so
#: a server sees its answer taken, and never more than this.
BODY_CAP = 64 * 1024
#: Name lookups running at once, at most. A lookup that outlives its call still holds a
#: thread until the system resolver gives up; past this many, a call fails at once.
MAX_LOOKUPS = 16

#: One ``getaddrinfo`` entry: family, type, protocol, canonical name, socket address.
Address = tuple[int, int, int, str, Any]
#: Looks up ``(host, port)``; raises OSError (``socket.gaierror``) when it cannot.
Resolver = Callable[[str, int], Sequence[Address]]


class _Slots:
    """The name lookups this process may run at once."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.semaphore = threading.BoundedSemaphore(MAX_LOOKUPS)


_lookups = _Slots()
# A forked child has none of its parent's lookup threads, which would never give their
# slots back.
os.register_at_fork(after_in_child=_lookups.reset)


class WebhookError(SheetSyncError):
    """A webhook did not take a POST: refused, redirected, unreachable or too slow."""


def system_resolver(host: str, port: int) -> Sequence[Address]:
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


def post_json(
    url: str, payload: Any, *, deadline_s: float, resolver: Resolver = system_resolver
) -> None:
    """POST ``payload`` as JSON to ``url``; raise :class:`WebhookError` (one line that
    never repeats the URL, which may hold a secret) unless it answers 2xx in time.
    ``resolver`` looks names up (the system's, unless a test slows it down)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookError("webhook URL is not http(s)")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    body = json.dumps(payload).encode("utf-8")
    call = _Call(deadline_s, resolver)
    connection = None
    try:
        connection = _connection(parts.scheme, parts.hostname, parts.port, call)
        connection.request("POST", target, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        status = response.status
        # The status is the answer: a body that stalls, breaks off or runs on changes nothing.
        with contextlib.suppress(OSError, http.client.HTTPException):
            response.read(BODY_CAP)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if call.over():
            raise WebhookError(f"webhook gave no answer within {deadline_s:g} s") from None
        raise WebhookError(f"webhook unreachable: {type(exc).__name__}") from None
    finally:
        call.finish()
        if connection is not None:
            connection.close()
    if 300 <= status < 400:
        raise WebhookError(f"webhook answered {status}: redirects are not followed")
    if not 200 <= status < 300:
        raise WebhookError(f"webhook answered {status}")


class _Call:
    """One call's deadline, and the name lookup and connect it covers."""

    def __init__(self, deadline_s: float, resolver: Resolver) -> None:
        self.deadline_s = deadline_s
        self.ends = time.monotonic() + deadline_s
        self.resolver = resolver
        self._deadline = SocketDeadline(deadline_s, "the webhook's deadline passed")

    def remaining_s(self) -> float:
        """What is left of the deadline; TimeoutError when nothing is."""
        left = self.ends - time.monotonic()
        if left <= 0 or self._deadline.expired:
            raise TimeoutError("the webhook's deadline passed")
        return left

    def over(self) -> bool:
        return self._deadline.expired or time.monotonic() >= self.ends

    def open(self, address: tuple[str, int], *_: object) -> socket.socket:
        """``socket.create_connection`` for http.client, within the deadline: the name
        looked up in a thread waited on no longer than the deadline, each address tried
        with what is left of it."""
        host, port = address
        error: OSError = OSError("no address for the webhook's host")
        for family, kind, proto, _name, sockaddr in _lookup(self, host, port):
            sock = socket.socket(family, kind, proto)
            try:
                self._deadline.watch(sock)
                sock.settimeout(self.remaining_s())
                sock.connect(sockaddr)
                sock.settimeout(self.remaining_s())
            except OSError as exc:
                sock.close()
                error = exc
                if self.over():
                    raise
                continue
            return sock
        raise error

    def finish(self) -> None:
        self._deadline.finish()


def _lookup(call: _Call, host: str, port: int) -> Sequence[Address]:
    slots = _lookups.semaphore
    if not slots.acquire(blocking=False):
        raise WebhookError(f"webhook unreachable: {MAX_LOOKUPS} name lookups still running")
    found: Future[Sequence[Address]] = Future()

    def run() -> None:
        try:
            found.set_result(call.resolver(host, port))
        except Exception as exc:
            found.set_exception(exc)
        finally:
            slots.release()

    threading.Thread(target=run, name="sheetsync-webhook-lookup", daemon=True).start()
    return found.result(timeout=call.remaining_s())


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, call: _Call) -> None:
        super().__init__(host, port, timeout=call.deadline_s)
        # http.client opens its socket through this attribute (CPython 3.6 to 3.13 alike):
        # the one place where the deadline can cover the name lookup and the connect.
        self._create_connection = call.open


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, call: _Call, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=call.deadline_s, context=context)
        self._create_connection = call.open


def _connection(
    scheme: str, host: str, port: int | None, call: _Call
) -> http.client.HTTPConnection:
    """A connection to ``host``; https through the environment's proxy, if one is set.
    Plain http is allowed to loopback addresses only (the settings check), which no proxy
    could reach."""
    if scheme == "http":
        return _HTTPConnection(host, port or 80, call)
    context = ssl.create_default_context()
    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get("https")
    if not proxy:
        return _HTTPSConnection(host, port or 443, call, context)
    tunnel = _HTTPSConnection(*_proxy_address(proxy), call, context)
    tunnel.set_tunnel(host, port or 443)
    return tunnel


def _proxy_address(proxy: str) -> tuple[str, int]:
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if not parts.hostname:
        raise WebhookError("the proxy setting (HTTPS_PROXY) names no host")
    return parts.hostname, parts.port or 8080
