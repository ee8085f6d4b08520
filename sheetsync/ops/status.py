"""The figures behind ``sheetsync status``, read in a few round trips whatever the load.

The buffer index is read oldest first up to a limit (never scanned with KEYS); the
lengths, jobs and per-account windows are fetched in pipelines. The live workers come
from their heartbeats (:mod:`sheetsync.ops.heartbeats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select

from sheetsync.errors import ValidationError
from sheetsync.models import (
    AnswerChange,
    CredentialStatus,
    DeadLetter,
    DeadLetterStatus,
    GoogleCredential,
    SheetTransaction,
    utcnow,
)
from sheetsync.ops import heartbeats
from sheetsync.redis_keys import (
    BUFFER_INDEX,
    DEFAULT_GOOGLE_CLIENT,
    BufferKey,
    RateKind,
    is_account_id,
    rate_account_key,
)
from sheetsync.services import Services
from sheetsync.sheets.limiter import Place, RateLimiter

#: Commands per Redis pipeline round trip.
PIPELINE_CHUNK = 1000


def collect_buffers(services: Services, limit: int) -> dict[str, Any]:
    """The buffers of the index, oldest first, up to ``limit``. A buffer's
    ``oldest_age_s`` is the age of the oldest id still in it, read from its arrival runs
    (the index score lags behind them: ids pushed while a run drains the list keep the
    score of ids trimmed since); ``age_source`` says ``arrivals``, or ``index`` for a
    buffer with no runs noted."""
    client = services.redis
    seconds, micros = client.time()  # Redis's clock: ages agree whatever this host's says
    now = seconds * 1000 + micros // 1000
    total = int(client.zcard(BUFFER_INDEX))
    entries: list[tuple[Any, float]] = list(
        client.zrange(BUFFER_INDEX, 0, limit - 1, withscores=True)  # type: ignore[arg-type]
    )
    keys: list[tuple[BufferKey, float]] = []
    malformed: list[str] = []
    for raw, score in entries:
        base = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            keys.append((BufferKey.parse(base), float(score)))
        except ValidationError:
            malformed.append(base[:200])
    replies: list[Any] = []
    for start in range(0, len(keys), PIPELINE_CHUNK):
        pipe = client.pipeline(transaction=False)
        for key, _ in keys[start : start + PIPELINE_CHUNK]:
            pipe.llen(key.buf)
            pipe.hgetall(key.job)
            pipe.lindex(key.times, 0)
        replies.extend(pipe.execute())
    places = services.limiter.places() if keys else {}
    items = []
    for index, (key, index_ms) in enumerate(keys):
        depth, raw_job, head = replies[3 * index : 3 * index + 3]
        job = _decoded(raw_job)
        arrived_ms = _run_start_ms(head)
        oldest_ms = index_ms if arrived_ms is None else arrived_ms
        items.append(
            {
                "base": key.base,
                "user_id": key.user_id,
                "submission_id": key.submission_id,
                "spread_sheet_id": key.spread_sheet_id,
                "sheet_id": key.sheet_id,
                "depth": int(depth),
                "oldest_age_s": round(max(0, now - oldest_ms) / 1000, 3),
                "age_source": "index" if arrived_ms is None else "arrivals",
                "job": _job(job, now) if job else None,
                "quota": _quota_place(places.get(key.base), now),
            }
        )
    return {"total": total, "shown": len(items), "items": items, "malformed": malformed}


def _quota_place(place: Place | None, now: int) -> dict[str, Any] | None:
    """Where a buffer waits at Google's quota: its kind's queue, the waiters before it,
    and when its turn is expected (None: not waiting)."""
    if place is None:
        return None
    return {
        "kind": place.kind,
        "state": place.state,
        "ahead": place.ahead,
        "expected_in_s": round(max(place.expected_ms - now, 0) / 1000, 3),
    }


def _run_start_ms(head: Any) -> float | None:
    """When an arrival run (``<ms>:<count>``) began, or None (no run, or malformed)."""
    if head is None:
        return None
    text = head.decode() if isinstance(head, bytes) else str(head)
    at, sep, _ = text.partition(":")
    return float(at) if sep and at.isdigit() else None


def _decoded(raw: dict[Any, Any]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else str(v)
        )
        for k, v in raw.items()
    }


def _ms_from_now(value: str | None, now: int) -> float | None:
    if not value:
        return None
    try:
        return round((int(float(value)) - now) / 1000, 3)
    except ValueError:
        return None


def _job(job: dict[str, str], now: int) -> dict[str, Any]:
    token = job.get("token") or ""
    return {
        "state": job.get("state"),
        "token": token,
        "seq": token.rpartition("#")[2] or None,
        "queue": job.get("queue"),
        "promoted": job.get("promoted") == "1",
        "attempts": int(job.get("attempts") or 0),
        "due_in_s": _ms_from_now(job.get("due_at"), now),
        "lease_left_s": _ms_from_now(job.get("lease_until"), now),
    }


def collect_workers(services: Services) -> dict[str, Any]:
    """The worker and beat processes with a fresh heartbeat, and the queues consumed."""
    beats = heartbeats.live(services.redis)
    return {
        "max_heartbeat_age_s": heartbeats.DEFAULT_HEARTBEAT_TTL_S,
        "live": [
            {
                "name": beat.name,
                "role": beat.role,
                "queues": list(beat.queues),
                "pid": beat.pid,
                "heartbeat_age_s": beat.age_s,
            }
            for beat in beats
        ],
        "consumed_queues": sorted(heartbeats.consumed_queues(beats)),
    }


def flag_stalled(buffers: dict[str, Any], workers: dict[str, Any]) -> list[dict[str, Any]]:
    """Mark every listed job ``overdue`` or not, and whether a live worker consumes its
    queue (``queue_consumed``). Returns the queues that hold overdue buffers but have no
    live worker: nothing will ever flush those buffers."""
    consumed = set(workers["consumed_queues"])
    stalled: dict[str, int] = {}
    for item in buffers["items"]:
        job = item["job"]
        if not job:
            continue
        due = job["due_in_s"]
        job["overdue"] = job["state"] != "running" and due is not None and due < 0
        job["queue_consumed"] = job["queue"] in consumed
        if job["overdue"] and job["queue"] and not job["queue_consumed"]:
            stalled[job["queue"]] = stalled.get(job["queue"], 0) + 1
    return [{"queue": queue, "overdue_buffers": count} for queue, count in sorted(stalled.items())]


def collect_dead_letters(services: Services) -> dict[str, Any]:
    with services.sessions() as session:
        rows = session.execute(
            select(DeadLetter.status, DeadLetter.reason, func.count())
            .group_by(DeadLetter.status, DeadLetter.reason)
            .order_by(DeadLetter.status, DeadLetter.reason)
        ).all()
        due_now = session.scalar(
            select(func.count())
            .select_from(DeadLetter)
            .where(DeadLetter.status == DeadLetterStatus.PENDING)
            .where(DeadLetter.next_attempt_at <= utcnow())
        )
    counts: list[dict[str, Any]] = []
    by_status: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    for state, reason, count in rows:
        state_name, reason_name = str(state), str(reason)
        counts.append({"status": state_name, "reason": reason_name, "count": int(count)})
        by_status[state_name] = by_status.get(state_name, 0) + int(count)
        by_reason[reason_name] = by_reason.get(reason_name, 0) + int(count)
    return {
        "total": sum(by_status.values()),
        "by_status": by_status,
        "by_reason": by_reason,
        "counts": counts,
        "pending_due_now": int(due_now or 0),
    }


def collect_changes(services: Services) -> dict[str, int]:
    """Edits and deletions (erasures among them) the sheets have yet to follow: an
    ``UPDATE`` and ``DELETE`` count of (answer, sheet) ledger rows, 0 when none."""
    with services.sessions() as session:
        rows = session.execute(
            select(SheetTransaction.change, func.count())
            .where(SheetTransaction.change.is_not(None))
            .group_by(SheetTransaction.change)
        ).all()
    counts = {change.value: 0 for change in AnswerChange}
    for change, count in rows:
        counts[str(change)] = int(count)
    return counts


def collect_credentials(services: Services) -> dict[str, int]:
    """Google credentials by status (every status, 0 when none)."""
    with services.sessions() as session:
        rows = session.execute(
            select(GoogleCredential.status, func.count()).group_by(GoogleCredential.status)
        ).all()
    counts = {status.value: 0 for status in CredentialStatus}
    for state, count in rows:
        counts[str(state)] = int(count)
    return counts


def _projects(limiter: RateLimiter) -> dict[str, dict[str, Any]]:
    """Each OAuth client's Cloud project: its write and read windows, and its queue."""
    projects: dict[str, dict[str, Any]] = {}
    for name in limiter.settings.google_clients:
        of = limiter.for_client(name)
        write, read = of.usage(kind="write"), of.usage(kind="read")
        projects[name] = {
            "write": {"used": write.used, "limit": write.limit},
            "read": {"used": read.used, "limit": read.limit},
            "waiting": of.waiting(),
        }
    return projects


def collect_limiter(services: Services) -> dict[str, Any]:
    """The limiter's windows: writes (what appends wait for) under ``project`` and
    ``accounts[].used``, reads beside them (Google counts the two apart)."""
    limiter = services.limiter
    project = limiter.usage(kind="write")
    project_reads = limiter.usage(kind="read")
    with services.sessions() as session:
        credentials = select(GoogleCredential.google_account_id, GoogleCredential.google_client)
        stored = {(account, client) for account, client in session.execute(credentials)}
    accounts = sorted(  # an account's window is in its client's project; none if malformed
        (account, client or DEFAULT_GOOGLE_CLIENT)
        for account, client in stored
        if is_account_id(account)
    )
    writes = _account_use(services, accounts, "write")
    reads = _account_use(services, accounts, "read")
    settings = services.settings
    limit, read_limit = (
        settings.rate_limit("write", "account"),
        settings.rate_limit("read", "account"),
    )
    return {
        "window_s": settings.rate_window_s,
        "project": {"used": project.used, "limit": project.limit},
        "project_reads": {"used": project_reads.used, "limit": project_reads.limit},
        "waiting": limiter.waiting(),
        "projects": _projects(limiter),
        "accounts": [
            {
                "account": account,
                "client": client,
                "used": count,
                "limit": limit,
                "reads": read,
                "read_limit": read_limit,
            }
            for (account, client), count, read in zip(accounts, writes, reads, strict=True)
        ],
    }


def _account_use(
    services: Services, accounts: Sequence[tuple[str, str]], kind: RateKind
) -> list[int]:
    """Requests of ``kind`` in each account's current window, as ``RateLimiter.usage``
    counts them, but pipelined: one round trip per thousand accounts instead of two per
    account."""
    if not accounts:
        return []
    seconds, micros = services.redis.time()
    since = f"({seconds * 1000 + micros // 1000 - services.limiter.window_ms}"
    counts: list[int] = []
    for start in range(0, len(accounts), PIPELINE_CHUNK):
        pipe = services.redis.pipeline(transaction=False)
        for account, client in accounts[start : start + PIPELINE_CHUNK]:
            pipe.zcount(rate_account_key(account, kind, client), since, "+inf")
        counts.extend(int(n) for n in pipe.execute())
    return counts
