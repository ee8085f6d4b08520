"""The console's doors: no request without the token, no action without the form's
CSRF token from the console's own origin, and no start on a public address without it."""

from __future__ import annotations

import base64
import http.client
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from support.console import free_port, running_console
from support.waiting import wait_until

from sheetsync.deadletters import store
from sheetsync.models import DeadLetterReason, DeadLetterStatus
from sheetsync.redis_keys import BufferKey
from sheetsync.web.auth import Guard, is_loopback, presented_token

SHEETSYNC = str(Path(sys.executable).with_name("sheetsync"))


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def parked(world):
    """A PENDING dead letter whose error message holds markup."""
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 2)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    with world.pipeline.sessions.begin() as session:
        return store.park(
            session, key, ids, DeadLetterReason.CREDENTIAL, "<b>boom</b> & co", delay_s=3600
        ).id


def test_requests_without_the_token_are_refused(pipeline_env, parked, world):
    with running_console(pipeline_env()) as console:
        for auth in (None, "Bearer wrong-token", _basic("ops", "wrong-token"), "Token x"):
            answer = console.request("/", auth=auth)
            assert answer.status == 401, auth
            assert answer.headers["www-authenticate"].startswith("Basic ")
            assert "owner1" not in answer.body
        assert console.request("/dead-letters", auth=None).status == 401
        assert console.request("/static/console.css", auth=None).status == 401
        assert console.request("/", auth=_basic("anyone", console.token)).status == 200
        page = console.request(f"/dead-letters/{parked}")
        assert page.status == 200
        assert "&lt;b&gt;boom&lt;/b&gt; &amp; co" in page.body and "<b>boom" not in page.body
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]

        confirm = console.request(f"/dead-letters/{parked}/purge")
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', confirm.body)[1]
        own = {"Origin": console.url, "Content-Type": "application/x-www-form-urlencoded"}
        for data, headers in (
            (b"", own),  # no CSRF token
            (b"csrf_token=" + b"0" * 64, own),  # a wrong one
            (f"csrf_token={csrf}".encode(), {**own, "Origin": "http://evil.example"}),
            (f"csrf_token={csrf}".encode(), {**own, "Origin": "null"}),
        ):
            refused = console.request(f"/dead-letters/{parked}/purge", data=data, headers=headers)
            assert refused.status == 403, (data, headers)
        # Without the auth token, even a right CSRF token is refused at the door.
        stranger = console.request(
            f"/dead-letters/{parked}/purge",
            auth=None,
            data=f"csrf_token={csrf}".encode(),
            headers=own,
        )
        assert stranger.status == 401
        [entry] = world.dead_letters()
        assert entry.status is DeadLetterStatus.PENDING

        done = console.request(
            f"/dead-letters/{parked}/purge", data=f"csrf_token={csrf}".encode(), headers=own
        )
        assert done.status == 200 and "Purged" in done.body  # after the 303 to the entry
        [entry] = world.dead_letters()
        assert entry.status is DeadLetterStatus.PURGED


def test_a_public_address_needs_a_token(pipeline_env):
    env = {k: v for k, v in __import__("os").environ.items() if k != "SHEETSYNC_WEB_TOKEN"}
    env.update(pipeline_env())
    for host in ("0.0.0.0", "::", "192.0.2.10"):
        result = subprocess.run(
            [SHEETSYNC, "web", "--host", host, "--port", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1
        assert "SHEETSYNC_WEB_TOKEN" in result.stderr


@pytest.mark.parametrize("length", [1, 31])
def test_a_short_token_stops_the_console_at_start(pipeline_env, length):
    env = {**__import__("os").environ, **pipeline_env(), "SHEETSYNC_WEB_TOKEN": "Q" * length}

    result = subprocess.run(
        [SHEETSYNC, "web", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 1, result
    [line] = result.stderr.splitlines()
    assert line.startswith("error: SHEETSYNC_WEB_TOKEN: must be at least 32 characters"), line
    assert "Q" not in line  # the value itself is not shown


def test_loopback_and_presented_tokens():
    assert all(map(is_loopback, ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "10.0.0.1", "example.com", "")))
    assert presented_token("Bearer abc") == "abc"
    assert presented_token(_basic("u", "p:w")) == "p:w"
    assert presented_token("Basic !!!") is None
    assert presented_token(None) is None


def test_a_redis_outage_is_a_banner_not_a_stack_trace(pipeline_env, parked):
    env = {**pipeline_env(), "SHEETSYNC_REDIS_URL": "redis://127.0.0.1:1/0"}
    with running_console(env) as console:
        for path in ("/", "/buffers", "/links"):
            page = console.request(path)
            assert page.status == 200, path
            assert "Could not read everything" in page.body and "cannot reach Redis" in page.body
            assert "Traceback" not in page.body
        # The database still answers: dead letters are listed.
        listed = console.request("/dead-letters")
        assert listed.status == 200 and f'href="/dead-letters/{parked}"' in listed.body


def _guarded_websocket_app(token: str, lifespan_ran: list[str]) -> Starlette:
    """A console-guarded app with a WebSocket route that would accept anyone (the console
    has none today), and a lifespan that notes it ran."""

    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("in")
        await websocket.close()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        lifespan_ran.append("started")
        yield

    return Starlette(
        routes=[WebSocketRoute("/ws", echo)],
        middleware=[Middleware(Guard, token=token)],
        lifespan=lifespan,
    )


def test_websockets_are_refused_before_they_are_accepted():
    token = "t" * 40
    lifespan_ran: list[str] = []
    app = _guarded_websocket_app(token, lifespan_ran)
    with _served(app) as url:
        assert lifespan_ran == ["started"]  # the lifespan is no request: it passes
        for auth in (None, "Bearer wrong-token", f"Bearer {token}"):
            assert _websocket_handshake(url, "/ws", auth) == 403, auth


@contextmanager
def _served(app: Starlette) -> Iterator[str]:
    """``app`` served by uvicorn in this process, on a free loopback port."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_the_console_refuses_a_websocket_handshake(pipeline_env):
    """A real handshake against ``sheetsync web``: no 101 Switching Protocols, with or
    without the token."""
    with running_console(pipeline_env()) as console:
        for auth in (None, "Bearer wrong-token", f"Bearer {console.token}"):
            assert _websocket_handshake(console.url, "/", auth) == 403, auth


def _websocket_handshake(url: str, path: str, auth: str | None) -> int:
    """The status a WebSocket upgrade request to ``url`` + ``path`` is answered with."""
    host, port = url.removeprefix("http://").split(":")
    headers = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": base64.b64encode(b"sixteen byte key").decode(),
        "Sec-WebSocket-Version": "13",
    }
    if auth is not None:
        headers["Authorization"] = auth
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()
