"""Wrong tokens to the console are slowed down per address, and the right token is never
refused or slowed (issue 29, A): behind a reverse proxy or Docker's userland proxy every
client shares one address, the operator's too.

The console is served in this process (uvicorn on a free port, real HTTP) so that each
test gives the tarpit its own delays and watches it; other clients are other loopback
addresses (127.0.0.2, ...).
"""

from __future__ import annotations

import base64
import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import uvicorn
from support.console import TOKEN, Console, free_port
from support.waiting import wait_until

from sheetsync.settings import Settings
from sheetsync.web import create_app
from sheetsync.web.throttle import LoginThrottle

WRONG = "Bearer " + "w" * 40
#: Any guarded path: the stylesheet reads no database.
PATH = "/static/console.css"
#: Longer than any test: a wrong answer held this long is one the tarpit holds.
FOREVER_S = 3600.0


@pytest.fixture
def serve(
    pipeline_env: Callable[..., dict[str, str]],
) -> Iterator[Callable[[LoginThrottle], Console]]:
    """``serve(throttle)``: the console app with ``throttle``, on a free loopback port."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def serve(throttle: LoginThrottle) -> Console:
        pipeline_env(WEB_TOKEN=TOKEN)
        app = create_app(Settings.load(), sample_interval_s=60, throttle=throttle)
        port = free_port()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            proxy_headers=False,
            # Requests still held by the tarpit are cancelled when the test ends.
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        wait_until(lambda: server.started)
        return Console(f"http://127.0.0.1:{port}", TOKEN)

    yield serve
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=30)


def held_request(console: Console, source: str, auth: str, timeout: float = 120) -> int:
    """GET ``PATH`` with ``auth`` from ``source``, waiting as long as the server holds it
    (up to ``timeout``); the status (0: the server or the client gave up first)."""
    host, port = console.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(
        host, int(port), timeout=timeout, source_address=(source, 0)
    )
    try:
        connection.request("GET", PATH, headers={"Authorization": auth})
        return connection.getresponse().status
    except OSError:
        return 0
    finally:
        connection.close()


def test_the_right_token_gets_in_at_once_from_an_address_that_keeps_failing(serve):
    throttle = LoginThrottle(1, FOREVER_S)  # after one free wrong token, each is held
    console = serve(throttle)
    shared = "127.0.0.1"  # a proxy's address: the operator and a guesser behind it

    assert console.request(PATH, auth=WRONG, source=shared).status == 401  # the free one
    assert console.request(PATH, source=shared).status == 200

    held: list[Future[int]] = []
    pool = ThreadPoolExecutor(max_workers=8)
    try:
        for n in range(1, 7):
            held.append(pool.submit(held_request, console, shared, WRONG))
            wait_until(lambda n=n: throttle.tarpitted == n)
            # The right token, as a bearer token and as the basic-auth password, while
            # the address's wrong ones wait in the tarpit for an hour: in at once.
            started = time.monotonic()
            assert console.request(PATH, source=shared).status == 200
            assert console.request(PATH, auth=_basic(TOKEN), source=shared).status == 200
            assert time.monotonic() - started < FOREVER_S
            assert throttle.failures(shared) == n + 1  # a success forgets no failure
        assert not any(request.done() for request in held)  # the wrong ones are slowed
        assert throttle.tarpitted == 6

        # Another address starts with its own free wrong token, answered at once.
        assert console.request(PATH, auth=WRONG, source="127.0.0.2").status == 401
    finally:
        pool.shutdown(wait=False)  # the server's end releases what the tarpit holds


def _basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()


def test_each_further_wrong_token_is_answered_later_up_to_the_cap(serve, caplog):
    caplog.set_level(logging.WARNING, logger="sheetsync.web.auth")
    throttle = LoginThrottle(1, 0.2, max_delay_s=0.4)
    console = serve(throttle)
    guesser = "127.0.0.3"

    waited = []
    for _ in range(4):
        started = time.monotonic()
        assert console.request(PATH, auth=WRONG, source=guesser).status == 401
        waited.append(time.monotonic() - started)
        assert console.request(PATH, source=guesser).status == 200
    # Lower bounds only: a slow machine answers later, never earlier.
    assert waited[1] >= 0.2
    assert waited[2] >= 0.4 and waited[3] >= 0.4
    assert [throttle.failed("elsewhere") for _ in range(4)] == [0.0, 0.2, 0.4, 0.4]
    # A request without credentials (a browser before its prompt) is no wrong token.
    assert console.request(PATH, auth=None, source=guesser).status == 401
    assert throttle.failures(guesser) == 4
    warnings = [r.getMessage() for r in caplog.records if r.name == "sheetsync.web.auth"]
    assert warnings == ["console: wrong tokens keep coming; answering them late"]  # once
    assert not any("127.0.0" in warning for warning in warnings)  # no address


def test_a_full_tarpit_answers_wrong_tokens_at_once_and_the_right_one_still_gets_in(serve):
    throttle = LoginThrottle(0, FOREVER_S, max_delay_s=FOREVER_S, max_tarpitted=2)
    console = serve(throttle)
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        held = [pool.submit(held_request, console, f"127.0.0.{n}", WRONG) for n in (4, 5)]
        wait_until(lambda: throttle.tarpitted == 2)

        flood = console.request(PATH, auth=WRONG, source="127.0.0.6")
        assert flood.status == 429
        assert flood.headers["retry-after"] == str(int(FOREVER_S))
        assert console.request(PATH, source="127.0.0.6").status == 200
        assert console.request(PATH, source="127.0.0.4").status == 200
        assert throttle.tarpitted == 2 and not any(request.done() for request in held)
    finally:
        pool.shutdown(wait=False)


def test_a_guesser_that_hangs_up_frees_its_place_in_the_tarpit(serve):
    throttle = LoginThrottle(0, FOREVER_S, max_delay_s=FOREVER_S, max_tarpitted=1)
    console = serve(throttle)
    host, port = console.url.removeprefix("http://").split(":")
    guesser = http.client.HTTPConnection(host, int(port), timeout=60)
    guesser.request("GET", PATH, headers={"Authorization": WRONG})
    wait_until(lambda: throttle.tarpitted == 1)

    guesser.close()  # it gives up

    wait_until(lambda: throttle.tarpitted == 0)
    assert throttle.failures("127.0.0.1") == 1
