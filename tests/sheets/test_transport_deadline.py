"""One deadline bounds a whole Sheets request, connect to last byte: a server that drips
its answer a byte at a time (each socket read well within the transport's timeout) does
not hold a flush past its lease."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from sheetsync.errors import TransientError
from sheetsync.settings import Settings
from sheetsync.sheets.client import SheetsClient
from sheetsync.sheets.transport import SingleShotHttp

#: How often the server sends one byte of its answer, and for how long at most.
DRIP_EVERY_S = 0.2
DRIP_FOR_S = 20.0
#: The deadline the requests get, and what they may take beyond it (slow machines).
DEADLINE_S = 1.5
MARGIN_S = 1.0


class DripServer:
    """Answers every request on 127.0.0.1 with a 200 sent one byte every 0.2 s."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            received = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in received:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    received += chunk
            self.requests += 1
            answer = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 1000 + b"\r\n"
            answer += b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            ends = time.monotonic() + DRIP_FOR_S
            for byte in answer:
                if self.stopped.is_set() or time.monotonic() > ends:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up: cut
                time.sleep(DRIP_EVERY_S)

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()


@pytest.fixture
def drip() -> Iterator[DripServer]:
    server = DripServer()
    yield server
    server.stop()


@pytest.mark.timing
def test_a_dripped_answer_ends_at_the_deadline_not_per_read(drip):
    http = SingleShotHttp(timeout=1.0)  # each read gets a byte within 0.2 s
    http.deadline = time.monotonic() + DEADLINE_S
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        http.request(f"{drip.url}/v4/spreadsheets/s/values/A:A:append", "POST", body=b"{}")
    elapsed = time.monotonic() - started
    assert drip.requests == 1
    assert DEADLINE_S - 0.1 < elapsed < DEADLINE_S + MARGIN_S


@pytest.mark.timing
def test_a_request_with_no_time_left_is_not_sent(drip):
    http = SingleShotHttp(timeout=1.0)
    http.deadline = time.monotonic() - 0.01
    with pytest.raises(TransientError) as raised:
        http.request(f"{drip.url}/v4/spreadsheets/s", "GET")
    assert raised.value.ambiguous is False
    time.sleep(0.3)
    assert drip.requests == 0


@pytest.fixture
def dripping_client(drip, emulator, admin):
    settings = Settings.load(
        google_api_endpoint=drip.url,
        google_token_uri=emulator.token_uri,  # the access token comes at once
        google_timeout_s=1,
        google_client_id="client",
        google_client_secret="secret",
        development=True,
    )
    token = f"refresh-drip-{uuid.uuid4().hex}"
    admin.add_account("drip", token)
    client = SheetsClient(token, settings=settings)
    client.authorize()
    return client


@pytest.mark.timing
def test_a_dripped_append_ends_within_the_deadline_as_an_ambiguous_transient(dripping_client):
    dripping_client.deadline = time.monotonic() + DEADLINE_S
    started = time.monotonic()
    with pytest.raises(TransientError) as raised:
        dripping_client.append_rows("s", "'Sheet1'!A:A", [["a1", "x"]])
    elapsed = time.monotonic() - started
    assert raised.value.ambiguous is True  # it may have landed: the intent decides
    assert raised.value.status is None
    assert elapsed < DEADLINE_S + MARGIN_S


@pytest.mark.timing
def test_a_dripped_read_ends_within_the_deadline_and_is_not_ambiguous(dripping_client):
    dripping_client.deadline = time.monotonic() + DEADLINE_S
    started = time.monotonic()
    with pytest.raises(TransientError) as raised:
        dripping_client.read_values("s", "'Sheet1'!A:A")
    assert raised.value.ambiguous is False
    assert time.monotonic() - started < DEADLINE_S + MARGIN_S
