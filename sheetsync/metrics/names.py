"""Every metric name, its labels and its histogram buckets, in one place: the Grafana
dashboard (docs/grafana/sheetsync.json) and docs/RUNBOOK.md use exactly these.

Labels are low-cardinality on purpose: a queue, a state, a status, a reason, a request
kind or an outcome; never an answer, form, spreadsheet, owner or Google account id.
"""

from __future__ import annotations

# -- events (counters and histograms, recorded by the pipeline) ---------------------------

#: Counter, label ``to``: ledger rows written in each state (ENQUEUED at emit,
#: COMPLETED / FAILED / DEAD_LETTERED when a flush or a dead letter settles them).
LEDGER_TRANSITIONS = "sheetsync_ledger_transitions"
#: Counter: rows appended to sheets.
ROWS_APPENDED = "sheetsync_rows_appended"
#: Counter, label ``outcome``: flush runs by how they ended (done, again, retry,
#: superseded, fenced, error).
FLUSH_RUNS = "sheetsync_flush_runs"
#: Histogram: how long one flush run took (s).
FLUSH_DURATION = "sheetsync_flush_duration_seconds"
#: Histogram: rows per append (one batch).
BATCH_SIZE = "sheetsync_batch_size_rows"
#: Counter, labels ``kind`` (values.append, spreadsheets.get, ...) and ``outcome``
#: (ok, rate_limited for a 429, transient, credential, permanent, refused).
SHEETS_REQUESTS = "sheetsync_sheets_requests"

FLUSH_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BATCH_SIZE_BUCKETS = (1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 2500.0, 5000.0)
HISTOGRAM_BUCKETS = {FLUSH_DURATION: FLUSH_DURATION_BUCKETS, BATCH_SIZE: BATCH_SIZE_BUCKETS}

# -- gauges (read at scrape time from what ``sheetsync status`` reads) -------------------

#: Buffers in the buffer index (every buffer with a job).
BUFFERS = "sheetsync_buffers"
#: Ids waiting in buffers, in total and by the queue of their job.
BUFFER_DEPTH = "sheetsync_buffer_depth"
BUFFER_DEPTH_BY_QUEUE = "sheetsync_buffer_depth_by_queue"
#: The age (s) of the oldest id still buffered, in total and by queue.
BUFFER_OLDEST_AGE = "sheetsync_buffer_oldest_age_seconds"
BUFFER_OLDEST_AGE_BY_QUEUE = "sheetsync_buffer_oldest_age_seconds_by_queue"
#: Jobs by state (scheduled, running), and those overdue.
JOBS = "sheetsync_jobs"
JOBS_OVERDUE = "sheetsync_jobs_overdue"
#: Live worker and beat processes (by role), from their heartbeats.
WORKERS = "sheetsync_workers"
#: Dead letters by status and reason, and PENDING ones due for a retry now.
DEAD_LETTERS = "sheetsync_dead_letters"
DEAD_LETTERS_DUE = "sheetsync_dead_letters_due"
#: Requests in the project's rate window, and the project's limit.
LIMITER_PROJECT_USED = "sheetsync_limiter_project_used"
LIMITER_PROJECT_LIMIT = "sheetsync_limiter_project_limit"
#: The busiest account's requests in its window, and the per-account limit.
LIMITER_ACCOUNT_USED_MAX = "sheetsync_limiter_account_used_max"
LIMITER_ACCOUNT_LIMIT = "sheetsync_limiter_account_limit"
#: Accounts by how much of their limit they use, label ``use``: idle, under_50,
#: under_90, under_100, full.
LIMITER_ACCOUNTS = "sheetsync_limiter_accounts"
#: Google credentials by status (VALID, INVALID, EXPIRED).
CREDENTIALS = "sheetsync_credentials"
#: 1 when the exporter could read that source (``redis``, ``database``) at this scrape.
SOURCE_UP = "sheetsync_source_up"
#: How long this scrape took (s).
SCRAPE_DURATION = "sheetsync_scrape_duration_seconds"
