"""The exporter's HTTP server: ``/metrics``, a registry holding only the pipeline's
collector, and ``GET /demand``, the demand on worker processes as JSON
(:mod:`sheetsync.ops.demand`), which KEDA's metrics-api scaler reads
(``valueLocation: worker_processes``)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterable
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app

from sheetsync.dispatch import QUEUES
from sheetsync.exporter.collector import PipelineCollector
from sheetsync.ops import demand
from sheetsync.services import Services

log = logging.getLogger(__name__)

DEMAND_PATH = "/demand"


def registry_for(services: Services) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(services))
    return registry


def app_for(services: Services) -> WSGIApplication:
    """``/demand``, and Prometheus's exposition on every other path (as before)."""
    metrics = make_wsgi_app(registry_for(services))

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == DEMAND_PATH:
            return _demand(services, environ, start_response)
        served: Iterable[bytes] = metrics(environ, start_response)
        return served

    return app


def _demand(
    services: Services, environ: WSGIEnvironment, start_response: StartResponse
) -> list[bytes]:
    if environ.get("REQUEST_METHOD") != "GET":
        return _json(start_response, "405 Method Not Allowed", {"error": "GET only"})
    queues = parse_qs(str(environ.get("QUERY_STRING", ""))).get("queue", [])
    queue = queues[0] if queues else None
    if queue is not None and (len(queues) > 1 or queue not in QUEUES):
        return _json(start_response, "400 Bad Request", {"error": f"queue is one of {QUEUES}"})
    try:
        snapshot = demand.read(services, services.settings.metrics_buffers_max)
    except Exception as exc:
        log.warning("demand: could not read Redis: %s", type(exc).__name__)
        return _json(start_response, "503 Service Unavailable", {"error": "Redis unreadable"})
    return _json(start_response, "200 OK", snapshot.demand(queue).as_json())


def _json(start_response: StartResponse, status: str, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [data]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (every 15 s, from Prometheus and KEDA)."""


def serve(services: Services, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``/metrics`` and ``/demand`` on a daemon thread; the caller shuts the server
    down."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("_FamilyServer", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(host, port, app_for(services), server_class, _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="sheetsync-exporter", daemon=True)
    thread.start()
    return server, thread
