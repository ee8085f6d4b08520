"""Settings: one frozen, typed object read from ``SHEETSYNC_*`` environment variables.

pydantic-settings does the parsing: it is well kept, types every field, and its errors
name the field, which we turn into one line that names the variable. Secrets are
``SecretStr`` or kept out of the repr.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sheetsync import setting_checks as checks
from sheetsync.errors import ConfigError
from sheetsync.keys import RateKind

ENV_PREFIX = "SHEETSYNC_"
#: ``SHEETSYNC_*`` variables that are read elsewhere, not settings (tests, benchmarks, CLI).
NON_SETTING_VARIABLES = ("SHEETSYNC_CLI_TRACEBACK", "SHEETSYNC_TEST_", "SHEETSYNC_BENCH_")
#: The databases sheetsync runs on, by URL scheme.
DATABASE_SCHEMES = ("sqlite", "postgresql", "postgres", "postgresql+psycopg")

log = logging.getLogger(__name__)

#: Where Google's OAuth server lives; the emulator replaces it in development.
DEFAULT_GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL)
#: Where Google's Sheets API lives; the emulator replaces it in development.
DEFAULT_GOOGLE_API_ENDPOINT = "https://sheets.googleapis.com"
#: Google recommends keeping one request under about 2 MB.
DEFAULT_REQUEST_BYTES_MAX = 2_000_000
#: Google refuses a cell longer than this.
DEFAULT_CELL_CHARS_MAX = 50_000


class Settings(BaseSettings):
    """Everything sheetsync reads from the environment. Immutable once built.

    Each field's docstring is its description in the docs' settings reference, and
    :data:`sheetsync.setting_readers.READERS` says which processes it takes effect in.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="ignore", use_attribute_docstrings=True
    )

    redis_url: str = Field("redis://localhost:6379/0", repr=False)
    """The Redis of the buffers, jobs, the rate limiter and heartbeats. Behind Redis
    Sentinel: ``redis+sentinel://[:password@]host:26379,.../SERVICE/DB``. Over TLS:
    ``rediss://`` (``rediss+sentinel://``), certificate verified; ``ssl_ca_certs=``,
    ``ssl_certfile=``, ``ssl_keyfile=``, ``ssl_check_hostname=false`` and
    ``ssl_cert_reqs=none`` in the query change that."""
    broker_url: str | None = Field(None, repr=False)
    """The Celery broker; ``REDIS_URL`` when unset."""
    redis_connect_timeout_s: float = Field(0.5, gt=0)
    """Seconds the Redis client of ``REDIS_URL`` (buffers, limiter, alerts' dedupe) waits
    for a connection before it gives up, with no retry. The web app's emit never waits
    for Redis inside the caller's transaction; without a session, its push after the
    commit waits at most this plus ``REDIS_TIMEOUT_S``."""
    redis_timeout_s: float = Field(1.0, gt=0)
    """Seconds that client waits for a reply (or to send a command), with no retry: a
    paused or hung Redis costs one call this much. Workers make no blocking call (every
    Lua script and read is bounded), so the short default suits them too; a longer one
    in their own environment rides out longer Redis stalls."""
    database_url: str = Field("sqlite:///sheetsync.db", repr=False)
    """Forms, answers, links, the ledger and dead letters: ``sqlite:///path`` or
    ``postgresql://user@host/db`` (PostgreSQL in production)."""
    pii_keys: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    """Comma-separated keys for personal info at rest (``sheetsync keys generate``):
    urlsafe base64 of 32 random bytes, strictly decoded; weak keys (all zeros...) are
    refused. The first encrypts; every key decrypts."""
    pii_accept_v1_tokens: bool = False
    """Decrypt version 1 tokens (bound to no row: one decrypts wherever it is pasted).
    Off: an upgrade from version 1 sets it in every process while ``sheetsync pii
    rotate`` rewrites them, then removes it."""

    google_api_endpoint: str = DEFAULT_GOOGLE_API_ENDPOINT
    """Google's Sheets API; the emulator's URL in development."""
    google_token_uri: str = DEFAULT_GOOGLE_TOKEN_URI
    """Google's OAuth token endpoint; the emulator's ``/token`` in development."""
    development: bool = False
    """A development setup (the Sheets API emulator): allows a client secret to be sent
    to an endpoint that is not Google's over https. Never set it in production."""
    google_client_id: str | None = None
    """Your OAuth client, the one the owners consented to; writing needs it and the
    secret."""
    google_client_secret: SecretStr | None = None
    """Your OAuth client's secret. With a secret set, both Google URLs must be https
    (unless ``DEVELOPMENT``)."""
    google_timeout_s: float = Field(30.0, gt=0)
    """Seconds before a Sheets HTTP request is abandoned (and counted as transient)."""

    routing_cache_s: float = Field(5.0, ge=0)
    """How long a process keeps a form's routes (each link's owner and plan) for emit.
    Whether a link exists is never cached."""

    flush_delay_s: float = Field(10.0, ge=0)
    """Debounce: a buffer is flushed this long after its first id. Its first flush is
    scheduled by the process that pushes that id (the web app), with its own value."""
    flush_threshold: int = Field(500, ge=1)
    """A buffer this long is flushed at once (by the push that reaches it)."""
    flush_linger_s: float = Field(2.0, ge=0)
    """While a burst is still arriving, a run waits in-process up to this long for a
    fuller batch; a longer wait (until the batch would be full, or the oldest id is
    FLUSH_DELAY_S old) is a rescheduled task that looks again every half second."""
    flush_idle_s: float = Field(0.5, gt=0)
    """No new id for this long: the burst is over, and what is buffered goes at once."""
    batch_size: int = Field(5000, ge=1)
    """Ids read per batch (one LRANGE, one SELECT, at most one append)."""
    request_bytes_max: int = Field(DEFAULT_REQUEST_BYTES_MAX, ge=10_000)
    """A batch is cut to keep one request under this (Google advises about 2 MB)."""
    cell_chars_max: int = Field(DEFAULT_CELL_CHARS_MAX, ge=100)
    """Longer cells are cut, with a visible marker (Google's limit)."""

    rate_limit_per_account: int = Field(60, ge=1)
    """Sheets requests of each kind per window for one Google account: this many reads
    and, apart, this many writes, as Google counts them (60 a minute each). The default
    of the four RATE_READ/WRITE_LIMIT_PER_ACCOUNT settings. (Up to 0.1.0 it bounded reads and
    writes together; one value now gives each kind its own window of that size.)"""
    rate_limit_per_project: int = Field(300, ge=1)
    """Sheets requests of each kind per window for the whole project: this many reads
    and, apart, this many writes (Google's 300 a minute each). The default of the
    RATE_READ/WRITE_LIMIT_PER_PROJECT settings."""
    rate_read_limit_per_account: int | None = Field(None, ge=1)
    """Read requests (spreadsheets.get, values.get) per window for one Google account;
    unset: RATE_LIMIT_PER_ACCOUNT."""
    rate_write_limit_per_account: int | None = Field(None, ge=1)
    """Write requests (values.append, values.update, spreadsheets.batchUpdate) per window
    for one Google account; unset: RATE_LIMIT_PER_ACCOUNT."""
    rate_read_limit_per_project: int | None = Field(None, ge=1)
    """Read requests per window for the whole project; unset: RATE_LIMIT_PER_PROJECT."""
    rate_write_limit_per_project: int | None = Field(None, ge=1)
    """Write requests per window for the whole project; unset: RATE_LIMIT_PER_PROJECT."""
    rate_window_s: float = Field(60.0, gt=0)
    """The sliding window of both rate limits."""
    rate_priority_weight: float = Field(4.0, ge=1, le=1000)
    """When owners wait for the project's window, a paying owner (PRO, PRO_PLUS,
    ENTERPRISE) gets this many turns for each turn of a FREE owner: first in line, and
    never all of it (every waiting account keeps a share)."""
    rate_margin_s: float = Field(0.5, ge=0)
    """Our window is this much longer than Google's: it covers the time between taking
    a slot and the request reaching Google, so spacing survives the trip."""

    lease_s: float = Field(60.0, ge=1.0)
    """How long a running flush holds its buffer before the sweeper may take it over.
    Every Sheets request must fit in what is left of it (at least half a second)."""
    sweep_interval_s: float = Field(30.0, gt=0)
    """How often beat runs the sweeper, which sends lost flush tasks again."""
    sweep_grace_s: float = Field(60.0, ge=0)
    """A scheduled job this far past due is re-dispatched by the sweeper."""
    sweep_queued_grace_s: float = Field(600.0, ge=0)
    """The same, for a job whose task is known to be in the broker's queue (busy
    workers are not a reason to send it again)."""
    reconcile_interval_s: float = Field(300.0, gt=0)
    """How often beat runs the reconciler, which pushes answers whose push was lost."""
    reconcile_after_s: float = Field(600.0, ge=0)
    """ENQUEUED transactions older than this, with no buffer or job, are pushed again."""
    sheet_cache_ttl_s: int = Field(86_400, ge=60)
    """A buffer's sheet cache (title, time zone, header check, last row) lives this
    long unused; row 1 is checked again after it."""

    retry_max: int = Field(5, ge=0)
    """Retries of a transient failure (429, 5xx, timeout) before the buffer goes to a
    TRANSIENT_EXHAUSTED dead letter."""
    retry_base_s: float = Field(1.0, ge=0)
    """Backoff windows are [base*2^(n-1), base*2^n) seconds: 0-1, 1-2, 2-4, 4-8, 8-16."""
    dlq_delay_s: float = Field(604_800.0, ge=0)
    """A CREDENTIAL dead letter is retried after this long (or once the owner
    reconnects)."""
    dlq_transient_delay_s: float = Field(3_600.0, ge=0)
    """Other dead letters (transient, configuration, full sheet, unexpected) are
    retried after this long."""
    dlq_dispatch_interval_s: float = Field(60.0, gt=0)
    """How often beat dispatches the dead letters that are due."""
    visibility_timeout_s: float = Field(3_600.0, gt=0)
    """The Redis broker's visibility timeout; no countdown may exceed it."""

    backfill_chunk: int = Field(1000, ge=1, le=20_000)
    """Answers a backfill reads and records per short transaction (a keyset-paginated
    chunk, so no table stays locked)."""
    backfill_ahead: int = Field(10_000, ge=1)
    """Ids a backfill lets wait in a link's buffer before its next chunk waits for the
    workers to drain it (it takes one buffer's share, never a queue)."""
    backfill_stall_s: float = Field(600.0, gt=0)
    """A backfill gives up (resumably) when a buffer has not drained for this long."""

    tab_cell_limit: int = Field(5_000_000, ge=10)
    """Cells one tab of a link may hold (rows x the header's width, as sheetsync
    writes them) before its answers roll over to a new tab "<title> (2)". Google's
    limit, 10,000,000, is per spreadsheet across every tab, so the default leaves
    room for the link's tab and one roll-over; past Google's own limit, answers
    wait in a dead letter (docs/ARCHITECTURE.md, "Full sheets roll over")."""
    tab_cell_alert_ratio: float = Field(0.8, gt=0, le=1)
    """The share of the tab's limit at which the operator is alerted (once per link)."""

    timezone: str = "UTC"
    """The time zone (an IANA name, e.g. ``Asia/Seoul``) of "Submitted at" and DATE
    cells for a spreadsheet whose own time zone is unknown."""
    force_timezone: bool = False
    """Use ``TIMEZONE`` for every spreadsheet, not only as the fallback."""
    header_answer_id: str = "Answer ID"
    """The header of column A."""
    header_submitter: str = "Submitter"
    """The header of column B."""
    header_submitted_at: str = "Submitted at"
    """The header of column C."""

    alert_webhook_url: SecretStr | None = None
    """Operator alerts, as Slack-compatible ``{"text": ...}``: https (plain http only to
    localhost)."""
    alert_timeout_s: float = Field(3.0, gt=0)
    """Seconds per alert request."""

    owner_hook: SecretStr | None = None
    """Owner notifications (:mod:`sheetsync.notify`): an https webhook URL that gets
    them as JSON (plain http only to localhost), or a dotted path
    ``package.module:function`` to a callable."""
    owner_hook_timeout_s: float = Field(5.0, gt=0)
    """Seconds a webhook may take; a callable gets the task's time limit from it too."""
    owner_hook_tries: int = Field(3, ge=1, le=10)
    """Tries per notification."""
    owner_hook_retry_base_s: float = Field(30.0, ge=0)
    """The backoff between tries: base, 2 x base, 4 x base... seconds."""
    owner_hook_repeat_after_s: int = Field(3600, ge=1)
    """The same topic goes to the same owner at most once in this many seconds."""

    link_authorizer: str | None = None
    """Who may send a form's answers to a sheet: by default only the form's owner may
    create its links. A dotted path (``package.module:function``) to a function
    ``(session, link, form) -> bool`` can allow collaborators."""

    log_format: Literal["text", "json"] = "text"
    """``text`` (the default) or ``json``: one JSON object per line, for a log pipeline."""
    metrics_buffers_max: int = Field(10_000, ge=1)
    """Buffers the metrics exporter reads per scrape, oldest first (the depth and age
    gauges cover these; ``sheetsync_buffers`` counts them all)."""
    web_token: SecretStr | None = None
    """The web console's credential (``sheetsync web``): sent as a bearer token or as the
    basic-auth password; at least 32 characters (``openssl rand -hex 32``). Without it
    the console serves loopback addresses only."""

    workers_priority: int = Field(5, ge=1)
    """Processes of the worker for the priority queue (PRO, PRO_PLUS and ENTERPRISE
    owners)."""
    workers_default: int = Field(3, ge=1)
    """Processes of the worker for the default queue (FREE owners)."""
    workers_scheduled: int = Field(2, ge=1)
    """Processes of the worker for the scheduled queue (replays and repairs)."""

    @field_validator(
        "broker_url",
        "google_client_id",
        "google_client_secret",
        "alert_webhook_url",
        "link_authorizer",
        "web_token",
        "owner_hook",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("pii_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                return ()
            parts = [part.strip() for part in value.split(",")]
            if not all(parts):
                raise ValueError("holds an empty key (a stray comma?)")
            return tuple(parts)
        return value

    @field_validator("pii_keys")
    @classmethod
    def _check_keys(cls, keys: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for position, key in enumerate(keys, start=1):
            problem = checks.pii_key_problem(key.get_secret_value())
            if problem:
                raise ValueError(f"key #{position} {problem}")
        return keys

    @field_validator("web_token")
    @classmethod
    def _check_web_token(cls, token: SecretStr | None) -> SecretStr | None:
        problem = checks.credential_problem(token.get_secret_value()) if token else None
        if problem:
            raise ValueError(problem)
        return token

    @field_validator("alert_webhook_url")
    @classmethod
    def _check_webhook(cls, url: SecretStr | None) -> SecretStr | None:
        if url is not None:
            problem = checks.insecure_url_problem(url.get_secret_value())
            if problem:
                raise ValueError(problem)
        return url

    @field_validator("owner_hook")
    @classmethod
    def _check_owner_hook(cls, hook: SecretStr | None) -> SecretStr | None:
        if hook is None:
            return None
        problem = checks.hook_problem(hook.get_secret_value())
        if problem:
            raise ValueError(problem)
        return hook

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, name: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {name!r}") from None
        return name

    @field_validator("database_url")
    @classmethod
    def _check_database(cls, url: str) -> str:
        scheme = url.partition("://")[0].lower()
        if not url.partition("://")[1] or scheme not in DATABASE_SCHEMES:
            shown = scheme if url.partition("://")[1] else "a URL without a scheme"
            raise ValueError(
                f"sheetsync runs on SQLite (sqlite:///path) or PostgreSQL "
                f"(postgresql://user@host/db), not {shown}"
            )
        return url

    @model_validator(mode="after")
    def _check_urls(self) -> Settings:
        from sheetsync import redis_urls

        for name in ("redis_url", "broker_url"):
            url = getattr(self, name)
            if url is None:
                continue
            scheme = url.partition("://")[0].lower()
            if scheme not in (*redis_urls.SENTINEL_SCHEMES, *redis_urls.PLAIN_SCHEMES):
                raise ValueError(
                    f"{ENV_PREFIX}{name.upper()}: must be a redis:// or rediss:// (or "
                    "redis+sentinel://) URL"
                )
            try:
                if scheme in redis_urls.SENTINEL_SCHEMES:
                    redis_urls.parse_sentinel(url)
                else:
                    redis_urls.split_tls(url)
            except ValueError as exc:
                raise ValueError(f"{ENV_PREFIX}{name.upper()}: {exc}") from None
        return self

    @model_validator(mode="after")
    def _check_google(self) -> Settings:
        # A client secret (and with it refresh tokens and decrypted rows) goes only to
        # Google over https, unless this is a development setup on purpose.
        if self.google_client_secret is None or self.development:
            return self
        for name in ("google_api_endpoint", "google_token_uri"):
            if not getattr(self, name).lower().startswith("https://"):
                raise ValueError(
                    f"{ENV_PREFIX}{name.upper()}: is not https, and a client secret is set: "
                    f"sheetsync would send the secret, refresh tokens and answers to it in "
                    f"plain text (unset it to use Google; for the emulator set "
                    f"{ENV_PREFIX}DEVELOPMENT=true)"
                )
        return self

    @model_validator(mode="after")
    def _check_delays(self) -> Settings:
        # Celery's Redis transport runs a task twice once its countdown passes the
        # visibility timeout, so every delay sent as a countdown must stay below it.
        limit = self.visibility_timeout_s
        longest_retry = self.retry_base_s * 2**self.retry_max
        for name, value in (
            ("flush_delay_s", self.flush_delay_s),
            ("rate_window_s", self.rate_window_s + self.rate_margin_s),
            ("retry_base_s", longest_retry),
            ("google_timeout_s", self.google_timeout_s),
        ):
            if value >= limit:
                raise ValueError(
                    f"{ENV_PREFIX}{name.upper()}: gives a countdown of {value:g} s, which must "
                    f"stay below SHEETSYNC_VISIBILITY_TIMEOUT_S ({limit:g} s)"
                )
        return self

    def rate_limit(self, kind: RateKind, scope: Literal["account", "project"]) -> int:
        """Requests of ``kind`` per window, for one account or for the project."""
        specific: int | None = getattr(self, f"rate_{kind}_limit_per_{scope}")
        if specific is not None:
            return specific
        general: int = getattr(self, f"rate_limit_per_{scope}")
        return general

    @property
    def celery_broker_url(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def pii_key_bytes(self) -> tuple[bytes, ...]:
        keys = (checks.strict_urlsafe_b64decode(k.get_secret_value()) for k in self.pii_keys)
        return tuple(key for key in keys if key is not None)  # all valid: checked at load

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Read the environment; a bad value raises one-line :class:`ConfigError`.

        A ``SHEETSYNC_*`` variable that is not a setting (a typo, most likely) is logged
        as a warning: it is not an error, because platforms set variables of their own
        (Kubernetes adds ``<SERVICE>_PORT`` for every service).
        """
        try:
            settings = cls(**overrides)
        except ValidationError as exc:
            raise ConfigError(_one_line(exc)) from None
        for warning in unknown_variables(os.environ):
            if warning not in _warned:  # settings are read again (CLI, tests): say it once
                _warned.add(warning)
                log.warning("%s", warning, extra={"event": "settings.unknown_variable"})
        return settings


#: The unknown-variable warnings this process gave already.
_warned: set[str] = set()


def unknown_variables(environ: Any) -> list[str]:
    """One line per ``SHEETSYNC_*`` variable in ``environ`` that is not a setting."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    lines = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        if name.startswith(NON_SETTING_VARIABLES):
            continue
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"{name} is not a sheetsync setting and is ignored{hint}")
    return lines


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["loc"]:
        variable = f"{ENV_PREFIX}{str(error['loc'][0]).upper()}"
        return f"{variable}: {message}"
    return message


@functools.cache
def _load_once() -> Settings | ConfigError:
    try:
        return Settings.load()
    except ConfigError as exc:
        return exc


def get_settings() -> Settings:
    """The process-wide settings, read and checked once: a bad value is found once, and
    every later call raises the same one-line error at once."""
    loaded = _load_once()
    if isinstance(loaded, ConfigError):
        raise ConfigError(str(loaded))
    return loaded


def reset_settings() -> None:
    """Forget the cached settings (tests and the CLI change the environment)."""
    _load_once.cache_clear()
