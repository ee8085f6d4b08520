"""Who may use the console, and proof that an action came from one of its own pages.

Every request is HTTP: a WebSocket is refused before it is accepted, with or without
the token (the console has none), and only the lifespan (start-up and shutdown) passes
unguarded.

Auth: with ``SHEETSYNC_WEB_TOKEN`` set, every request must carry it, as
``Authorization: Bearer <token>`` or as the basic-auth password (any user name), on any
address; a refusal is a 401 with ``WWW-Authenticate: Basic`` so a browser prompts. The
token is checked first, and the right one always gets in at once; a wrong one is
answered late, the later the more wrong tokens its client address sent recently (the
tarpit of :mod:`sheetsync.web.throttle`). A request without credentials (a browser's
first) is not a failure.
Without a token the console serves loopback only, and answers only requests whose
``Host`` is a loopback name: a page of another site that rebinds its DNS name to
127.0.0.1 could otherwise read the console (and its CSRF token) as same-origin.

CSRF: a browser sends basic-auth credentials with a cross-site form post too, so every
action (POST) needs two things. A hidden field holding HMAC-SHA256(a key made at
start-up, the auth token): no other site can read it from our pages, it needs no
cookie or server-side session, and it dies with the token or the process. And an
``Origin`` (else ``Referer``) naming this console's own host when the browser sends one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import math
import secrets
import time
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sheetsync.web.throttle import LoginThrottle, client_key

log = logging.getLogger(__name__)
#: The realm a browser's password prompt shows.
REALM = "sheetsync console"
#: Seconds between two warnings about wrong tokens of one kind.
WARNING_INTERVAL_S = 60.0
#: The hidden form field that carries the CSRF token.
CSRF_FIELD = "csrf_token"
#: Sent with every answer: nothing but our own stylesheet and script load (no inline
#: script or style), the script fetches only the console's own pages, no page may frame
#: the console, and forms post only to it.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this
    machine only: localhost, 127.0.0.0/8 or ::1. Other names are not resolved."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port."""
    return urlsplit(f"//{host_header}").hostname or ""


def presented_token(authorization: str | None) -> str | None:
    """The token an ``Authorization`` header carries (bearer, or basic password)."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        _, colon, password = decoded.partition(":")
        return password if colon else None
    return None


class Guard:
    """ASGI middleware: the auth rules above, before any route runs."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, throttle: LoginThrottle | None = None
    ) -> None:
        self.app = app
        self._token_digest = hashlib.sha256(token.encode()).digest() if token else None
        self.throttle = throttle if throttle is not None else LoginThrottle()
        #: When each warning was last logged: a flood logs one line a minute, not one a guess.
        self._warned_at: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # start-up and shutdown: not a request
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            # The console serves no WebSocket: refuse one before accepting it (the
            # server answers the handshake 403), whoever asks. Other scopes are unknown.
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self._guarded(scope, receive, send_secured)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        refusal: PlainTextResponse | None = None
        if self._token_digest is not None:
            refusal = await self._refusal(scope, receive, headers.get("authorization"))
        elif not is_loopback(host_name(headers.get("host", ""))):
            refusal = PlainTextResponse(
                "this console answers loopback requests only "
                "(set SHEETSYNC_WEB_TOKEN to serve other addresses)\n",
                status_code=403,
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _refusal(
        self, scope: Scope, receive: Receive, authorization: str | None
    ) -> PlainTextResponse | None:
        """None when ``authorization`` carries the token; else the answer that refuses
        the request, after the tarpit held it for a wrong token."""
        if self.accepts(authorization):
            return None
        if authorization:
            client = client_key((scope.get("client") or ("", 0))[0])
            if not await self._hold(client, receive):
                seconds = math.ceil(self.throttle.max_delay_s)
                self._warn("full", "console: the tarpit is full; answering wrong tokens at once")
                return PlainTextResponse(
                    f"too many wrong tokens: try again in {seconds} s\n",
                    status_code=429,
                    headers={"Retry-After": str(seconds)},
                )
            if self.throttle.failures(client) > self.throttle.allowed:
                # The address is left out: it is personal information.
                self._warn("slowed", "console: wrong tokens keep coming; answering them late")
        return PlainTextResponse(
            "authentication required: send SHEETSYNC_WEB_TOKEN as a bearer token "
            "or as the basic-auth password\n",
            status_code=401,
            headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
        )

    async def _hold(self, client: str, receive: Receive) -> bool:
        """The tarpit's :meth:`LoginThrottle.wrong_token`, cut short when the client
        hangs up: a guesser that gives up frees its place, and a stopping server waits
        for no one. The request is refused, so its body is read here, unused."""
        held = asyncio.ensure_future(self.throttle.wrong_token(client))
        gone = asyncio.ensure_future(_hang_up(receive))
        try:
            await asyncio.wait((held, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            held.cancel()  # no-op once it is done
        return held.result() if held.done() and not held.cancelled() else True

    def _warn(self, topic: str, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at.get(topic, -math.inf) >= WARNING_INTERVAL_S:
            self._warned_at[topic] = now
            log.warning("%s", message)

    def accepts(self, authorization: str | None) -> bool:
        assert self._token_digest is not None
        presented = presented_token(authorization)
        # Digests of equal length: the comparison's time depends neither on where the
        # two first differ nor on the length presented.
        digest = hashlib.sha256((presented or "").encode()).digest()
        return hmac.compare_digest(digest, self._token_digest) and presented is not None


async def _hang_up(receive: Receive) -> None:
    """Returns when the client disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass


class Csrf:
    """The CSRF token of this process for the configured auth token, and its checks."""

    def __init__(self, token: str | None) -> None:
        key = secrets.token_bytes(32)
        self.value = hmac.new(key, b"csrf\0" + (token or "").encode(), hashlib.sha256).hexdigest()

    def valid(self, submitted: object) -> bool:
        return isinstance(submitted, str) and hmac.compare_digest(
            submitted.encode(), self.value.encode()
        )


def same_origin(headers: Headers) -> bool:
    """Whether the ``Origin`` (else ``Referer``) of a post names this console's host.
    A request with neither (a script, not a browser) passes: the CSRF token decides."""
    host = headers.get("host", "").lower()
    origin = headers.get("origin")
    if origin is not None:
        return origin != "null" and urlsplit(origin).netloc.lower() == host
    referer = headers.get("referer")
    if referer is not None:
        return urlsplit(referer).netloc.lower() == host
    return True
