"""The operator's webhooks (alerts, the owner hook): no redirect is followed, one deadline
bounds the whole call, an alert never waits on the caller's path (not even the web app's
emit, inside its transaction), and a notification task with an unknown topic is refused.
Real HTTP servers on loopback stand in for Slack and for where a redirect would lead."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.waiting import wait_until

from sheetsync import alerts, emit_answer_submitted, notify
from sheetsync.celery.tasks import notify_owner
from sheetsync.dev.seed import link_sheet
from sheetsync.settings import Settings
from sheetsync.webhooks import WebhookError, post_json


class Server:
    """A loopback HTTP server whose POST handler is ``answer(handler)``; it records
    every request line it gets (method and path)."""

    def __init__(self, answer: Any) -> None:
        requests: list[tuple[str, str]] = []
        self.requests = requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def _record(self) -> None:
                requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length", 0))
                self.body = self.rfile.read(length)

            def do_POST(self) -> None:
                self._record()
                answer(self)

            def do_GET(self) -> None:
                self._record()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        server.close()


def serve(servers: list[Server], answer: Any) -> Server:
    server = Server(answer)
    servers.append(server)
    return server


def redirect_to(target: str) -> Any:
    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", f"{target}/internal")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def drip(handler: http.server.BaseHTTPRequestHandler) -> None:
    """An answer a byte at a time, each well inside any per-read timeout."""
    try:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass  # the client hung up: what the test wants


def hang(handler: http.server.BaseHTTPRequestHandler) -> None:
    time.sleep(3)
    handler.send_response(200)
    handler.end_headers()


def ok(handler: http.server.BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


def test_a_redirect_is_refused_and_never_followed(servers):
    internal = serve(servers, ok)
    hook = serve(servers, redirect_to(internal.url))

    with pytest.raises(WebhookError, match="answered 302: redirects are not followed"):
        post_json(hook.url + "/hook", {"text": "x"}, deadline_s=2)

    assert hook.requests == [("POST", "/hook")]
    assert internal.requests == []  # neither a GET nor a POST reached where it pointed


def test_the_owner_hook_refuses_a_redirect_too(servers, monkeypatch):
    internal = serve(servers, ok)
    hook = serve(servers, redirect_to(internal.url))
    monkeypatch.setenv("SHEETSYNC_OWNER_HOOK", hook.url + "/owner")
    notification = notify.Notification.from_json(
        {"topic": notify.LINK_FAILED, "owner": "u1", "time": "2026-11-25T00:00:00+00:00"}
    )

    with pytest.raises(notify.HookError, match="redirects are not followed"):
        notify.deliver(notification, settings=Settings.load())
    assert internal.requests == []


@pytest.mark.timing
def test_one_deadline_bounds_the_whole_call_against_a_server_that_drips(servers):
    dripping = serve(servers, drip)
    started = time.monotonic()

    with pytest.raises(WebhookError, match="no answer within 1 s"):
        post_json(dripping.url, {"text": "x"}, deadline_s=1)

    assert time.monotonic() - started < 1.5  # the 40 dripped bytes would take 8 s


def test_a_2xx_is_delivered_with_the_json_body(servers):
    seen: list[bytes] = []

    def record(handler: Any) -> None:
        seen.append(handler.body)
        ok(handler)

    hook = serve(servers, record)
    post_json(hook.url + "/hook?x=1", {"text": "hello"}, deadline_s=2)
    assert hook.requests == [("POST", "/hook?x=1")] and json.loads(seen[0]) == {"text": "hello"}


@pytest.mark.timing
def test_an_alert_never_waits_on_the_emit_path(world, pipeline_env, pipeline, servers):
    slow = serve(servers, hang)
    pipeline_env(alert_webhook_url=slow.url + "/slack", alert_timeout_s=5)
    form = world.form()
    world.sheet(form)
    with pipeline.sessions.begin() as session:
        link_sheet(session, form, "not a valid id!", 0)  # the emit alerts about it
    [answer_id] = world.answers(form, 1)

    started = time.monotonic()
    result = emit_answer_submitted(answer_id)
    took = time.monotonic() - started

    assert len(result.invalid) == 1
    assert took < 1.0  # the webhook takes 3 s to answer
    wait_until(lambda: slow.requests == [("POST", "/slack")], timeout=5)
    alerts.drain_alerts(5)


def test_a_notification_with_an_unknown_topic_is_refused(notify_dir, pipeline_env):
    pipeline_env(owner_hook="support.notify_hooks:record")
    forged = {
        "topic": "password_reset",
        "owner": "u1",
        "message": "Your account is locked: log in at https://evil.example",
        "time": "2026-11-25T00:00:00+00:00",
    }

    assert notify_owner.run(forged) == "refused: unknown topic"
    assert list(notify_dir.iterdir()) == []  # the hook was never called


def test_a_notification_carries_its_topics_message_not_the_tasks(notify_dir, pipeline_env):
    pipeline_env(owner_hook="support.notify_hooks:record")
    forged = {
        "topic": notify.CREDENTIAL_INVALID,
        "owner": "u1",
        "message": "Your account is locked: log in at https://evil.example",
        "time": "2026-11-25T00:00:00+00:00",
    }

    assert notify_owner.run(forged).endswith("delivered")
    [written] = list(notify_dir.iterdir())
    assert "evil.example" not in written.read_text()
    assert notify.MESSAGES[notify.CREDENTIAL_INVALID] in written.read_text()
