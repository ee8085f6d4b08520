"""The console as operators run it: ``sheetsync web`` in a subprocess, on a free port."""

from __future__ import annotations

import functools
import http.client
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from sheetsync.deadletters import store
from sheetsync.dev.seed import SeededForm
from sheetsync.models import DeadLetterReason
from sheetsync.redis_keys import BufferKey
from support.lifetime import dies_with_this_process
from support.waiting import wait_until
from support.world import Sheet, World

SHEETSYNC = str(Path(sys.executable).with_name("sheetsync"))
#: 40 characters: the console refuses a token shorter than 32.
TOKEN = "console-test-token-3f9a-5d0c-44e1-b7a6e2"
#: How often the refresh test's console refreshes its pages. The other tests keep the
#: production default (5 s): their pictures show it, and no refresh swaps what they read.
REFRESH_S = 0.5


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: dict[str, str]


@dataclass(frozen=True)
class Console:
    url: str
    token: str
    #: What an https console is verified with (None: plain http).
    tls: ssl.SSLContext | None = None

    def authorize(self, browser: WebDriver) -> None:
        """Make ``browser`` send the token with every request, its pages' own included."""
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd(
            "Network.setExtraHTTPHeaders",
            {"headers": {"Authorization": f"Bearer {self.token}"}},
        )

    def request(
        self,
        path: str,
        *,
        auth: str | None = "bearer",
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        source: str | None = None,
    ) -> Answer:
        """``path`` with the token (or ``auth``: a header value, None for none), from
        the loopback address ``source`` (127.x.y.z) when given: another client."""
        sent = dict(headers or {})
        if auth == "bearer":
            sent["Authorization"] = f"Bearer {self.token}"
        elif auth is not None:
            sent["Authorization"] = auth
        request = urllib.request.Request(self.url + path, data=data, headers=sent)
        opener = urllib.request.build_opener(*_handlers(source, self.tls))
        try:
            with opener.open(request, timeout=10) as response:
                return _answer(response.status, response.read(), response.headers.items())
        except urllib.error.HTTPError as error:
            return _answer(error.code, error.read(), error.headers.items())


def _handlers(source: str | None, tls: ssl.SSLContext | None) -> list[urllib.request.BaseHandler]:
    """urllib's handlers, connecting from ``source`` and verifying https with ``tls``."""
    address = (source, 0) if source else None

    class FromSource(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            connection = functools.partial(http.client.HTTPConnection, source_address=address)
            return self.do_open(connection, req)

    class SecureFromSource(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            connection = functools.partial(
                http.client.HTTPSConnection, source_address=address, context=tls
            )
            return self.do_open(connection, req)

    return [FromSource(), SecureFromSource()]


def _answer(status: int, body: bytes, headers: Iterable[tuple[str, str]]) -> Answer:
    return Answer(status, body.decode(), {name.lower(): value for name, value in headers})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_console(
    env: dict[str, str],
    *,
    token: str = TOKEN,
    refresh_s: float = 5.0,
    args: Sequence[str] = (),
    tls: ssl.SSLContext | None = None,
) -> Iterator[Console]:
    """``sheetsync web`` with ``args`` added; ``tls``: it serves https (``args`` name
    the certificate), verified with this context."""
    port = free_port()
    environment = {**os.environ, **env, "SHEETSYNC_WEB_TOKEN": token}
    process = subprocess.Popen(
        dies_with_this_process(
            [
                SHEETSYNC,
                "web",
                "--port",
                str(port),
                "--sample-interval",
                "0.5",
                "--refresh-interval",
                str(refresh_s),
                *args,
            ]
        ),
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    scheme = "https" if tls else "http"
    console = Console(f"{scheme}://127.0.0.1:{port}", token, tls)

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"sheetsync web exited: {process.stdout.read()}")  # type: ignore[union-attr]
        try:
            return console.request("/static/console.css").status == 200
        except OSError:
            return False

    try:
        wait_until(up, timeout=20, interval=0.1)
        yield console
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def park(
    world: World,
    form: SeededForm,
    sheet: Sheet,
    ids: list[str],
    reason: DeadLetterReason,
    message: str = "Sheets API 503 UNAVAILABLE: Google kept failing",
    *,
    delay_s: float = 3600,
) -> int:
    """Park ``ids`` of ``form`` for ``sheet`` as the flush would; returns the entry's id
    (the buffer's open entry for ``reason``, new or merged into)."""
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    with world.pipeline.sessions.begin() as session:
        entry = store.park(session, key, ids, reason, message, delay_s=delay_s)
        assert entry is not None
        return entry.id
