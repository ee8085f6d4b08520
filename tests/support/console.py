"""The console as operators run it: ``sheetsync web`` in a subprocess, on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support.waiting import wait_until

SHEETSYNC = str(Path(sys.executable).with_name("sheetsync"))
TOKEN = "console-test-token-3f9a"


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: dict[str, str]


@dataclass(frozen=True)
class Console:
    url: str
    token: str

    def request(
        self,
        path: str,
        *,
        auth: str | None = "bearer",
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        sent = dict(headers or {})
        if auth == "bearer":
            sent["Authorization"] = f"Bearer {self.token}"
        elif auth is not None:
            sent["Authorization"] = auth
        request = urllib.request.Request(self.url + path, data=data, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return _answer(response.status, response.read(), response.headers.items())
        except urllib.error.HTTPError as error:
            return _answer(error.code, error.read(), error.headers.items())


def _answer(status: int, body: bytes, headers: Iterable[tuple[str, str]]) -> Answer:
    return Answer(status, body.decode(), {name.lower(): value for name, value in headers})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_console(env: dict[str, str], *, token: str = TOKEN) -> Iterator[Console]:
    port = free_port()
    environment = {**os.environ, **env, "SHEETSYNC_WEB_TOKEN": token}
    process = subprocess.Popen(
        [SHEETSYNC, "web", "--port", str(port), "--sample-interval", "0.5"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    console = Console(f"http://127.0.0.1:{port}", token)

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"sheetsync web exited: {process.stdout.read()}")  # type: ignore[union-attr]
        try:
            return console.request("/static/console.css").status == 200
        except OSError:
            return False

    try:
        wait_until(up, timeout=20, interval=0.1)
        yield console
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
