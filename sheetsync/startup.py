"""Start-up checks: what each sheetsync process needs, checked once before it serves.

A process that starts with a configuration it cannot work with must stop at once, with
one line that names the setting, rather than fail later in a way that blames someone
else: a worker without ``SHEETSYNC_PII_KEYS`` would otherwise park every owner's
answers, a worker on a missing SQLite file would create an empty one and fail every
flush. :func:`check_process` is called by the Celery signals (a worker's
``worker_init``, beat's ``beat_init``: ``sheetsync.celery.application``), by
``sheetsync web`` and by ``sheetsync metrics``; a web app calls :func:`check_settings`.

What each role needs (:data:`NEEDS`):

- a worker: every setting valid, the functions ``SHEETSYNC_LINK_AUTHORIZER`` and
  ``SHEETSYNC_OWNER_HOOK`` name (importable), the PII keys, Google's client id and
  secret, the database (reachable, with the sheetsync schema at this version's Alembic revision),
  no version 1 token unless they are accepted (an upgrade): refresh tokens, and the
  personal info of the first and last answers by id (:data:`VERSION_1_SAMPLE`), Redis
  and the broker (reachable);
- beat: Redis (its heartbeat) and the broker (where it sends the periodic tasks); the
  tasks themselves run on workers;
- the console and the exporter: the database. Not Redis: they are how an operator sees
  a Redis outage (a banner, ``sheetsync_source_up{source="redis"} 0``), so they start
  without it.

Every failure is a :class:`ConfigError` with one line; nothing here creates a database.
A process that passes logs one WARNING line per downgrade its settings ask for
(:func:`downgrades`: Redis TLS without checks, version 1 tokens accepted, a development
setup); ``sheetsync status`` and the console's overview show the same lines.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from sheetsync.downgrades import downgrades
from sheetsync.errors import ConfigError
from sheetsync.settings import Settings, get_settings, reset_settings
from sheetsync.text import mask_url

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.exc import DBAPIError

    from sheetsync.crypto import Keyring

log = logging.getLogger(__name__)

Role = Literal["worker", "beat", "console", "exporter"]
Need = Literal[
    "hooks", "pii_keys", "google_client", "database", "version_1_tokens", "redis", "broker"
]

#: What each process needs before it serves, checked in this order (every role needs
#: valid settings first).
NEEDS: dict[Role, tuple[Need, ...]] = {
    "worker": (
        "hooks",
        "pii_keys",
        "google_client",
        "database",
        "version_1_tokens",
        "redis",
        "broker",
    ),
    "beat": ("redis", "broker"),
    "console": ("database",),
    "exporter": ("database",),
}
#: How a role is named in its one line.
ROLE_NAMES: dict[Role, str] = {
    "worker": "a worker",
    "beat": "beat",
    "console": "the console",
    "exporter": "the metrics exporter",
}
#: Seconds a start-up check waits for a database or Redis to answer.
DEFAULT_CONNECT_TIMEOUT_S = 5
#: Answers a worker's start reads for version 1 tokens: this many at each end of the
#: primary key's order (an index), so its cost does not grow with the table.
VERSION_1_SAMPLE = 1000


def check_settings() -> Settings:
    """Read and check the settings now: call it when the web app starts, so that a bad
    value stops the start-up with one line instead of failing requests later. It also
    checks the database URL's driver is installed, and imports
    ``SHEETSYNC_LINK_AUTHORIZER`` and a dotted ``SHEETSYNC_OWNER_HOOK``, if set."""
    from sheetsync.db import require_driver

    reset_settings()
    settings = get_settings()
    require_driver(settings.database_url)  # a PostgreSQL URL needs the [postgres] extra
    require_hooks(settings, "worker")
    warn_about_downgrades(settings)
    return settings


def check_process(role: Role) -> Settings:
    """Check everything ``role`` needs (:data:`NEEDS`); returns the settings, or raises
    the first problem as a one-line :class:`ConfigError`."""
    reset_settings()
    settings = get_settings()
    for need in NEEDS[role]:
        _CHECKS[need](settings, role)
    warn_about_downgrades(settings)
    return settings


def warn_about_downgrades(settings: Settings) -> None:
    """A WARNING per downgrade. A worker checks before Celery sets its log handlers up:
    then the lines get a stderr handler in ``SHEETSYNC_LOG_FORMAT`` of their own, not
    Python's bare last resort."""
    from sheetsync import logs

    own = None if log.hasHandlers() else logging.StreamHandler()
    if own is not None:
        own.setFormatter(logs.formatter(settings.log_format))
        log.addHandler(own)
    try:
        for line in downgrades(settings):
            log.warning("%s", line, extra={"event": "startup.downgrade"})
    finally:
        if own is not None:
            log.removeHandler(own)


# -- one check per need ----------------------------------------------------------------


def require_hooks(settings: Settings, _role: Role) -> None:
    """The functions settings name are imported now, not at the first answer."""
    from sheetsync import links, notify

    links.configured_authorizer()
    notify.check_hook(settings)


def require_pii_keys(settings: Settings, _role: Role) -> None:
    """At least one key: a worker decrypts personal info and refresh tokens (a
    :class:`PiiKeysError` names the variable)."""
    from sheetsync import crypto

    crypto.Keyring(settings.pii_key_bytes)


def require_google_client(settings: Settings, role: Role) -> None:
    """The OAuth client owners consented to: without it no refresh token works."""
    missing = [
        f"SHEETSYNC_{name.upper()}"
        for name in ("google_client_id", "google_client_secret")
        if getattr(settings, name) is None
    ]
    if missing:
        raise ConfigError(
            f"{' and '.join(missing)} must be set: {ROLE_NAMES[role]} refreshes owners' "
            "Google credentials with the OAuth client they consented to"
        )


def require_database(settings: Settings, _role: Role) -> None:
    """The database exists, answers, and holds the sheetsync schema at the revision this
    version expects."""
    check_database(settings.database_url)


def require_no_refused_tokens(settings: Settings, role: Role) -> None:
    """An upgrade from version 1 tokens must accept them while they are rotated: a
    worker that refused them would mark every such owner's credential broken, and fail
    every such answer. Refresh tokens (one per owner) are all read; answers, a bounded
    sample (:func:`version_1_answer_tokens`)."""
    if settings.pii_accept_v1_tokens:
        return
    from sqlalchemy import select
    from sqlalchemy.pool import NullPool

    from sheetsync import db
    from sheetsync.crypto import LEGACY_TOKEN_VERSION, Keyring, token_version
    from sheetsync.models import GoogleCredential

    engine = db.make_engine(settings.database_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            tokens = connection.scalars(select(GoogleCredential.refresh_token))
            old = sum(token_version(token) == LEGACY_TOKEN_VERSION for token in tokens)
            keyring = Keyring(settings.pii_key_bytes, accept_version_1=False)
            in_answers, whole = version_1_answer_tokens(connection, keyring)
    finally:
        engine.dispose()
    found = [f"{old} stored refresh tokens"] if old else []
    if in_answers:
        counted = f"{in_answers}" if whole else f"at least {in_answers}"
        found.append(f"{counted} personal-info tokens of stored answers")
    if found:
        bound = "no row" if old and in_answers else "no owner" if old else "no answer"
        raise ConfigError(
            f"{' and '.join(found)} are version 1 (bound to {bound}), which "
            f"{ROLE_NAMES[role]} refuses by default: set SHEETSYNC_PII_ACCEPT_V1_TOKENS=true "
            "while `sheetsync pii rotate` rewrites them"
        )


def version_1_answer_tokens(
    connection: Connection, keyring: Keyring, sample: int = VERSION_1_SAMPLE
) -> tuple[int, bool]:
    """The version 1 tokens among the personal info of the first and the last ``sample``
    answers by id, and whether that was every answer. A token is any value with a token's
    shape under a key of ``keyring`` (so deleted questions' too, as rotation finds them).
    Two reads of the primary key's index: a table of millions costs what one of
    ``2 * sample`` answers does; ``sheetsync pii rotate --check`` reads them all."""
    from sqlalchemy import Text, cast, select

    from sheetsync.models import SubmissionAnswer

    read = select(SubmissionAnswer.id, cast(SubmissionAnswer.answer, Text))
    first = connection.execute(read.order_by(SubmissionAnswer.id).limit(sample)).all()
    rows = list(first)
    whole = len(first) < sample
    if not whole:
        after = read.where(SubmissionAnswer.id > first[-1][0])
        last = connection.execute(after.order_by(SubmissionAnswer.id.desc()).limit(sample + 1))
        tail = last.all()
        whole = len(tail) <= sample
        rows += tail[:sample]
    return sum(_version_1_values(text, keyring) for _, text in rows), whole


def _version_1_values(text: str | None, keyring: Keyring) -> int:
    from sheetsync.crypto import LEGACY_TOKEN_VERSION, token_version

    try:
        items: Any = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # SQLite keeps any text: the flush fails it alone
        return 0
    count = 0
    for item in items if isinstance(items, list) else ():
        value = item.get("value") if isinstance(item, dict) else None
        for part in value if isinstance(value, list) else (value,):
            if keyring.names_a_key(part) and token_version(str(part)) == LEGACY_TOKEN_VERSION:
                count += 1
    return count


def require_redis(settings: Settings, _role: Role) -> None:
    check_redis(settings.redis_url, "SHEETSYNC_REDIS_URL", "Redis")


def require_broker(settings: Settings, _role: Role) -> None:
    if settings.celery_broker_url != settings.redis_url:
        check_redis(settings.celery_broker_url, "SHEETSYNC_BROKER_URL", "the Celery broker")


_CHECKS: dict[Need, Callable[[Settings, Role], None]] = {
    "hooks": require_hooks,
    "pii_keys": require_pii_keys,
    "google_client": require_google_client,
    "database": require_database,
    "version_1_tokens": require_no_refused_tokens,
    "redis": require_redis,
    "broker": require_broker,
}


# -- the database ----------------------------------------------------------------------


def check_database(url: str) -> None:
    """Raise a one-line ConfigError unless the database at ``url`` exists, answers and
    is at the newest sheetsync schema revision. Creates nothing."""
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.pool import NullPool

    from sheetsync import db

    db.require_database(url)
    options = {"connect_timeout": DEFAULT_CONNECT_TIMEOUT_S} if _is_postgres(url) else {}
    engine = db.make_engine(url, poolclass=NullPool, connect_args=options)
    try:
        with engine.connect() as connection:
            problem = schema_problem(connection, url)
    except DBAPIError as exc:
        raise ConfigError(describe_database_error(exc, url)) from None
    finally:
        engine.dispose()
    if problem is not None:
        raise ConfigError(problem)


def schema_problem(connection: Connection, url: str) -> str | None:
    """Why the schema behind ``connection`` is not the one this version needs, or None."""
    from alembic.runtime.migration import MigrationContext

    from sheetsync.migrations import compat

    current = set(MigrationContext.configure(connection).get_current_heads())
    shown = mask_url(url)
    upgrade = "run `sheetsync db upgrade`"
    if not current:
        return f"the database at {shown} has no sheetsync schema: {upgrade}"
    heads, known = known_revisions()
    if current == heads:
        return None
    names = ", ".join(sorted(current))
    if not current <= known:
        oldest = compat.accepts(connection)
        if oldest is not None and oldest in known:  # a rolling upgrade: ours is accepted
            log.info(
                "the database is at schema revision %s, newer than this sheetsync's %s; "
                "it accepts releases from revision %s on",
                names,
                ", ".join(sorted(heads)),
                oldest,
            )
            return None
        return (
            f"the database at {shown} is at schema revision {names}, newer than this "
            f"sheetsync knows ({', '.join(sorted(heads))}): upgrade sheetsync"
        )
    return (
        f"the database at {shown} is at schema revision {names}, and this sheetsync "
        f"needs {', '.join(sorted(heads))}: {upgrade}"
    )


@functools.cache
def known_revisions() -> tuple[set[str], set[str]]:
    """This version's head revisions, and every revision it knows."""
    from alembic.script import ScriptDirectory

    from sheetsync.db import alembic_config

    scripts = ScriptDirectory.from_config(alembic_config())
    return set(scripts.get_heads()), {script.revision for script in scripts.walk_revisions()}


def _is_postgres(url: str) -> bool:
    return url.partition("://")[0].lower().startswith("postgres")


def describe_database_error(exc: DBAPIError, url: str) -> str:
    """One line for a database failure at ``url``: no statement, no parameters."""
    import sqlalchemy.exc

    shown = mask_url(url)
    # The driver's own message: SQLAlchemy's str() adds the statement and its
    # parameters, which may hold answer ids or worse.
    reason = _first_line(exc.orig) if exc.orig is not None else type(exc).__name__
    lowered = reason.lower()
    if "no such table" in lowered or ("relation" in lowered and "does not exist" in lowered):
        return f"the database at {shown} has no sheetsync schema: run `sheetsync db upgrade`"
    if isinstance(exc, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError):
        return f"cannot reach the database at {shown} (SHEETSYNC_DATABASE_URL): {reason}"
    return f"database error at {shown}: {reason}"


# -- Redis -----------------------------------------------------------------------------


def check_redis(url: str, variable: str, what: str) -> None:
    """Raise a one-line ConfigError unless the Redis at ``url`` answers PING."""
    import redis

    from sheetsync import redis_urls

    client = redis_urls.client(
        url,
        socket_timeout=DEFAULT_CONNECT_TIMEOUT_S,
        socket_connect_timeout=DEFAULT_CONNECT_TIMEOUT_S,
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ConfigError(describe_redis_error(exc, url, variable, what)) from None
    finally:
        client.close()


def describe_redis_error(exc: Exception, url: str, variable: str, what: str = "Redis") -> str:
    import redis

    shown = mask_url(url)
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError) and not isinstance(
        exc, redis.AuthenticationError
    ):
        return f"cannot reach {what} at {shown} ({variable}): {_connection_reason(exc, url)}"
    return f"{what} at {shown} ({variable}) answered: {_first_line(exc)}"


def _connection_reason(exc: Exception, url: str) -> str:
    """Why a connection failed, with what to change when it is TLS: a file of the URL's
    that cannot be read, a certificate not trusted, plain text to a TLS-only Redis."""
    import os

    from sheetsync import redis_urls

    reason = _first_line(exc)
    try:
        tls = redis_urls.tls_of(url)
    except ValueError:  # the settings refuse such a URL before anything connects
        tls = None
    if tls is not None:
        unreadable = [f"{k}={v}" for k, v in tls.files.items() if not os.access(v, os.R_OK)]
        if unreadable:
            return f"cannot read {', '.join(unreadable)}"
    lowered = reason.lower()
    if "certificate verify failed" in lowered:
        return (
            f"{reason.rstrip('.')}; if a private CA signed Redis's certificate, add "
            "ssl_ca_certs=/path/to/ca.pem to the URL"
        )
    if tls is None and ("reset by peer" in lowered or "closed by server" in lowered):
        return f"{reason.rstrip('.')} (a Redis that accepts only TLS needs a rediss:// URL)"
    return reason


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
