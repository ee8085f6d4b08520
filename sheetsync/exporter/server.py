"""The ``/metrics`` endpoint: a registry holding only the pipeline's collector."""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from sheetsync.exporter.collector import PipelineCollector
from sheetsync.services import Services


def registry_for(services: Services) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(services))
    return registry


def serve(services: Services, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``/metrics`` on a daemon thread; the caller shuts the server down."""
    return start_http_server(port, addr=host, registry=registry_for(services))
