"""Every ``SHEETSYNC_*`` setting, one field each: its type, default and bounds; its
docstring (its description in the docs' settings reference); and its
:class:`~sheetsync.settings.meta.Setting` (the processes it takes effect in, and the check
of its value, if any). Adding a setting is adding a field here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sheetsync.settings import checks
from sheetsync.settings.meta import (
    ALL,
    BACKFILL,
    BEAT,
    CLI,
    CONSOLE,
    ENV_PREFIX,
    EXPORTER,
    LAUNCHERS,
    ONLY_BEAT,
    ONLY_WEB_APP,
    ONLY_WORKER,
    RATES,
    REDIS_CLIENTS,
    REPLAY_NOW,
    WEB_APP,
    WEB_APP_AND_WORKER,
    WORKER,
    WRITERS,
    Setting,
)

#: Where Google's OAuth server lives; the emulator replaces it in development.
DEFAULT_GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL)
#: Where Google's Sheets API lives; the emulator replaces it in development.
DEFAULT_GOOGLE_API_ENDPOINT = "https://sheets.googleapis.com"
#: Google recommends keeping one request under about 2 MB.
DEFAULT_REQUEST_BYTES_MAX = 2_000_000
#: Google refuses a cell longer than this.
DEFAULT_CELL_CHARS_MAX = 50_000


class Fields(BaseSettings):
    """The fields of :class:`sheetsync.settings.Settings`, in the docs' order."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="ignore", use_attribute_docstrings=True
    )

    redis_url: Annotated[str, Setting(ALL, check=checks.redis_url_problem)] = Field(
        "redis://localhost:6379/0", repr=False
    )
    """The Redis of the buffers, jobs, the rate limiter and heartbeats. Behind Redis
    Sentinel: ``redis+sentinel://[:password@]host:26379,.../SERVICE/DB``. Over TLS:
    ``rediss://`` (``rediss+sentinel://``), certificate verified; ``ssl_ca_certs=``,
    ``ssl_certfile=``, ``ssl_keyfile=``, ``ssl_check_hostname=false`` and
    ``ssl_cert_reqs=none`` in the query change that."""
    broker_url: Annotated[str | None, Setting(ALL, check=checks.redis_url_problem)] = Field(
        None, repr=False
    )
    """The Celery broker; ``REDIS_URL`` when unset."""
    redis_connect_timeout_s: Annotated[float, Setting(REDIS_CLIENTS)] = Field(0.5, gt=0)
    """Seconds the Redis client of ``REDIS_URL`` (buffers, limiter, alerts' dedupe) waits
    for a connection before it gives up, with no retry. The web app's emit never waits
    for Redis inside the caller's transaction; without a session, its push after the
    commit waits at most this plus ``REDIS_TIMEOUT_S``."""
    redis_timeout_s: Annotated[float, Setting(REDIS_CLIENTS)] = Field(1.0, gt=0)
    """Seconds that client waits for a reply (or to send a command), with no retry: a
    paused or hung Redis costs one call this much. Workers make no blocking call (every
    Lua script and read is bounded), so the short default suits them too; a longer one
    in their own environment rides out longer Redis stalls."""
    database_url: Annotated[
        str,
        Setting(
            {
                WEB_APP: "emit without session=, credential_reconnected, sheetsync.db; with "
                "session=, your session's database, which must be the same one",
                WORKER: "",
                CONSOLE: "",
                EXPORTER: "",
                CLI: "",
            },
            check=checks.database_url_problem,
        ),
    ] = Field("sqlite:///sheetsync.db", repr=False)
    """Forms, answers, links, the ledger and dead letters: ``sqlite:///path`` or
    ``postgresql://user@host/db`` (PostgreSQL in production)."""
    pii_keys: Annotated[
        tuple[SecretStr, ...],
        NoDecode,
        BeforeValidator(checks.split_commas),
        Setting(
            {
                WEB_APP: "crypto.encrypt_answer_value, encrypt_refresh_token",
                WORKER: "",
                CLI: f"pii rotate, {REPLAY_NOW}",
            },
            check=checks.pii_keys_problem,
        ),
    ] = ()
    """Comma-separated keys for personal info at rest (``sheetsync keys generate``):
    urlsafe base64 of 32 random bytes, strictly decoded; weak keys (all zeros...) are
    refused. The first encrypts; every key decrypts."""
    pii_accept_v1_tokens: Annotated[
        bool,
        Setting(
            {
                WEB_APP: "crypto.decrypt_answer_value, decrypt_refresh_token",
                WORKER: "also its start-up check of stored refresh tokens",
                CLI: f"pii rotate, {REPLAY_NOW}",
            }
        ),
    ] = False
    """Decrypt version 1 tokens (bound to no row: one decrypts wherever it is pasted).
    Off: an upgrade from version 1 sets it in every process while ``sheetsync pii
    rotate`` rewrites them, then removes it."""

    google_api_endpoint: Annotated[str, Setting(WRITERS)] = DEFAULT_GOOGLE_API_ENDPOINT
    """Google's Sheets API; the emulator's URL in development."""
    google_token_uri: Annotated[str, Setting(WRITERS)] = DEFAULT_GOOGLE_TOKEN_URI
    """Google's OAuth token endpoint; the emulator's ``/token`` in development."""
    development: Annotated[bool, Setting(ALL)] = False
    """A development setup (the Sheets API emulator): allows a client secret to be sent
    to an endpoint that is not Google's over https. Never set it in production."""
    google_client_id: Annotated[str | None, Setting(WRITERS)] = None
    """Your OAuth client, the one the owners consented to; writing needs it and the
    secret."""
    google_client_secret: Annotated[SecretStr | None, Setting(WRITERS)] = None
    """Your OAuth client's secret. With a secret set, both Google URLs must be https
    (unless ``DEVELOPMENT``)."""
    google_clients_file: Annotated[str | None, Setting(WRITERS)] = None
    """A JSON file of more OAuth clients, each of its own Google Cloud project and so
    with its own quota: ``{"NAME": {"client_id": "...", "client_secret": "...",
    "write_limit_per_project": 300, "read_limit_per_project": 300}}`` (the limits
    optional: the ``RATE_*_PER_PROJECT`` settings otherwise). An owner whose credential
    names NAME (``google_credential.google_client``) is refreshed with that client and
    paced by that project's windows; the others by ``GOOGLE_CLIENT_ID``'s."""
    google_timeout_s: Annotated[float, Setting(WRITERS)] = Field(30.0, gt=0)
    """Seconds before a Sheets HTTP request is abandoned (and counted as transient)."""

    routing_cache_s: Annotated[float, Setting(ONLY_WEB_APP)] = Field(5.0, ge=0)
    """How long a process keeps a form's routes (each link's owner and plan) for emit.
    Whether a link exists is never cached."""

    flush_delay_s: Annotated[
        float,
        Setting(
            {
                WEB_APP: "a buffer's first flush",
                WORKER: "the next run when ids arrived during a flush; the reconciler's pushes",
            }
        ),
    ] = Field(10.0, ge=0)
    """Debounce: a buffer is flushed this long after its first id. Its first flush is
    scheduled by the process that pushes that id (the web app), with its own value."""
    flush_threshold: Annotated[int, Setting({WEB_APP: "the push that reaches it", WORKER: ""})] = (
        Field(500, ge=1)
    )
    """A buffer this long is flushed at once (by the push that reaches it)."""
    flush_linger_s: Annotated[float, Setting(ONLY_WORKER)] = Field(2.0, ge=0)
    """While a burst is still arriving, a run waits in-process up to this long for a
    fuller batch; a longer wait (until the batch would be full, or the oldest id is
    FLUSH_DELAY_S old) is a rescheduled task that looks again every half second."""
    flush_idle_s: Annotated[float, Setting(ONLY_WORKER)] = Field(0.5, gt=0)
    """No new id for this long: the burst is over, and what is buffered goes at once."""
    batch_size: Annotated[int, Setting({**WRITERS, CLI: f"{REPLAY_NOW}, pii rotate"})] = Field(
        5000, ge=1
    )
    """Ids read per batch (one LRANGE, one SELECT, at most one append)."""
    request_bytes_max: Annotated[int, Setting(WRITERS)] = Field(
        DEFAULT_REQUEST_BYTES_MAX, ge=10_000
    )
    """A batch is cut to keep one request under this (Google advises about 2 MB)."""
    cell_chars_max: Annotated[int, Setting(WRITERS)] = Field(DEFAULT_CELL_CHARS_MAX, ge=100)
    """Longer cells are cut, with a visible marker (Google's limit)."""

    rate_limit_per_account: Annotated[int, Setting(RATES)] = Field(60, ge=1)
    """Sheets requests of each kind per window for one Google account: this many reads
    and, apart, this many writes, as Google counts them (60 a minute each). The default
    of the four RATE_READ/WRITE_LIMIT_PER_ACCOUNT settings. (Up to 0.1.0 it bounded reads and
    writes together; one value now gives each kind its own window of that size.)"""
    rate_limit_per_project: Annotated[int, Setting(RATES)] = Field(300, ge=1)
    """Sheets requests of each kind per window for the whole project: this many reads
    and, apart, this many writes (Google's 300 a minute each). The default of the
    RATE_READ/WRITE_LIMIT_PER_PROJECT settings."""
    rate_read_limit_per_account: Annotated[int | None, Setting(RATES)] = Field(None, ge=1)
    """Read requests (spreadsheets.get, values.get) per window for one Google account;
    unset: RATE_LIMIT_PER_ACCOUNT."""
    rate_write_limit_per_account: Annotated[int | None, Setting(RATES)] = Field(None, ge=1)
    """Write requests (values.append, values.update, spreadsheets.batchUpdate) per window
    for one Google account; unset: RATE_LIMIT_PER_ACCOUNT."""
    rate_read_limit_per_project: Annotated[int | None, Setting(RATES)] = Field(None, ge=1)
    """Read requests per window for the whole project; unset: RATE_LIMIT_PER_PROJECT."""
    rate_write_limit_per_project: Annotated[int | None, Setting(RATES)] = Field(None, ge=1)
    """Write requests per window for the whole project; unset: RATE_LIMIT_PER_PROJECT."""
    rate_window_s: Annotated[float, Setting(RATES)] = Field(60.0, gt=0)
    """The sliding window of both rate limits."""
    rate_priority_weight: Annotated[float, Setting(WRITERS)] = Field(4.0, ge=1, le=1000)
    """When owners wait for the project's window, a paying owner (PRO, PRO_PLUS,
    ENTERPRISE) gets this many turns for each turn of a FREE owner: first in line, and
    never all of it (every waiting account keeps a share)."""
    rate_margin_s: Annotated[float, Setting(WRITERS)] = Field(0.5, ge=0)
    """Our window is this much longer than Google's: it covers the time between taking
    a slot and the request reaching Google, so spacing survives the trip."""

    lease_s: Annotated[float, Setting(ONLY_WORKER)] = Field(60.0, ge=1.0)
    """How long a running flush holds its buffer before the sweeper may take it over.
    Every Sheets request must fit in what is left of it (at least half a second)."""
    sweep_interval_s: Annotated[float, Setting(ONLY_BEAT)] = Field(30.0, gt=0)
    """How often beat runs the sweeper, which sends lost flush tasks again."""
    sweep_grace_s: Annotated[float, Setting(ONLY_WORKER)] = Field(60.0, ge=0)
    """A scheduled job this far past due is re-dispatched by the sweeper."""
    sweep_queued_grace_s: Annotated[float, Setting(WEB_APP_AND_WORKER)] = Field(600.0, ge=0)
    """The same, for a job whose task is known to be in the broker's queue (busy
    workers are not a reason to send it again)."""
    reconcile_interval_s: Annotated[float, Setting(ONLY_BEAT)] = Field(300.0, gt=0)
    """How often beat runs the reconciler, which pushes answers whose push was lost."""
    reconcile_after_s: Annotated[float, Setting(ONLY_WORKER)] = Field(600.0, ge=0)
    """ENQUEUED transactions older than this, with no buffer or job, are pushed again."""
    sheet_cache_ttl_s: Annotated[int, Setting(WEB_APP_AND_WORKER)] = Field(86_400, ge=60)
    """A buffer's sheet cache (title, time zone, header check, last row) lives this
    long unused; row 1 is checked again after it."""

    retry_max: Annotated[int, Setting(ONLY_WORKER)] = Field(5, ge=0)
    """Retries of a transient failure (429, 5xx, timeout) before the buffer goes to a
    TRANSIENT_EXHAUSTED dead letter."""
    retry_base_s: Annotated[float, Setting(ONLY_WORKER)] = Field(1.0, ge=0)
    """Backoff windows are [base*2^(n-1), base*2^n) seconds: 0-1, 1-2, 2-4, 4-8, 8-16."""
    dlq_delay_s: Annotated[
        float,
        Setting(
            {
                WEB_APP: "an answer for an owner whose credential is not VALID is parked at once",
                **WRITERS,
                CONSOLE: "",
            }
        ),
    ] = Field(604_800.0, ge=0)
    """A CREDENTIAL dead letter is retried after this long (or once the owner
    reconnects)."""
    dlq_transient_delay_s: Annotated[float, Setting(WRITERS)] = Field(3_600.0, ge=0)
    """Other dead letters (transient, configuration, full sheet, unexpected) are
    retried after this long."""
    dlq_dispatch_interval_s: Annotated[float, Setting(ONLY_BEAT)] = Field(60.0, gt=0)
    """How often beat dispatches the dead letters that are due."""
    visibility_timeout_s: Annotated[float, Setting(ALL)] = Field(3_600.0, gt=0)
    """The Redis broker's visibility timeout; no countdown may exceed it."""

    backfill_chunk: Annotated[int, Setting(BACKFILL)] = Field(1000, ge=1, le=20_000)
    """Answers a backfill reads and records per short transaction (a keyset-paginated
    chunk, so no table stays locked)."""
    backfill_ahead: Annotated[int, Setting(BACKFILL)] = Field(10_000, ge=1)
    """Ids a backfill lets wait in a link's buffer before its next chunk waits for the
    workers to drain it (it takes one buffer's share, never a queue)."""
    backfill_stall_s: Annotated[float, Setting(BACKFILL)] = Field(600.0, gt=0)
    """A backfill gives up (resumably) when a buffer has not drained for this long."""

    tab_cell_limit: Annotated[int, Setting({**WRITERS, CONSOLE: ""})] = Field(5_000_000, ge=10)
    """Cells one tab of a link may hold (rows x the header's width, as sheetsync
    writes them) before its answers roll over to a new tab "<title> (2)". Google's
    limit, 10,000,000, is per spreadsheet across every tab, so the default leaves
    room for the link's tab and one roll-over; past Google's own limit, answers
    wait in a dead letter (docs/ARCHITECTURE.md, "Full sheets roll over")."""
    tab_cell_alert_ratio: Annotated[float, Setting(WRITERS)] = Field(0.8, gt=0, le=1)
    """The share of the tab's limit at which the operator is alerted (once per link)."""

    timezone: Annotated[str, Setting(WRITERS, check=checks.timezone_problem)] = "UTC"
    """The time zone (an IANA name, e.g. ``Asia/Seoul``) of "Submitted at" and DATE
    cells for a spreadsheet whose own time zone is unknown."""
    force_timezone: Annotated[bool, Setting(WRITERS)] = False
    """Use ``TIMEZONE`` for every spreadsheet, not only as the fallback."""
    header_answer_id: Annotated[str, Setting(WRITERS)] = "Answer ID"
    """The header of column A."""
    header_submitter: Annotated[str, Setting(WRITERS)] = "Submitter"
    """The header of column B."""
    header_submitted_at: Annotated[str, Setting(WRITERS)] = "Submitted at"
    """The header of column C."""

    alert_webhook_url: Annotated[
        SecretStr | None,
        Setting({WEB_APP: "malformed links", **WRITERS}, check=checks.insecure_url_problem),
    ] = None
    """Operator alerts, as Slack-compatible ``{"text": ...}``: https (plain http only to
    localhost)."""
    alert_timeout_s: Annotated[float, Setting({WEB_APP: "", **WRITERS})] = Field(3.0, gt=0)
    """Seconds per alert request."""

    owner_hook: Annotated[SecretStr | None, Setting(WRITERS, check=checks.hook_problem)] = None
    """Owner notifications (:mod:`sheetsync.notify`): an https webhook URL that gets
    them as JSON (plain http only to localhost), or a dotted path
    ``package.module:function`` to a callable."""
    owner_hook_timeout_s: Annotated[float, Setting(ONLY_WORKER)] = Field(5.0, gt=0)
    """Seconds a webhook may take; a callable gets the task's time limit from it too."""
    owner_hook_tries: Annotated[int, Setting(ONLY_WORKER)] = Field(3, ge=1, le=10)
    """Tries per notification."""
    owner_hook_retry_base_s: Annotated[float, Setting(ONLY_WORKER)] = Field(30.0, ge=0)
    """The backoff between tries: base, 2 x base, 4 x base... seconds."""
    owner_hook_repeat_after_s: Annotated[int, Setting(WRITERS)] = Field(3600, ge=1)
    """The same topic goes to the same owner at most once in this many seconds."""

    link_authorizer: Annotated[str | None, Setting(WEB_APP_AND_WORKER)] = None
    """Who may send a form's answers to a sheet: by default only the form's owner may
    create its links. A dotted path (``package.module:function``) to a function
    ``(session, link, form) -> bool`` can allow collaborators."""

    log_format: Annotated[
        Literal["text", "json"], Setting({WORKER: "", BEAT: "", CONSOLE: "", EXPORTER: "", CLI: ""})
    ] = "text"
    """``text`` (the default) or ``json``: one JSON object per line, for a log pipeline."""
    metrics_buffers_max: Annotated[int, Setting({EXPORTER: ""})] = Field(10_000, ge=1)
    """Buffers the metrics exporter reads per scrape, oldest first (the depth and age
    gauges cover these; ``sheetsync_buffers`` counts them all)."""
    web_token: Annotated[
        SecretStr | None, Setting({CONSOLE: ""}, check=checks.credential_problem)
    ] = None
    """The web console's credential (``sheetsync web``): sent as a bearer token or as the
    basic-auth password; at least 32 characters (``openssl rand -hex 32``). Without it
    the console serves loopback addresses only."""

    workers_priority: Annotated[int, Setting(LAUNCHERS)] = Field(5, ge=1)
    """Processes of the worker for the priority queue (PRO, PRO_PLUS and ENTERPRISE
    owners)."""
    workers_default: Annotated[int, Setting(LAUNCHERS)] = Field(3, ge=1)
    """Processes of the worker for the default queue (FREE owners)."""
    workers_scheduled: Annotated[int, Setting(LAUNCHERS)] = Field(2, ge=1)
    """Processes of the worker for the scheduled queue (replays and repairs)."""
