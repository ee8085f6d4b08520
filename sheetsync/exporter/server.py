"""The ``/metrics`` endpoint: a registry holding only the pipeline's collector."""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from sheetsync.exporter.collector import PipelineCollector
from sheetsync.pipeline import Pipeline


def registry_for(pipeline: Pipeline) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(pipeline))
    return registry


def serve(pipeline: Pipeline, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``/metrics`` on a daemon thread; the caller shuts the server down."""
    return start_http_server(port, addr=host, registry=registry_for(pipeline))
