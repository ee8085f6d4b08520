"""Run the emulator: in a background thread (:class:`EmulatorServer`) or blocking (:func:`serve`).

The server thread owns its own event loop, and all emulator state lives on it. Other
threads talk to the emulator over HTTP only (see :class:`~sheets_emulator.admin.
EmulatorAdmin`), so nothing is shared between threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

from aiohttp import web

from sheets_emulator.app import make_app
from sheets_emulator.errors import EmulatorStartError
from sheets_emulator.quotas import (
    DEFAULT_READS_PER_ACCOUNT,
    DEFAULT_READS_PER_PROJECT,
    DEFAULT_WINDOW_S,
    DEFAULT_WRITES_PER_ACCOUNT,
    DEFAULT_WRITES_PER_PROJECT,
    QuotaLimits,
)
from sheets_emulator.state import EmulatorState

#: The port ``sheets-emulator`` listens on unless told otherwise.
DEFAULT_PORT = 8085
DEFAULT_HOST = "127.0.0.1"
#: How long stopping waits for requests in progress (a hanging fault is cut short).
SHUTDOWN_TIMEOUT_S = 1.0
#: How long :meth:`EmulatorServer.start` waits for the socket to be bound.
START_TIMEOUT_S = 10.0


def _make_runner(limits: QuotaLimits, access_log: bool) -> web.AppRunner:
    app = make_app(EmulatorState(limits))
    if access_log:
        return web.AppRunner(app, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    return web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)


def _url(host: str, port: int) -> str:
    if host in ("", "0.0.0.0"):  # noqa: S104 - reachable locally through the loopback
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


class EmulatorServer:
    """The emulator on a daemon thread; use as a context manager or call start()/stop().

    >>> with EmulatorServer() as server:  # doctest: +SKIP
    ...     build("sheets", "v4", client_options={"api_endpoint": server.url}, ...)
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        read_per_account: int = DEFAULT_READS_PER_ACCOUNT,
        write_per_account: int = DEFAULT_WRITES_PER_ACCOUNT,
        read_per_project: int = DEFAULT_READS_PER_PROJECT,
        write_per_project: int = DEFAULT_WRITES_PER_PROJECT,
        window_s: float = DEFAULT_WINDOW_S,
        access_log: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.limits = QuotaLimits(
            read_per_account, write_per_account, read_per_project, write_per_project, window_s
        )
        self._access_log = access_log
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the ``api_endpoint`` for googleapiclient."""
        return _url(self.host, self.port)

    @property
    def token_uri(self) -> str:
        """The ``token_uri`` for google-auth credentials."""
        return self.url + "/token"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Self:
        """Bind the socket and serve on a daemon thread; returns once it accepts requests."""
        if self._thread is not None:
            raise EmulatorStartError("the emulator is already started")
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="sheets-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise EmulatorStartError(f"the emulator did not start within {START_TIMEOUT_S} s")
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise EmulatorStartError(
                f"cannot serve on {self.host}:{self.port}: {self._start_error}"
            ) from self._start_error
        return self

    def stop(self) -> None:
        """Stop serving, close every connection and wait for the thread to end."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_S)
        self._thread = None
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        runner = _make_runner(self.limits, self._access_log)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self.host, self.port)
            loop.run_until_complete(site.start())
            self.port = _bound_port(runner, self.port)
        except BaseException as error:  # reported to start() in the calling thread
            self._start_error = error
            loop.run_until_complete(runner.cleanup())
            loop.close()
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


def _bound_port(runner: web.AppRunner, requested: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return requested


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    read_per_account: int = DEFAULT_READS_PER_ACCOUNT,
    write_per_account: int = DEFAULT_WRITES_PER_ACCOUNT,
    read_per_project: int = DEFAULT_READS_PER_PROJECT,
    write_per_project: int = DEFAULT_WRITES_PER_PROJECT,
    window_s: float = DEFAULT_WINDOW_S,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM); the start-up lines go to ``announce``
    (default: printed to stdout and flushed).

    For ``sheets-emulator --host --port``. Raises :class:`EmulatorStartError` when the
    address cannot be bound.
    """
    limits = QuotaLimits(
        read_per_account, write_per_account, read_per_project, write_per_project, window_s
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_until_stopped(host, port, limits, announce or _print_now))


def _print_now(line: str) -> None:
    print(line, flush=True)  # seen at once even when stdout is a pipe (docker logs)


async def _serve_until_stopped(
    host: str, port: int, limits: QuotaLimits, announce: Callable[[str], None]
) -> None:
    runner = _make_runner(limits, access_log=True)
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as error:
            raise EmulatorStartError(f"cannot serve on {host}:{port}: {error}") from error
        url = _url(host, _bound_port(runner, port))
        announce(f"Sheets API emulator listening on {url}")
        announce(f"  api_endpoint: {url}   token_uri: {url}/token   admin: {url}/_emulator/")
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, stopped.set)
        await stopped.wait()
    finally:
        await runner.cleanup()
