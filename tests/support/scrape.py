"""Run ``sheetsync metrics`` as a process and read its ``/metrics`` over HTTP."""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from support.cli import SCRIPT
from support.lifetime import dies_with_this_process
from support.paths import ROOT
from support.waiting import wait_until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Scraper:
    def __init__(self, url: str) -> None:
        self.url = url
        self.families: set[str] = set()

    def text(self) -> str:
        with urllib.request.urlopen(self.url, timeout=10) as reply:
            return str(reply.read().decode())

    def samples(self) -> Samples:
        found: Samples = {}
        for family in text_string_to_metric_families(self.text()):
            self.families.add(family.name)
            for sample in family.samples:
                found[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return found

    def value(self, name: str, **labels: str) -> float:
        """One series' value; 0 when absent."""
        return self.samples().get((name, frozenset(labels.items())), 0.0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def metrics_endpoint(
    env: dict[str, str], log_dir: Path, options: tuple[str, ...] = ()
) -> Iterator[Scraper]:
    """``sheetsync [OPTIONS] metrics --port`` with the test's environment, until the block
    ends; its output goes to ``log_dir/metrics.log``."""
    port = free_port()
    log = open(log_dir / "metrics.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        dies_with_this_process([str(SCRIPT), *options, "metrics", "--port", str(port)]),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics")

    def answers() -> bool:
        assert proc.poll() is None, (log_dir / "metrics.log").read_text()
        try:
            scraper.text()
        except OSError:
            return False
        return True

    try:
        wait_until(answers, timeout=20)
        yield scraper
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
