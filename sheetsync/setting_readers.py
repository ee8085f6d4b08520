"""Which processes each setting takes effect in, beside :class:`sheetsync.settings.Settings`.

Every process reads and checks every ``SHEETSYNC_*`` setting at start, but each one acts
only where the code that uses it runs: a debounce set on the workers alone does not
change when the web app schedules a buffer's first flush. The settings reference of the
docs shows this table beside each setting's default, type and description, and a test
checks that it names every setting and no other.
"""

from __future__ import annotations

from enum import StrEnum


class Process(StrEnum):
    """The processes that read ``SHEETSYNC_*`` settings."""

    WEB_APP = "web app"  # the app's processes that call emit_answer_submitted & co.
    WORKER = "worker"  # celery -A sheetsync.celery worker
    BEAT = "beat"  # celery -A sheetsync.celery beat (or worker -B)
    CONSOLE = "console"  # sheetsync web
    EXPORTER = "exporter"  # sheetsync metrics
    CLI = "CLI"  # the other sheetsync commands
    LAUNCHERS = "make worker, docker-compose"  # not read by Python: the process counts


#: What a setting does in one process, when that needs saying ("" when it does not).
Readers = dict[Process, str]

WEB_APP, WORKER, BEAT = Process.WEB_APP, Process.WORKER, Process.BEAT
CONSOLE, EXPORTER, CLI = Process.CONSOLE, Process.EXPORTER, Process.CLI
#: Every process of a deployment.
ALL: Readers = {p: "" for p in (WEB_APP, WORKER, BEAT, CONSOLE, EXPORTER, CLI)}
#: ``sheetsync dlq replay --now`` flushes in the CLI process itself.
REPLAY_NOW = "dlq replay --now"
#: What writes rows: the workers, and the CLI when it replays.
WRITERS: Readers = {WORKER: "", CLI: REPLAY_NOW}
#: What a backfill reads, from the CLI or from the web app.
BACKFILL: Readers = {CLI: "backfill", WEB_APP: "sheetsync.backfill"}
#: The readers of Redis and the database that show the pipeline's state.
OBSERVERS: Readers = {CONSOLE: "", EXPORTER: "", CLI: "status"}

READERS: dict[str, Readers] = {
    "redis_url": ALL,
    "broker_url": ALL,
    "redis_connect_timeout_s": {
        WEB_APP: "the push after commit (emit without session=: the request), alerts",
        WORKER: "",
        BEAT: "",
        CLI: "",
    },
    "redis_timeout_s": {
        WEB_APP: "the push after commit (emit without session=: the request), alerts",
        WORKER: "",
        BEAT: "",
        CLI: "",
    },
    "database_url": {
        WEB_APP: "emit without session=, credential_reconnected, sheetsync.db; with "
        "session=, your session's database, which must be the same one",
        WORKER: "",
        CONSOLE: "",
        EXPORTER: "",
        CLI: "",
    },
    "pii_keys": {
        WEB_APP: "crypto.encrypt_answer_value, encrypt_refresh_token",
        WORKER: "",
        CLI: f"pii rotate, {REPLAY_NOW}",
    },
    "pii_accept_v1_tokens": {
        WEB_APP: "crypto.decrypt_answer_value, decrypt_refresh_token",
        WORKER: "also its start-up check of stored refresh tokens",
        CLI: f"pii rotate, {REPLAY_NOW}",
    },
    "google_api_endpoint": WRITERS,
    "google_token_uri": WRITERS,
    "development": ALL,
    "google_client_id": WRITERS,
    "google_client_secret": WRITERS,
    "google_timeout_s": WRITERS,
    "routing_cache_s": {WEB_APP: ""},
    "flush_delay_s": {
        WEB_APP: "a buffer's first flush",
        WORKER: "the next run when ids arrived during a flush; the reconciler's pushes",
    },
    "flush_threshold": {WEB_APP: "the push that reaches it", WORKER: ""},
    "flush_linger_s": {WORKER: ""},
    "flush_idle_s": {WORKER: ""},
    "batch_size": {**WRITERS, CLI: f"{REPLAY_NOW}, pii rotate"},
    "request_bytes_max": WRITERS,
    "cell_chars_max": WRITERS,
    "rate_limit_per_account": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_limit_per_project": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_read_limit_per_account": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_read_limit_per_project": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_write_limit_per_account": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_write_limit_per_project": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_window_s": {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"},
    "rate_margin_s": WRITERS,
    "rate_priority_weight": WRITERS,
    "lease_s": {WORKER: ""},
    "sweep_interval_s": {BEAT: ""},
    "sweep_grace_s": {WORKER: ""},
    "sweep_queued_grace_s": {WEB_APP: "", WORKER: ""},
    "reconcile_interval_s": {BEAT: ""},
    "reconcile_after_s": {WORKER: ""},
    "sheet_cache_ttl_s": {WEB_APP: "", WORKER: ""},
    "retry_max": {WORKER: ""},
    "retry_base_s": {WORKER: ""},
    "dlq_delay_s": {
        WEB_APP: "an answer for an owner whose credential is not VALID is parked at once",
        **WRITERS,
        CONSOLE: "",
    },
    "dlq_transient_delay_s": WRITERS,
    "dlq_dispatch_interval_s": {BEAT: ""},
    "visibility_timeout_s": ALL,
    "backfill_chunk": BACKFILL,
    "backfill_ahead": BACKFILL,
    "backfill_stall_s": BACKFILL,
    "tab_cell_limit": {**WRITERS, CONSOLE: ""},
    "tab_cell_alert_ratio": WRITERS,
    "timezone": WRITERS,
    "force_timezone": WRITERS,
    "header_answer_id": WRITERS,
    "header_submitter": WRITERS,
    "header_submitted_at": WRITERS,
    "alert_webhook_url": {WEB_APP: "malformed links", **WRITERS},
    "alert_timeout_s": {WEB_APP: "", **WRITERS},
    "owner_hook": WRITERS,
    "owner_hook_timeout_s": {WORKER: ""},
    "owner_hook_tries": {WORKER: ""},
    "owner_hook_retry_base_s": {WORKER: ""},
    "owner_hook_repeat_after_s": WRITERS,
    "link_authorizer": {WEB_APP: "", WORKER: ""},
    "log_format": {WORKER: "", BEAT: "", CONSOLE: "", EXPORTER: "", CLI: ""},
    "metrics_buffers_max": {EXPORTER: ""},
    "web_token": {CONSOLE: ""},
    "workers_priority": {Process.LAUNCHERS: ""},
    "workers_default": {Process.LAUNCHERS: ""},
    "workers_scheduled": {Process.LAUNCHERS: ""},
}
