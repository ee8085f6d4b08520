"""The pipeline's event counters and histograms, summed over every process in Redis.

Why Redis and not prometheus_client's multiprocess mode: flushes run in prefork worker
children on any number of hosts, emits run in the web app's processes, and the exporter
(``sheetsync metrics``) is a process of its own, possibly on another host. Multiprocess
mode shares files in one directory of one host, and needs that directory wiped at every
restart; every one of those processes already shares the buffer Redis. So each process
counts in memory (:func:`count`, :func:`observe`: a dict update, no I/O), and writes
what it counted in one pipelined round trip of HINCRBY / HINCRBYFLOAT into one hash
(:data:`~sheetsync.redis_keys.METRICS_EVENTS`): at the end of every flush run, and at most
once a second from an emitting process (:func:`publish_soon`). The exporter reads the
hash at each scrape.

Publishing is best effort and never raises: a Redis error is logged at debug level and
the counts are kept for the next try. A Redis that loses its data resets the counters,
which Prometheus' ``rate()`` and ``increase()`` treat as a counter reset.
"""

from __future__ import annotations

import bisect
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from sheetsync.errors import (
    ContentRefusedError,
    CredentialError,
    PermanentError,
    SheetsError,
    TransientError,
)
from sheetsync.metrics.names import HISTOGRAM_BUCKETS, SHEETS_REQUESTS
from sheetsync.redis_keys import METRICS_EVENTS

log = logging.getLogger(__name__)

#: The hash field of a histogram's sum and count (its buckets are ``le`` labels).
SUM, COUNT = "sum", "count"
HTTP_TOO_MANY_REQUESTS = 429
#: An emitting process publishes at most this often (s).
PUBLISH_EVERY_S = 1.0

Labels = tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=1024)  # few series, counted on every emit and flush
def field_name(name: str, labels: Labels = ()) -> str:
    """The hash field of one series: ``["name", [["label", "value"], ...]]``."""
    return json.dumps([name, [list(pair) for pair in labels]], separators=(",", ":"))


def parse_field(raw: str) -> tuple[str, Labels]:
    name, labels = json.loads(raw)
    return str(name), tuple((str(k), str(v)) for k, v in labels)


@dataclass
class _Pending:
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)

    def merge(self, other: _Pending) -> None:
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        for key, value in other.sums.items():
            self.sums[key] = self.sums.get(key, 0.0) + value


class EventTally:
    """What one process counted and has not yet published. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = _Pending()
        self._published_at = -PUBLISH_EVERY_S
        self._timer: threading.Timer | None = None

    def count(self, name: str, amount: int = 1, **labels: str) -> None:
        if amount <= 0:
            return
        key = field_name(name, tuple(sorted(labels.items())))
        with self._lock:
            self._pending.counts[key] = self._pending.counts.get(key, 0) + amount

    def observe(self, name: str, value: float) -> None:
        """One observation of histogram ``name`` (its buckets are in ``names``)."""
        bounds = HISTOGRAM_BUCKETS[name]
        index = bisect.bisect_left(bounds, value)
        bucket = str(bounds[index]) if index < len(bounds) else "+Inf"
        bucket_key = field_name(name, (("le", bucket),))
        with self._lock:
            pending = self._pending
            pending.counts[bucket_key] = pending.counts.get(bucket_key, 0) + 1
            count_key, sum_key = field_name(name, ((COUNT, ""),)), field_name(name, ((SUM, ""),))
            pending.counts[count_key] = pending.counts.get(count_key, 0) + 1
            pending.sums[sum_key] = pending.sums.get(sum_key, 0.0) + value

    def publish(self, client: redis.Redis) -> bool:
        """Write what was counted in one round trip. Never raises: on a Redis error the
        counts stay for the next try. Returns whether anything was written."""
        with self._lock:
            pending, self._pending = self._pending, _Pending()
            self._published_at = time.monotonic()
        if not pending.counts and not pending.sums:
            return False
        try:
            pipe = client.pipeline(transaction=False)
            for key, n in pending.counts.items():
                pipe.hincrby(METRICS_EVENTS, key, n)
            for key, value in pending.sums.items():
                pipe.hincrbyfloat(METRICS_EVENTS, key, value)
            pipe.execute()
        except Exception as exc:  # metrics must never fail the pipeline
            log.debug("metrics events not published (kept for the next try): %r", exc)
            with self._lock:
                self._pending.merge(pending)
            return False
        return True

    def publish_soon(self, client: redis.Redis, every_s: float = PUBLISH_EVERY_S) -> None:
        """Publish now if the last publish was ``every_s`` ago or more, else once that
        much time has passed (a daemon timer): counts land within ``every_s``."""
        timer = self._timer
        if timer is not None and timer.is_alive():
            return  # a publish is already on its way
        with self._lock:
            wait = self._published_at + every_s - time.monotonic()
            if wait > 0:
                if self._timer is None or not self._timer.is_alive():
                    self._timer = threading.Timer(wait, self.publish, args=(client,))
                    self._timer.daemon = True
                    self._timer.start()
                return
        self.publish(client)

    def clear(self) -> None:
        """Forget what was counted, and a publish on its way."""
        with self._lock:
            self._pending = _Pending()
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None


#: This process's tally; a forked child starts empty (its parent publishes its own).
tally = EventTally()
os.register_at_fork(after_in_child=tally.clear)


def count(name: str, amount: int = 1, **labels: str) -> None:
    tally.count(name, amount, **labels)


def observe(name: str, value: float) -> None:
    tally.observe(name, value)


def sheets_request(kind: str, error: SheetsError | None = None) -> None:
    """Count one Sheets request by kind and outcome: ok, rate_limited (a 429), or the
    class of its error (refused, credential, permanent, transient)."""
    count(SHEETS_REQUESTS, kind=kind, outcome="ok" if error is None else _outcome(error))


def _outcome(error: SheetsError) -> str:
    if error.status == HTTP_TOO_MANY_REQUESTS:
        return "rate_limited"
    for kind, name in (
        (ContentRefusedError, "refused"),
        (CredentialError, "credential"),
        (PermanentError, "permanent"),
        (TransientError, "transient"),
    ):
        if isinstance(error, kind):
            return name
    return "error"


def publish(client: redis.Redis) -> bool:
    return tally.publish(client)


def publish_soon(client: redis.Redis) -> None:
    tally.publish_soon(client)


@dataclass(frozen=True)
class Recorded:
    """The published events: counter series and histograms."""

    counters: Mapping[str, Mapping[Labels, float]]
    #: name -> ({upper bound: count, not cumulative}, sum, count)
    histograms: Mapping[str, tuple[Mapping[str, float], float, float]]


def read(client: redis.Redis) -> Recorded:
    """Everything published so far (one HGETALL)."""
    raw: dict[Any, Any] = client.hgetall(METRICS_EVENTS)
    counters: dict[str, dict[Labels, float]] = {}
    buckets: dict[str, dict[str, float]] = {}
    totals: dict[str, dict[str, float]] = {}
    for key, value in raw.items():
        text = key.decode() if isinstance(key, bytes) else str(key)
        try:
            name, labels = parse_field(text)
            number = float(value)
        except (ValueError, TypeError):
            continue  # not ours
        if name in HISTOGRAM_BUCKETS:
            label, bound = labels[0] if labels else ("", "")
            if label == "le":
                buckets.setdefault(name, {})[bound] = number
            else:
                totals.setdefault(name, {})[label] = number
        else:
            counters.setdefault(name, {})[labels] = number
    histograms = {
        name: (buckets.get(name, {}), totals.get(name, {}).get(SUM, 0.0), totals[name][COUNT])
        for name in HISTOGRAM_BUCKETS
        if name in totals and COUNT in totals[name]
    }
    return Recorded(counters, histograms)
