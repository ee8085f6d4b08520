"""Every metric in one place: its name, type, labels, help and histogram buckets. The
exporter serves exactly these (:mod:`sheetsync.exporter.collector` takes each one's help
and labels from here), and the Grafana dashboard (docs/grafana/sheetsync.json), the
runbook and the docs' metrics reference use them.

Labels are low-cardinality on purpose: a queue, a state, a status, a reason, a request
kind or an outcome; never an answer, form, spreadsheet, owner or Google account id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# -- events (counters and histograms, recorded by the pipeline) ---------------------------

LEDGER_TRANSITIONS = "sheetsync_ledger_transitions"
ROWS_APPENDED = "sheetsync_rows_appended"
FLUSH_RUNS = "sheetsync_flush_runs"
FLUSH_DURATION = "sheetsync_flush_duration_seconds"
BATCH_SIZE = "sheetsync_batch_size_rows"
SHEETS_REQUESTS = "sheetsync_sheets_requests"

FLUSH_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BATCH_SIZE_BUCKETS = (1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 2500.0, 5000.0)
HISTOGRAM_BUCKETS = {FLUSH_DURATION: FLUSH_DURATION_BUCKETS, BATCH_SIZE: BATCH_SIZE_BUCKETS}

# -- gauges (read at scrape time from what ``sheetsync status`` reads) -------------------

BUFFERS = "sheetsync_buffers"
BUFFER_DEPTH = "sheetsync_buffer_depth"
BUFFER_DEPTH_BY_QUEUE = "sheetsync_buffer_depth_by_queue"
BUFFER_OLDEST_AGE = "sheetsync_buffer_oldest_age_seconds"
BUFFER_OLDEST_AGE_BY_QUEUE = "sheetsync_buffer_oldest_age_seconds_by_queue"
JOBS = "sheetsync_jobs"
JOBS_OVERDUE = "sheetsync_jobs_overdue"
WORKERS = "sheetsync_workers"
DEAD_LETTERS = "sheetsync_dead_letters"
DEAD_LETTERS_DUE = "sheetsync_dead_letters_due"
LIMITER_PROJECT_USED = "sheetsync_limiter_project_used"
LIMITER_PROJECT_LIMIT = "sheetsync_limiter_project_limit"
LIMITER_CLIENT_PROJECT_USED = "sheetsync_limiter_client_project_used"
LIMITER_CLIENT_PROJECT_LIMIT = "sheetsync_limiter_client_project_limit"
LIMITER_ACCOUNT_USED_MAX = "sheetsync_limiter_account_used_max"
LIMITER_ACCOUNT_LIMIT = "sheetsync_limiter_account_limit"
LIMITER_ACCOUNTS = "sheetsync_limiter_accounts"
LIMITER_WINDOW_USED = "sheetsync_limiter_window_used"
LIMITER_WINDOW_LIMIT = "sheetsync_limiter_window_limit"
LIMITER_WAITING = "sheetsync_limiter_waiting_buffers"
LIMITER_BUSIEST = "sheetsync_limiter_busiest_account_used"
#: Accounts named in LIMITER_BUSIEST, per kind: the label set stays bounded.
BUSIEST_ACCOUNTS = 5
CREDENTIALS = "sheetsync_credentials"
CHANGES_PENDING = "sheetsync_changes_pending"
WORKER_DEMAND = "sheetsync_worker_demand"
WORKER_DEMAND_BUFFERS = "sheetsync_worker_demand_buffers"
WORKER_DEMAND_WRITE_SLOTS = "sheetsync_worker_demand_write_slots"
SOURCE_UP = "sheetsync_source_up"
SCRAPE_DURATION = "sheetsync_scrape_duration_seconds"

Kind = Literal["counter", "gauge", "histogram"]
#: Where a value comes from: the events the workers and the web app record, what the
#: exporter reads from Redis or the database at each scrape, or the scrape itself.
Source = Literal["events", "redis", "database", "scrape"]


@dataclass(frozen=True)
class Definition:
    """One metric as the exporter serves it (a counter gets ``_total``, a histogram
    ``_bucket``, ``_sum`` and ``_count``)."""

    name: str
    kind: Kind
    source: Source
    help: str
    labels: tuple[str, ...] = ()


DEFINITIONS = (
    Definition(
        LEDGER_TRANSITIONS,
        "counter",
        "events",
        "Ledger rows written in each state: ENQUEUED at emit; COMPLETED, FAILED or "
        "DEAD_LETTERED when a flush or a dead letter settles them.",
        ("to",),
    ),
    Definition(ROWS_APPENDED, "counter", "events", "Rows appended to sheets."),
    Definition(
        FLUSH_RUNS,
        "counter",
        "events",
        "Flush runs by how they ended: done, again, retry, superseded, fenced, error.",
        ("outcome",),
    ),
    Definition(
        SHEETS_REQUESTS,
        "counter",
        "events",
        "Sheets API requests by kind (spreadsheets.values.append, spreadsheets.get...) "
        "and outcome: ok, rate_limited (a 429), transient, credential, permanent, refused.",
        ("kind", "outcome"),
    ),
    Definition(FLUSH_DURATION, "histogram", "events", "How long one flush run took (s)."),
    Definition(BATCH_SIZE, "histogram", "events", "Rows per append (one batch)."),
    Definition(BUFFERS, "gauge", "redis", "Buffers with a job (in the buffer index)."),
    Definition(BUFFER_DEPTH, "gauge", "redis", "Ids waiting in buffers."),
    Definition(BUFFER_DEPTH_BY_QUEUE, "gauge", "redis", "Ids waiting, by queue.", ("queue",)),
    Definition(BUFFER_OLDEST_AGE, "gauge", "redis", "Age of the oldest id still buffered (s)."),
    Definition(
        BUFFER_OLDEST_AGE_BY_QUEUE,
        "gauge",
        "redis",
        "Age of the oldest id still buffered, by queue (s).",
        ("queue",),
    ),
    Definition(JOBS, "gauge", "redis", "Flush jobs by state (scheduled, running).", ("state",)),
    Definition(JOBS_OVERDUE, "gauge", "redis", "Scheduled jobs past their due time."),
    Definition(
        WORKERS,
        "gauge",
        "redis",
        "Live worker and beat processes, from their heartbeats.",
        ("role",),
    ),
    Definition(
        DEAD_LETTERS,
        "gauge",
        "database",
        "Dead letters by status and reason.",
        ("status", "reason"),
    ),
    Definition(DEAD_LETTERS_DUE, "gauge", "database", "PENDING dead letters due for a retry."),
    Definition(
        LIMITER_PROJECT_USED,
        "gauge",
        "database",
        "Write requests (appends, header writes) in the project's rate window.",
    ),
    Definition(LIMITER_PROJECT_LIMIT, "gauge", "database", "The project's write limit per window."),
    Definition(
        LIMITER_CLIENT_PROJECT_USED,
        "gauge",
        "database",
        "Requests in the rate window of each OAuth client's Cloud project, by kind.",
        ("client", "kind"),
    ),
    Definition(
        LIMITER_CLIENT_PROJECT_LIMIT,
        "gauge",
        "database",
        "Each OAuth client's Cloud project's limit per window, by kind.",
        ("client", "kind"),
    ),
    Definition(
        LIMITER_ACCOUNT_USED_MAX,
        "gauge",
        "database",
        "The busiest Google account's write requests in its window.",
    ),
    Definition(
        LIMITER_ACCOUNT_LIMIT, "gauge", "database", "The write limit of one account per window."
    ),
    Definition(
        LIMITER_ACCOUNTS,
        "gauge",
        "database",
        "Google accounts by use of their write limit: idle, under_50, under_90, under_100, full.",
        ("use",),
    ),
    Definition(
        LIMITER_WINDOW_USED,
        "gauge",
        "database",
        "Requests in the project's rate window, by kind (read, write), as Google counts them.",
        ("kind",),
    ),
    Definition(
        LIMITER_WINDOW_LIMIT,
        "gauge",
        "database",
        "The project's limit per window, by kind (read, write).",
        ("kind",),
    ),
    Definition(
        LIMITER_WAITING,
        "gauge",
        "database",
        "Buffers waiting at the project's quota, by kind and state: queued, continuing "
        "(finishing a started run, first in line), parked (their account's window is full).",
        ("kind", "state"),
    ),
    Definition(
        LIMITER_BUSIEST,
        "gauge",
        "database",
        f"The {BUSIEST_ACCOUNTS} busiest Google accounts' requests in their window, by kind "
        "and rank (1: the busiest); never more accounts than that, so the label set stays "
        "bounded.",
        ("kind", "rank", "account"),
    ),
    Definition(
        CREDENTIALS,
        "gauge",
        "database",
        "Google credentials by status (VALID, INVALID, EXPIRED).",
        ("status",),
    ),
    Definition(
        CHANGES_PENDING,
        "gauge",
        "database",
        "Edits (UPDATE) and deletions (DELETE, erasures among them) of answers that a "
        "sheet has yet to follow, per (answer, sheet).",
        ("change",),
    ),
    Definition(
        WORKER_DEMAND,
        "gauge",
        "redis",
        "Worker processes the waiting work can use: runs going on, plus the buffers due "
        "now that the write quota has a slot for (the exporter's GET /demand).",
    ),
    Definition(
        WORKER_DEMAND_BUFFERS,
        "gauge",
        "redis",
        "Buffers by where their flush stands: due (may start now), running, waiting "
        "(scheduled for later).",
        ("state",),
    ),
    Definition(
        WORKER_DEMAND_WRITE_SLOTS,
        "gauge",
        "redis",
        "Write slots free in the rate windows now: the project's, and the sum of the "
        "accounts' whose runs wait at the quota.",
        ("scope",),
    ),
    Definition(
        SOURCE_UP,
        "gauge",
        "scrape",
        "1 when the exporter could read that source (redis, database) at this scrape.",
        ("source",),
    ),
    Definition(SCRAPE_DURATION, "gauge", "scrape", "How long this scrape took (s)."),
)
#: The definitions by metric name.
BY_NAME = {definition.name: definition for definition in DEFINITIONS}
