"""The scrape-time collector: at each scrape, the figures ``sheetsync status`` shows, read
through the same collectors (:mod:`sheetsync.ops.status`) once, plus the published
events (:mod:`sheetsync.metrics.events`).

The limiter is shown per project and kind (reads and writes), with the buffers waiting
at its queue, and per account as a distribution: how many accounts are idle, under half,
under 90 %, under their limit, or at it. An account id as a label for every account
would make one series per owner (unbounded); only the busiest few
(``names.BUSIEST_ACCOUNTS`` per kind) are named, so the label set stays bounded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from sheetsync.metrics import events
from sheetsync.metrics import names as n
from sheetsync.ops import demand, status
from sheetsync.services import Services

log = logging.getLogger(__name__)

#: Bands of an account's use of its limit: (label, use below this share).
USE_BANDS = (("under_50", 0.5), ("under_90", 0.9), ("under_100", 1.0))
COUNTERS = (n.LEDGER_TRANSITIONS, n.ROWS_APPENDED, n.FLUSH_RUNS, n.SHEETS_REQUESTS)
HISTOGRAMS = (n.FLUSH_DURATION, n.BATCH_SIZE)


def gauge(name: str, value: float) -> GaugeMetricFamily:
    """An unlabelled gauge, with the help of its definition (:data:`names.DEFINITIONS`)."""
    return GaugeMetricFamily(name, n.BY_NAME[name].help, value=value)


def labelled(name: str) -> GaugeMetricFamily:
    """A labelled gauge, with the help and labels of its definition."""
    definition = n.BY_NAME[name]
    return GaugeMetricFamily(name, definition.help, labels=list(definition.labels))


class PipelineCollector(Collector):
    """Reads Redis and the database once per scrape; a source that fails shows as
    ``sheetsync_source_up{source=...} 0`` and its metrics are left out."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterable[Metric]:
        started = time.monotonic()
        up = labelled(n.SOURCE_UP)
        metrics: list[Metric] = []
        for source, read in (("redis", self._from_redis), ("database", self._from_database)):
            try:
                metrics.extend(read())
            except Exception as exc:
                log.warning("metrics: could not read the %s: %s", source, type(exc).__name__)
                up.add_metric([source], 0)
            else:
                up.add_metric([source], 1)
        yield from metrics
        yield up
        yield gauge(n.SCRAPE_DURATION, time.monotonic() - started)

    # -- Redis ---------------------------------------------------------------------------

    def _from_redis(self) -> list[Metric]:
        buffers_max = self.services.settings.metrics_buffers_max
        buffers = status.collect_buffers(self.services, buffers_max)
        workers = status.collect_workers(self.services)
        status.flag_stalled(buffers, workers)
        metrics = list(_buffer_metrics(buffers))
        live = labelled(n.WORKERS)
        roles: dict[str, int] = {"worker": 0, "beat": 0}
        for process in workers["live"]:
            roles[str(process["role"])] = roles.get(str(process["role"]), 0) + 1
        for role, count in sorted(roles.items()):
            live.add_metric([role], count)
        metrics.append(live)
        metrics.extend(_demand_metrics(demand.read(self.services, buffers_max).demand()))
        metrics.extend(_event_metrics(events.read(self.services.redis)))
        return metrics

    # -- the database (and the limiter windows of its accounts) ---------------------------

    def _from_database(self) -> list[Metric]:
        dead = status.collect_dead_letters(self.services)
        letters = labelled(n.DEAD_LETTERS)
        for row in dead["counts"]:
            letters.add_metric([row["status"], row["reason"]], row["count"])
        credentials = labelled(n.CREDENTIALS)
        for state, count in status.collect_credentials(self.services).items():
            credentials.add_metric([state], count)
        changes = labelled(n.CHANGES_PENDING)
        for change, count in status.collect_changes(self.services).items():
            changes.add_metric([change], count)
        return [
            letters,
            changes,
            gauge(n.DEAD_LETTERS_DUE, dead["pending_due_now"]),
            credentials,
            *_limiter_metrics(status.collect_limiter(self.services)),
        ]


def _buffer_metrics(buffers: dict[str, Any]) -> Iterator[Metric]:
    depth_by_queue: dict[str, int] = {}
    age_by_queue: dict[str, float] = {}
    jobs: dict[str, int] = {"scheduled": 0, "running": 0}
    overdue = 0
    for item in buffers["items"]:
        job = item["job"] or {}
        queue = str(job.get("queue") or "none")
        depth_by_queue[queue] = depth_by_queue.get(queue, 0) + int(item["depth"])
        age_by_queue[queue] = max(age_by_queue.get(queue, 0.0), float(item["oldest_age_s"]))
        if job.get("state"):
            jobs[str(job["state"])] = jobs.get(str(job["state"]), 0) + 1
        overdue += bool(job.get("overdue"))
    yield gauge(n.BUFFERS, buffers["total"])
    yield gauge(n.BUFFER_DEPTH, sum(depth_by_queue.values()))
    yield _by_one_label(n.BUFFER_DEPTH_BY_QUEUE, depth_by_queue)
    yield gauge(n.BUFFER_OLDEST_AGE, max(age_by_queue.values(), default=0))
    yield _by_one_label(n.BUFFER_OLDEST_AGE_BY_QUEUE, age_by_queue)
    yield _by_one_label(n.JOBS, jobs)
    yield gauge(n.JOBS_OVERDUE, overdue)


def _demand_metrics(now: demand.Demand) -> Iterator[Metric]:
    yield gauge(n.WORKER_DEMAND, now.worker_processes)
    states = {"due": now.buffers_due, "running": now.buffers_running}
    yield _by_one_label(n.WORKER_DEMAND_BUFFERS, {**states, "waiting": now.buffers_waiting})
    slots = {"project": now.write_slots_project, "accounts": now.write_slots_accounts}
    yield _by_one_label(n.WORKER_DEMAND_WRITE_SLOTS, slots)


def _by_one_label(name: str, values: dict[str, Any]) -> GaugeMetricFamily:
    family = labelled(name)
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


def _limiter_metrics(limiter: dict[str, Any]) -> Iterator[Metric]:
    project = limiter["project"]
    yield gauge(n.LIMITER_PROJECT_USED, project["used"])
    yield gauge(n.LIMITER_PROJECT_LIMIT, project["limit"])
    in_window = labelled(n.LIMITER_CLIENT_PROJECT_USED)
    limits = labelled(n.LIMITER_CLIENT_PROJECT_LIMIT)
    for client, use in sorted(limiter["projects"].items()):
        for kind in ("write", "read"):
            in_window.add_metric([client, kind], use[kind]["used"])
            limits.add_metric([client, kind], use[kind]["limit"])
    yield in_window
    yield limits
    accounts = limiter["accounts"]
    bands = {"idle": 0, **{band: 0 for band, _ in USE_BANDS}, "full": 0}
    for account in accounts:
        bands[_band(account["used"], account["limit"])] += 1
    used = max((account["used"] for account in accounts), default=0)
    yield gauge(n.LIMITER_ACCOUNT_USED_MAX, used)
    limit = accounts[0]["limit"] if accounts else 0
    yield gauge(n.LIMITER_ACCOUNT_LIMIT, limit)
    yield _by_one_label(n.LIMITER_ACCOUNTS, bands)
    windows = {"write": project, "read": limiter["project_reads"]}
    yield _by_one_label(n.LIMITER_WINDOW_USED, {k: w["used"] for k, w in windows.items()})
    yield _by_one_label(n.LIMITER_WINDOW_LIMIT, {k: w["limit"] for k, w in windows.items()})
    waiting = labelled(n.LIMITER_WAITING)
    for kind, states in sorted(limiter["waiting"].items()):
        for state, count in sorted(states.items()):
            waiting.add_metric([kind, state], count)
    yield waiting
    busiest = labelled(n.LIMITER_BUSIEST)
    for kind, field in (("write", "used"), ("read", "reads")):
        ranked = sorted(accounts, key=lambda account: -account[field])
        top = [account for account in ranked if account[field]][: n.BUSIEST_ACCOUNTS]
        for rank, account in enumerate(top, start=1):
            busiest.add_metric([kind, str(rank), account["account"]], account[field])
    yield busiest


def _band(used: int, limit: int) -> str:
    if used <= 0:
        return "idle"
    share = used / max(limit, 1)
    return next((band for band, below in USE_BANDS if share < below), "full")


def _event_metrics(recorded: events.Recorded) -> Iterator[Metric]:
    for name in COUNTERS:
        definition = n.BY_NAME[name]
        labels = definition.labels
        family = CounterMetricFamily(name, definition.help, labels=list(labels))
        series = recorded.counters.get(name, {})
        if not labels and not series:
            family.add_metric([], 0)
        for pairs, value in sorted(series.items()):
            values = dict(pairs)
            family.add_metric([values.get(label, "") for label in labels], value)
        yield family
    for name in HISTOGRAMS:
        bucket_counts, total, count = recorded.histograms.get(name, ({}, 0.0, 0.0))
        cumulative, running = [], 0.0
        for bound in [*(str(b) for b in n.HISTOGRAM_BUCKETS[name]), "+Inf"]:
            running += bucket_counts.get(bound, 0.0)
            cumulative.append((bound, running))
        # +Inf is the count: a bucket lost to a crash between writes must not make
        # the histogram inconsistent.
        cumulative[-1] = ("+Inf", max(count, running))
        yield HistogramMetricFamily(name, n.BY_NAME[name].help, buckets=cumulative, sum_value=total)
