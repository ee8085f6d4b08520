"""The HTTP transport under google-api-python-client: httplib2's interface on urllib3.

Why not httplib2 itself: when a server closes the connection without answering,
httplib2 re-sends the request once, whatever the method (it takes the close for a
stale keep-alive connection, and this path ignores ``httplib2.RETRIES``). For
``values.append`` that is a second append of the same rows, invisible to the caller.
Here every request is sent exactly once (``retries=False``); a dropped response
surfaces as an error, and the flush's write-ahead intent decides what landed.

A flush run sets a deadline (its lease's end, less a margin) that no request may
outlive. urllib3's timeout bounds each socket operation, not the call: a server that
drips its answer a byte at a time holds the caller as long as it likes. So, as
:mod:`sheetsync.webhooks` does for its POSTs, one deadline covers the whole request:
the connect is given what is left of it, and a timer shuts the request's socket down
when the deadline passes (:class:`sheetsync.deadlines.SocketDeadline`), whatever the
request is blocked in: the TLS handshake, sending, or reading the answer. A request cut
so raises :class:`TimeoutError` (a write's is ambiguous: it may have landed). The name
lookup stays bounded by the system resolver only, as before.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httplib2
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from sheetsync.deadlines import SocketDeadline
from sheetsync.errors import TransientError

#: Connections kept per host.
DEFAULT_POOL_SIZE = 4


class _Calls(threading.local):
    """The request this thread is sending, if it has a deadline."""

    current: SocketDeadline | None = None


_calls = _Calls()


def _watch(sock: socket.socket | None) -> None:
    call = _calls.current
    if call is not None and sock is not None:
        call.watch(sock)


class _WatchedHTTPConnection(HTTPConnection):
    """A connection whose socket the current request's deadline can shut down: a new
    one as soon as it is connected (before any TLS handshake), a kept-alive one when a
    request starts on it."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        try:
            _watch(sock)
        except TimeoutError:
            sock.close()
            raise
        return sock

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> None:
        _watch(self.sock)
        super().request(method, url, *args, **kwargs)


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    """The same, over TLS (the handshake is cut too: the socket is watched before it)."""


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class SingleShotHttp:
    """The subset of :class:`httplib2.Http` that googleapiclient and google-auth use."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        #: A monotonic time no request may outlive, connect to last byte (set around
        #: one call), or None: then ``timeout`` bounds each socket operation.
        self.deadline: float | None = None
        self.follow_redirects = False
        self.redirect_codes: frozenset[int] = frozenset()
        self._pool = urllib3.PoolManager(
            num_pools=8,
            maxsize=DEFAULT_POOL_SIZE,
            retries=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
        )
        self._pool.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def request(
        self,
        uri: str,
        method: str = "GET",
        body: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        redirections: int = 0,
        connection_type: Any = None,
    ) -> tuple[httplib2.Response, bytes]:
        if self.deadline is None:
            return self._send(uri, method, body, headers, self.timeout)
        left = self.deadline - time.monotonic()
        if left <= 0:
            # Never sent: a request that could outlive the run's lease is not started.
            raise TransientError("no time left in the lease for this request", ambiguous=False)
        call = _calls.current = SocketDeadline(left, "the Sheets request's deadline passed")
        try:
            try:
                answer = self._send(uri, method, body, headers, min(self.timeout, left))
            finally:
                _calls.current = None
                cut = call.finish()
                if cut:
                    self._pool.clear()  # no connection the timer shut down is used again
        except Exception:
            if cut:
                raise TimeoutError("the Sheets request outlived its deadline") from None
            raise
        if cut:
            # Cut while its answer was read: it may be whole, or end where it was cut.
            raise TimeoutError("the Sheets request outlived its deadline")
        return answer

    def _send(
        self,
        uri: str,
        method: str,
        body: bytes | str | None,
        headers: dict[str, str] | None,
        timeout: float,
    ) -> tuple[httplib2.Response, bytes]:
        response = self._pool.request(
            method,
            uri,
            body=body,
            headers=headers,
            redirect=False,
            preload_content=True,
            decode_content=True,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
        )
        info: dict[str, str] = {key.lower(): value for key, value in response.headers.items()}
        info["status"] = str(response.status)
        # The body is already decoded; a stale content-encoding would make the client
        # try to decode it again.
        info.pop("content-encoding", None)
        return httplib2.Response(info), response.data

    def close(self) -> None:
        self._pool.clear()
