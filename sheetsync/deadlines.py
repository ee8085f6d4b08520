"""One deadline for a whole network call, whatever the call is blocked in.

A socket timeout bounds each operation, not the call: a server that drips its answer a
byte at a time holds the caller as long as it likes. A :class:`SocketDeadline` is armed
with the time the call may take; the sockets the call opens are handed to it, and when
the deadline passes a timer shuts them down, which ends any blocked connect, TLS
handshake, send or read at once. Used by :mod:`sheetsync.sheets.transport` (Sheets
requests) and :mod:`sheetsync.webhooks` (webhook POSTs).

The timer holds duplicates of the descriptors, taken with :func:`socket.fromfd`: a TLS
handshake detaches the socket object a client holds from its descriptor, and an
``ssl.SSLSocket`` cannot be ``dup()``-ed, but a duplicate of the descriptor reaches both.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class SocketDeadline:
    """A call's deadline, and the sockets its timer shuts down when it passes."""

    def __init__(self, seconds: float, message: str) -> None:
        #: The TimeoutError's message when a socket is handed over after the deadline.
        self.message = message
        self._lock = threading.Lock()
        self._expired = False
        self._finished = False
        self._handles: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    @property
    def expired(self) -> bool:
        """Whether the deadline passed (and the call's sockets were shut down)."""
        return self._expired

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down if the deadline passes before the call ends; TimeoutError
        when it already has."""
        with self._lock:
            if self._expired:
                raise TimeoutError(self.message)
            with contextlib.suppress(OSError):  # already closed: nothing to cut
                self._handles.append(socket.fromfd(sock.fileno(), sock.family, sock.type))

    def _cut(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._expired = True
            for handle in self._handles:
                with contextlib.suppress(OSError):  # not connected, or already closed
                    handle.shutdown(socket.SHUT_RDWR)

    def finish(self) -> bool:
        """End the call (the timer is stopped, the duplicates closed); returns whether
        the deadline cut it first."""
        self._timer.cancel()
        with self._lock:
            self._finished = True
            for handle in self._handles:
                handle.close()
            self._handles.clear()
            return self._expired
