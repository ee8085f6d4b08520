"""``sheetsync metrics --port N``: serve Prometheus metrics on ``/metrics``."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated

import typer

from sheetsync import extras
from sheetsync.cli.output import fail, out
from sheetsync.cli.runtime import open_services

log = logging.getLogger(__name__)


def metrics(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port to listen on.")
    ] = 9808,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (0.0.0.0 for every interface).")
    ] = "127.0.0.1",
) -> None:
    """Serve Prometheus metrics on http://HOST:PORT/metrics until interrupted, and on
    /demand the worker processes the waiting work can use (JSON, for KEDA).

    Each scrape reads Redis and the database once: buffers, jobs, dead letters, the
    limiter and credentials, plus the counters the workers record. docs/RUNBOOK.md
    says what to do when an alert fires.
    """
    extras.require("metrics", "sheetsync metrics")
    from sheetsync.exporter.server import serve
    from sheetsync.startup import check_process

    check_process("exporter")  # its database, with the schema at this version's revision
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with open_services() as services:
        try:
            server, thread = serve(services, host, port)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        bound = server.server_address[1]
        out.print(f"serving metrics on http://{host}:{bound}/metrics", markup=False)
        log.info("metrics endpoint up", extra={"event": "metrics.serve", "port": bound})
        stop.wait()
        server.shutdown()
        thread.join(timeout=5)
