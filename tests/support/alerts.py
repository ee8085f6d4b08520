"""A webhook that records the alerts sheetsync sends."""

from __future__ import annotations

from typing import Any

from sheetsync.alerts import drain_alerts

#: How long reading the texts waits for this process's queued alerts.
DRAIN_S = 5.0


class AlertSink:
    """A Slack-compatible webhook that records what it receives."""

    def __init__(self) -> None:
        import http.server
        import json
        import threading

        received: list[dict[str, Any]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def texts(self) -> list[str]:
        """What arrived, once this process's alert sender has posted what it queued (a
        worker process's alerts arrive when they arrive: wait for them)."""
        drain_alerts(DRAIN_S)
        return [str(body.get("text", "")) for body in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
