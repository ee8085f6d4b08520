"""The overview's recent past: a sampler thread that reads what ``status`` reads every
few seconds and keeps the last hour in memory.

Depth, oldest age and limiter use exist only as they are now (Redis holds no history),
so the console samples them itself: nothing to store or migrate, at the price of charts
that start empty when the console starts. Appends per minute come from the ledger
instead (:func:`sheetsync.web.data.appends_per_minute`), whole from the first view.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from sheetsync.ops import status
from sheetsync.services import Services

log = logging.getLogger(__name__)

#: Seconds of history kept.
HISTORY_S = 3600.0
#: Buffers read per sample (the oldest first, as ``status`` lists them).
SAMPLE_BUFFERS = 1000


@dataclass(frozen=True)
class Sample:
    #: Unix time of the sample.
    at: float
    buffers: int
    #: Ids buffered in the :data:`SAMPLE_BUFFERS` oldest buffers.
    depth: int
    oldest_age_s: float
    project_used: int
    project_limit: int


@dataclass(frozen=True)
class Gap:
    """A sample that could not be read (Redis was down)."""

    at: float


class History:
    """A ring of samples, filled by a daemon thread; a failed read leaves a gap."""

    def __init__(self, services: Services, interval_s: float) -> None:
        self._services = services
        self.interval_s = interval_s
        self._samples: deque[Sample | Gap] = deque(maxlen=max(2, int(HISTORY_S / interval_s)))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def samples(self) -> list[Sample | Gap]:
        with self._lock:
            return list(self._samples)

    def sample_now(self) -> None:
        try:
            taken: Sample | Gap = self._read()
        except Exception as exc:  # an outage is a gap in the chart, never a dead thread
            log.info("console sample failed: %s", type(exc).__name__)
            taken = Gap(time.time())
        with self._lock:
            self._samples.append(taken)

    def sample_if_older_than(self, seconds: float) -> None:
        """A fresh sample unless the newest one is younger than ``seconds``."""
        with self._lock:
            newest = self._samples[-1].at if self._samples else 0.0
        if time.time() - newest >= seconds:
            self.sample_now()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_now()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def _read(self) -> Sample:
        buffers = status.collect_buffers(self._services, SAMPLE_BUFFERS)
        project = self._services.limiter.usage()
        items = buffers["items"]
        return Sample(
            at=time.time(),
            buffers=int(buffers["total"]),
            depth=sum(int(item["depth"]) for item in items),
            oldest_age_s=max((float(item["oldest_age_s"]) for item in items), default=0.0),
            project_used=project.used,
            project_limit=project.limit,
        )
