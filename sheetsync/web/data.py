"""What the console reads, on connections of its own with short timeouts.

The console never writes while it reads: SQLite connections are ``query_only`` and take
no lock beyond one statement (WAL readers never block writers); PostgreSQL sessions are
read-only with a statement timeout. Redis calls time out in seconds. Actions (replay,
purge) go through the same services as the CLI's, built on first use.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.engine import make_url

from sheetsync import redis_urls
from sheetsync.db import normalize_url, open_existing_files_only
from sheetsync.models import (
    DeadLetter,
    SheetTransaction,
    TransactionType,
    utcnow,
)
from sheetsync.ops import links as ops_links
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.settings import Settings
from sheetsync.web import labels

#: Seconds a Redis connect or command may take before the page shows an error instead.
REDIS_TIMEOUT_S = 2.0
#: Seconds a database connect may take (SQLite: a lock wait), and milliseconds a
#: PostgreSQL statement may run.
DB_CONNECT_TIMEOUT_S = 3
DB_STATEMENT_TIMEOUT_MS = 5000
#: How far back "last success" looks (a window on the ledger's (type, updated_at) index,
#: so the cost follows the recent appends, not the ledger's size).
LAST_SUCCESS_WINDOW = timedelta(hours=24)
#: Minutes of appends the overview charts.
APPEND_MINUTES = 60
#: Rows listed per page.
PAGE_LIMIT = 200


def read_engine(url: str) -> Engine:
    """An engine for reading only, that gives up in seconds."""
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": DB_CONNECT_TIMEOUT_S})
        open_existing_files_only(engine, url)  # the console never creates a database

        @event.listens_for(engine, "connect")
        def _read_only(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("PRAGMA query_only=ON")
                cursor.execute(f"PRAGMA busy_timeout={DB_CONNECT_TIMEOUT_S * 1000}")
            finally:
                cursor.close()

        return engine
    options = (
        f"-c statement_timeout={DB_STATEMENT_TIMEOUT_MS} -c lock_timeout=1000 "
        "-c default_transaction_read_only=on"
    )
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=4,
        connect_args={"connect_timeout": DB_CONNECT_TIMEOUT_S, "options": options},
    )


def read_services(settings: Settings) -> Services:
    """Services for the figures of ``sheetsync status``: short timeouts, read-only."""
    client = redis_urls.client(
        settings.redis_url,
        socket_connect_timeout=REDIS_TIMEOUT_S,
        socket_timeout=REDIS_TIMEOUT_S,
    )
    return Services.build(settings, engine=read_engine(settings.database_url), client=client)


class ActionServices:
    """The services actions use, as the CLI builds them; made on first use, kept."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._services: Services | None = None

    def get(self) -> Services:
        with self._lock:
            if self._services is None:
                self._services = Services.build(self._settings)
            return self._services

    def close(self) -> None:
        with self._lock:
            if self._services is not None:
                self._services.close()
            self._services = None


def appends_per_minute(services: Services, now: datetime | None = None) -> list[int]:
    """Answers appended (ledger rows that became COMPLETED) in each of the last
    :data:`APPEND_MINUTES` minutes, oldest first; the last is the current minute."""
    now = (now or utcnow()).replace(second=0, microsecond=0)
    since = now - timedelta(minutes=APPEND_MINUTES - 1)
    column = SheetTransaction.updated_at
    if services.engine.dialect.name == "postgresql":
        minute: Any = func.to_char(
            func.date_trunc("minute", func.timezone("UTC", column)), "YYYY-MM-DD HH24:MI"
        )
    else:  # SQLite stores naive UTC text
        minute = func.strftime("%Y-%m-%d %H:%M", column)
    query = (
        select(minute, func.count())
        .where(SheetTransaction.type == TransactionType.COMPLETED, column >= since)
        .group_by(minute)
    )
    with services.sessions() as session:
        rows = session.execute(query).all()
    counts = [0] * APPEND_MINUTES
    for label, count in rows:
        try:
            at = datetime.strptime(str(label), "%Y-%m-%d %H:%M").replace(tzinfo=now.tzinfo)
        except ValueError:
            continue
        index = APPEND_MINUTES - 1 - int((now - at).total_seconds() // 60)
        if 0 <= index < APPEND_MINUTES:
            counts[index] += int(count)
    return counts


def last_errors(services: Services, spreadsheets: set[str]) -> dict[tuple[str, str, int], Any]:
    """The newest dead letter of each (form, spreadsheet, gid) among ``spreadsheets``:
    its reason, status, message and time. Ids only, as ``dlq list`` shows them."""
    if not spreadsheets:
        return {}
    query = (
        select(DeadLetter)
        .where(DeadLetter.spread_sheet_id.in_(sorted(spreadsheets)))
        .order_by(DeadLetter.id.desc())
        .limit(PAGE_LIMIT * 5)
    )
    found: dict[tuple[str, str, int], Any] = {}
    with services.sessions() as session:
        for entry in session.scalars(query):
            where = (entry.submission_id, entry.spread_sheet_id, entry.sheet_id)
            found.setdefault(
                where,
                {
                    "id": entry.id,
                    "reason": entry.reason.value,
                    "status": entry.status.value,
                    "message": entry.error_message or "",
                    "at": entry.updated_at,
                },
            )
    return found


def last_successes(services: Services, spreadsheets: set[str]) -> dict[tuple[str, int], datetime]:
    """When each (spreadsheet, gid) last had an answer appended, within
    :data:`LAST_SUCCESS_WINDOW`."""
    if not spreadsheets:
        return {}
    query = (
        select(
            SheetTransaction.spread_sheet_id,
            SheetTransaction.sheet_id,
            func.max(SheetTransaction.updated_at),
        )
        .where(
            SheetTransaction.type == TransactionType.COMPLETED,
            SheetTransaction.updated_at >= utcnow() - LAST_SUCCESS_WINDOW,
            SheetTransaction.spread_sheet_id.in_(sorted(spreadsheets)),
        )
        .group_by(SheetTransaction.spread_sheet_id, SheetTransaction.sheet_id)
    )
    with services.sessions() as session:
        return {
            (spreadsheet, int(gid)): when
            for spreadsheet, gid, when in session.execute(query)
            if when is not None
        }


def links(services: Services) -> dict[str, Any]:
    """The links of ``sheetsync links list``, with last success, last error, the
    owner's credential status and what waits in the link's buffer."""
    rows = ops_links.list_links(services)
    shown = rows[:PAGE_LIMIT]
    sheets = {row.spreadsheet for row in shown}
    successes = last_successes(services, sheets)
    errors = last_errors(services, sheets)
    credentials = labels.credential_states(services.sessions, {row.owner for row in shown})
    pipe = services.redis.pipeline(transaction=False)
    for row in shown:
        pipe.llen(BufferKey(row.owner, row.form, row.spreadsheet, row.gid).buf)
    depths = pipe.execute() if shown else []
    items = []
    for row, depth in zip(shown, depths, strict=True):
        item = dataclasses.asdict(row)
        item["buffered"] = int(depth)
        item["credential"] = credentials[row.owner]
        item["last_success"] = successes.get((row.spreadsheet, row.gid))
        item["last_error"] = errors.get((row.form, row.spreadsheet, row.gid))
        items.append(item)
    return {"total": len(rows), "items": items, "window": LAST_SUCCESS_WINDOW}
