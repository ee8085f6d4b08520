"""A webhook call's one deadline covers every phase: the name lookup, connecting to each
address, a proxy's CONNECT, the TLS handshake, the answer; and an answer's body is read
only up to a cap, the status deciding.

Real servers on 127.0.0.1 do the slow parts: a listener whose backlog is full (a connect
that hangs), servers that drip their answer a byte every 0.2 s, one that sends an endless
body. The name lookup is the one part slowed by an injected resolver: a slow DNS server
is not worth its weight here."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from support.waiting import wait_until

from sheetsync.webhooks import (
    BODY_CAP,
    MAX_LOOKUPS,
    Address,
    WebhookError,
    post_json,
    system_resolver,
)

#: Bytes a dripping server sends, one every DRIP_S: 8 s in all, far past any deadline here.
DRIP_BYTES = 40
DRIP_S = 0.2
#: Generous for a 1 s deadline on a machine half as fast; every slow part here lasts 5 s
#: or more without the deadline.
BOUND_S = 2.5


class Listener:
    """A TCP server on 127.0.0.1 that runs ``handle(connection)`` in a thread of its own
    for each connection it accepts."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.handle = handle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._run, args=(connection,), daemon=True).start()

    def _run(self, connection: socket.socket) -> None:
        # OSError: the client hung up, what most tests want.
        with connection, contextlib.suppress(OSError):
            self.handle(connection)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listen() -> Iterator[Callable[[Callable[[socket.socket], None]], Listener]]:
    made: list[Listener] = []

    def start(handle: Callable[[socket.socket], None]) -> Listener:
        made.append(Listener(handle))
        return made[-1]

    yield start
    for listener in made:
        listener.close()


def loopback(host: str, port: int) -> Sequence[Address]:
    """Every name is 127.0.0.1."""
    return system_resolver("127.0.0.1", port)


def read_request(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def drip(data: bytes) -> Callable[[socket.socket], None]:
    def handle(connection: socket.socket) -> None:
        connection.recv(65536)  # the request, or a TLS ClientHello
        for byte in data:
            connection.sendall(bytes([byte]))
            time.sleep(DRIP_S)

    return handle


def ok(connection: socket.socket) -> None:
    read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")


#: A TLS handshake record announcing 16 KiB, then zeros: a client waits for the rest.
TLS_RECORD_STARTED = b"\x16\x03\x03\x40\x00" + bytes(DRIP_BYTES - 5)
HTTP_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".ljust(DRIP_BYTES, b" ")


@pytest.mark.timing
def test_a_name_lookup_that_hangs_is_bounded_by_the_deadline(listen):
    server = listen(ok)
    release = threading.Event()
    asked: list[tuple[str, int]] = []

    def hangs(host: str, port: int) -> Sequence[Address]:
        asked.append((host, port))
        release.wait(30)
        return loopback(host, port)

    started = time.monotonic()
    try:
        with pytest.raises(WebhookError, match="no answer within 1 s"):
            post_json(f"http://hook.test:{server.port}/", {}, deadline_s=1, resolver=hangs)
        took = time.monotonic() - started
    finally:
        release.set()

    assert asked == [("hook.test", server.port)]
    assert took < BOUND_S  # the lookup would take 30 s


def test_the_resolver_names_the_address_a_call_connects_to(listen):
    server = listen(ok)
    post_json(f"http://hook.test:{server.port}/", {}, deadline_s=5, resolver=loopback)
    assert server.accepted == 1


def test_lookups_that_hang_hold_a_bounded_number_of_threads(listen):
    """Each call that gave up on a hanging lookup leaves its thread behind; past
    MAX_LOOKUPS of them a call fails at once rather than start another."""
    server = listen(ok)
    release = threading.Event()
    running: list[str] = []

    def hangs(host: str, port: int) -> Sequence[Address]:
        running.append(host)
        release.wait(30)
        return loopback(host, port)

    url = f"http://hook.test:{server.port}/"
    try:
        for _ in range(MAX_LOOKUPS):
            with pytest.raises(WebhookError, match="no answer within"):
                post_json(url, {}, deadline_s=0.05, resolver=hangs)
        with pytest.raises(WebhookError, match=f"{MAX_LOOKUPS} name lookups still running"):
            post_json(url, {}, deadline_s=5, resolver=hangs)
        assert len(running) == MAX_LOOKUPS
    finally:
        release.set()
    # The lookups ended: their slots are back.
    wait_until(lambda: _delivers(url), timeout=5)


def _delivers(url: str) -> bool:
    try:
        post_json(url, {}, deadline_s=5, resolver=loopback)
    except WebhookError:
        return False
    return True


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """The port of a listener that never accepts and whose backlog is full: a connect to
    it hangs (the kernel drops its SYN)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in [*fillers, listener]:
        sock.close()


@pytest.mark.timing
def test_connecting_to_every_address_of_a_name_shares_the_deadline(full_backlog):
    def five_addresses(host: str, port: int) -> Sequence[Address]:
        return list(loopback(host, port)) * 5

    started = time.monotonic()
    with pytest.raises(WebhookError, match="no answer within 1 s"):
        post_json(f"http://hook.test:{full_backlog}/", {}, deadline_s=1, resolver=five_addresses)

    assert time.monotonic() - started < BOUND_S  # 1 s per address would be 5 s


@pytest.mark.timing
@pytest.mark.parametrize(
    ("scheme", "answer"),
    [("http", HTTP_ANSWER), ("https", TLS_RECORD_STARTED)],
    ids=["http-answer", "tls-handshake"],
)
def test_a_slow_lookup_then_a_server_that_drips_share_one_deadline(
    listen, monkeypatch, scheme, answer
):
    for name in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)  # straight to the server, no proxy
    dripping = listen(drip(answer))

    def slow(host: str, port: int) -> Sequence[Address]:
        time.sleep(0.5)
        return loopback(host, port)

    started = time.monotonic()
    with pytest.raises(WebhookError, match="no answer within 1 s"):
        post_json(f"{scheme}://hook.test:{dripping.port}/", {}, deadline_s=1, resolver=slow)

    assert dripping.accepted == 1
    assert time.monotonic() - started < BOUND_S  # the drip lasts 8 s


@pytest.mark.timing
def test_a_proxy_that_drips_its_connect_answer_is_bounded(listen, monkeypatch):
    proxy = listen(drip(b"HTTP/1.1 200 Connection established\r\n\r\n".ljust(DRIP_BYTES)))
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    started = time.monotonic()
    with pytest.raises(WebhookError, match="no answer within 1 s"):
        post_json("https://hook.test/", {}, deadline_s=1, resolver=loopback)

    assert proxy.accepted == 1
    assert time.monotonic() - started < BOUND_S


#: What an endless body sends before it stops and waits: enough to fill memory without a
#: cap (and bounded, so a client without one cannot take the machine's).
ENDLESS_BYTES = 32 * 2**20


def endless_body(status: int, framing: str, total: int) -> Callable[[socket.socket], None]:
    """An answer whose body runs on for ``total`` bytes, then waits for the client."""
    block = b"x" * 65536

    def handle(connection: socket.socket) -> None:
        read_request(connection)
        length = (
            "Transfer-Encoding: chunked"
            if framing == "chunked"
            else "Content-Length: 1000000000000"
        )
        connection.sendall(f"HTTP/1.1 {status} X\r\n{length}\r\n\r\n".encode())
        sent = 0
        while sent < total:
            part = block[: total - sent]
            framed = b"%x\r\n%s\r\n" % (len(part), part) if framing == "chunked" else part
            connection.sendall(framed)
            sent += len(part)
        connection.settimeout(30)
        connection.recv(1)  # until the client hangs up

    return handle


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_an_endless_body_is_read_to_the_cap_and_a_2xx_is_delivered(listen, framing):
    server = listen(endless_body(200, framing, ENDLESS_BYTES))

    post_json(f"http://127.0.0.1:{server.port}/", {}, deadline_s=10)


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_an_endless_body_does_not_hide_a_failure(listen, framing):
    server = listen(endless_body(500, framing, ENDLESS_BYTES))

    with pytest.raises(WebhookError, match="answered 500"):
        post_json(f"http://127.0.0.1:{server.port}/", {}, deadline_s=10)


def test_the_read_stops_at_the_cap(listen):
    """The server sends one byte past the cap, then waits: a read past the cap would wait
    with it until the deadline."""
    server = listen(endless_body(200, "length", BODY_CAP + 1))

    post_json(f"http://127.0.0.1:{server.port}/", {}, deadline_s=10)
