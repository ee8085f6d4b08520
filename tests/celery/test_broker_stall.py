"""A broker that accepts connections and never answers (a stalled Redis, a half-open
proxy) holds no send for longer than the socket bounds: neither the Celery app's (a full
install's web app, a worker sending its next flush) nor the slim install's kombu one."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from celery import Celery

from sheetsync.celery.config import config_for
from sheetsync.celery.dispatcher import CeleryDispatcher
from sheetsync.dispatch import QUEUE_DEFAULT, Dispatcher, FlushTask
from sheetsync.settings import Settings
from sheetsync.task_messages import SOCKET_OPTIONS, KombuDispatcher

pytestmark = pytest.mark.slow  # each send waits out the socket timeout

#: Time the send gets before the test calls it hung: far past the socket's bounds.
HUNG_AFTER_S = 60.0


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A TCP port that accepts and then says nothing; its redis:// URL."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # closed at the end of the test
                return
            accepted.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        server.close()
        for connection in accepted:
            connection.close()


def _celery(url: str) -> Dispatcher:
    app = Celery("stall-test")
    app.conf.update(config_for(Settings(broker_url=url, redis_url=url)))
    return CeleryDispatcher(app)


def _kombu(url: str) -> Dispatcher:
    return KombuDispatcher(url)


@pytest.mark.parametrize("dispatcher", [_celery, _kombu], ids=["celery", "kombu"])
def test_a_send_to_a_silent_broker_fails_within_the_socket_bounds(
    silent_broker: str, dispatcher: Callable[[str], Dispatcher]
) -> None:
    outcome: list[BaseException | None] = []

    def send() -> None:
        try:
            dispatcher(silent_broker).send_flush(FlushTask("token", QUEUE_DEFAULT, 0.0))
        except Exception as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    started = time.monotonic()
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.join(HUNG_AFTER_S)
    elapsed = time.monotonic() - started

    assert not thread.is_alive(), f"the send still waits after {HUNG_AFTER_S:g} s"
    [error] = outcome
    assert error is not None, "a broker that never answers took the message"
    # It waited for the broker's answer for a socket timeout, at least: a bound, not a
    # refusal before any wait.
    assert elapsed >= SOCKET_OPTIONS["socket_timeout"]
