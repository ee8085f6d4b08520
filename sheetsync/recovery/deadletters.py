"""Dead letters: answer ids a buffer could not deliver, kept in the database.

This module owns every change of a dead letter's status; the CLI, the tasks and the
flush only call it. A delay of days is never a Celery countdown (the Redis broker
redelivers anything older than its visibility timeout), so a dead letter is a row with
``next_attempt_at`` that a beat task polls. Entries hold ids only, never rows.

    PENDING ──claim_due──► REPLAYING ──mark_done──► DONE
       ▲                      │ reschedule / release
       └──────────────────────┘
    FAILED (permanent: replayed only by hand)      PURGED (an operator gave up)

See docs/ARCHITECTURE.md, "Dead letters".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import ledger
from sheetsync.db import is_postgres
from sheetsync.keys import BufferKey
from sheetsync.models import (
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    TransactionType,
    utcnow,
)

#: The longest error message kept on an entry.
ERROR_CHARS_MAX = 500
#: A REPLAYING entry untouched this long lost its task (the worker died): claim it again.
DEFAULT_REPLAY_STALE_S = 600.0
#: Entries the dispatcher claims per beat.
DEFAULT_DISPATCH_LIMIT = 100
#: Ledger note on the ids of a purged entry (they will never be retried).
PURGED_MESSAGE = "dead letter purged by an operator"
#: Entries a purge may drop; the others are finished or owned by a running replay.
PURGEABLE = (DeadLetterStatus.PENDING, DeadLetterStatus.FAILED)

Sessions = sessionmaker[Session]


def park(
    session: Session,
    key: BufferKey,
    answer_ids: Sequence[str],
    reason: DeadLetterReason,
    error_message: str,
    *,
    delay_s: float,
    now: datetime | None = None,
) -> DeadLetter | None:
    """Move ids into the buffer's open entry for ``reason``, merged, in the caller's
    transaction; the ledger follows (DEAD_LETTERED, or FAILED for a permanent reason).

    One entry per (buffer, reason) stays open: later failures merge into it instead of
    adding one entry per batch. A permanent failure opens a FAILED entry (nothing retries
    it on its own) and records FAILED with the reason on each id.
    """
    if not answer_ids:
        return None
    now = now or utcnow()
    error_message = error_message[:ERROR_CHARS_MAX]
    permanent = reason is DeadLetterReason.PERMANENT
    status = DeadLetterStatus.FAILED if permanent else DeadLetterStatus.PENDING
    entry = _open_entry(session, key, reason, status)
    if entry is None:
        entry = DeadLetter(
            user_id=key.user_id,
            submission_id=key.submission_id,
            spread_sheet_id=key.spread_sheet_id,
            sheet_id=key.sheet_id,
            answer_ids=[],
            reason=reason,
            attempts=0,
            status=status,
            next_attempt_at=now + timedelta(seconds=delay_s),
            created_at=now,
        )
        session.add(entry)
    present = set(entry.answer_ids)
    merged = list(entry.answer_ids)
    for answer_id in answer_ids:
        if answer_id not in present:
            present.add(answer_id)
            merged.append(answer_id)
    entry.answer_ids = merged
    entry.error_message = error_message
    entry.updated_at = now
    state = TransactionType.FAILED if permanent else TransactionType.DEAD_LETTERED
    ledger.record(
        session, answer_ids, key.spread_sheet_id, key.sheet_id, state, error_message, now=now
    )
    session.flush()
    return entry


def _open_entry(
    session: Session, key: BufferKey, reason: DeadLetterReason, status: DeadLetterStatus
) -> DeadLetter | None:
    query = (
        select(DeadLetter)
        .where(
            DeadLetter.user_id == key.user_id,
            DeadLetter.submission_id == key.submission_id,
            DeadLetter.spread_sheet_id == key.spread_sheet_id,
            DeadLetter.sheet_id == key.sheet_id,
            DeadLetter.reason == reason,
            DeadLetter.status == status,
        )
        .order_by(DeadLetter.id)
        .limit(1)
    )
    if is_postgres(session.get_bind()):
        # Two workers parking into one entry must not lose each other's ids. (SQLite
        # needs nothing here: every transaction there holds the write lock from BEGIN.)
        query = query.with_for_update()
    return session.scalars(query).first()


def claim_due(
    sessions: Sessions, *, ids: Sequence[int] | None = None, limit: int = DEFAULT_DISPATCH_LIMIT
) -> list[int]:
    """Mark due PENDING (and stale REPLAYING) entries REPLAYING; return their ids.

    ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two dispatchers never claim one entry.
    """
    now = utcnow()
    stale = now - timedelta(seconds=DEFAULT_REPLAY_STALE_S)
    with sessions.begin() as session:
        query = (
            select(DeadLetter)
            .where(
                or_(
                    (DeadLetter.status == DeadLetterStatus.PENDING)
                    & (DeadLetter.next_attempt_at <= now),
                    (DeadLetter.status == DeadLetterStatus.REPLAYING)
                    & (DeadLetter.updated_at < stale),
                )
            )
            .order_by(DeadLetter.next_attempt_at, DeadLetter.id)
            .limit(limit)
        )
        if ids is not None:
            query = query.where(DeadLetter.id.in_(list(ids))).limit(max(limit, len(ids)))
        if is_postgres(session.get_bind()):
            query = query.with_for_update(skip_locked=True)
        entries = session.scalars(query).all()
        for entry in entries:
            entry.status = DeadLetterStatus.REPLAYING
            entry.updated_at = now
        return [entry.id for entry in entries]


def make_due(
    sessions: Sessions,
    *,
    ids: Sequence[int] | None = None,
    user_id: str | None = None,
    include_failed: bool = False,
) -> list[int]:
    """Set entries due now (PENDING); FAILED ones too when asked. Returns their ids."""
    statuses = [DeadLetterStatus.PENDING]
    if include_failed:
        statuses.append(DeadLetterStatus.FAILED)
    with sessions.begin() as session:
        query = select(DeadLetter.id).where(DeadLetter.status.in_(statuses))
        if ids is not None:
            query = query.where(DeadLetter.id.in_(list(ids)))
        if user_id is not None:
            query = query.where(DeadLetter.user_id == user_id)
        chosen = list(session.scalars(query))
        if chosen:
            session.execute(
                update(DeadLetter)
                .where(DeadLetter.id.in_(chosen))
                .values(status=DeadLetterStatus.PENDING, next_attempt_at=utcnow())
            )
    return chosen


def release(sessions: Sessions, ids: Sequence[int]) -> None:
    """Give claimed entries that were never replayed back: PENDING, due now."""
    if not ids:
        return
    now = utcnow()
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id.in_(list(ids)), DeadLetter.status == DeadLetterStatus.REPLAYING)
            .values(status=DeadLetterStatus.PENDING, next_attempt_at=now, updated_at=now)
        )


def touch(sessions: Sessions, entry_id: int) -> None:
    """A replay is still working on the entry (so it does not look stale)."""
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter).where(DeadLetter.id == entry_id).values(updated_at=utcnow())
        )


def reschedule(sessions: Sessions, entry_id: int, error: str, delay_s: float) -> None:
    """The replay failed again: PENDING, one more attempt counted, due in ``delay_s``."""
    now = utcnow()
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id == entry_id)
            .values(
                status=DeadLetterStatus.PENDING,
                attempts=DeadLetter.attempts + 1,
                error_message=error[:ERROR_CHARS_MAX],
                next_attempt_at=now + timedelta(seconds=delay_s),
                updated_at=now,
            )
        )


def mark_done(sessions: Sessions, entry_id: int) -> None:
    """Every id of the entry is in the sheet (or settled otherwise)."""
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id == entry_id)
            .values(status=DeadLetterStatus.DONE, error_message=None, updated_at=utcnow())
        )


def fail(sessions: Sessions, entry_id: int, error: str) -> DeadLetter | None:
    """A permanent failure: the entry FAILED, its unsettled ids FAILED with ``error``."""
    with sessions.begin() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return None
        _fail_open_ids(session, entry, error[:ERROR_CHARS_MAX])
        entry.status = DeadLetterStatus.FAILED
        entry.reason = DeadLetterReason.PERMANENT
        entry.attempts += 1
        entry.error_message = error[:ERROR_CHARS_MAX]
        entry.updated_at = utcnow()
        return entry


def purge(sessions: Sessions, ids: Sequence[int]) -> tuple[list[int], list[tuple[int, str]]]:
    """Mark PENDING and FAILED entries PURGED, their unsettled ids FAILED in the ledger.

    Returns (purged or already purged ids, [(id, why not)]) for the rest.
    """
    purged: list[int] = []
    refused: list[tuple[int, str]] = []
    with sessions.begin() as session:
        entries = session.scalars(
            select(DeadLetter).where(DeadLetter.id.in_(ids)).order_by(DeadLetter.id)
        ).all()
        for entry in entries:
            if entry.status is DeadLetterStatus.PURGED:
                purged.append(entry.id)
                continue
            if entry.status not in PURGEABLE:
                refused.append((entry.id, entry.status.value))
                continue
            # The update names the status it saw: a replay that claims the entry
            # meanwhile makes it match nothing, and the entry is left to that replay.
            result = session.execute(
                update(DeadLetter)
                .where(DeadLetter.id == entry.id, DeadLetter.status == entry.status)
                .values(status=DeadLetterStatus.PURGED, updated_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            if not getattr(result, "rowcount", 0):
                refused.append((entry.id, "changed meanwhile"))
                continue
            _fail_open_ids(session, entry, PURGED_MESSAGE)
            purged.append(entry.id)
    return purged, refused


def _fail_open_ids(session: Session, entry: DeadLetter, error: str) -> None:
    """Every id of the entry that did not reach the sheet ends FAILED with ``error``: no
    id is left DEAD_LETTERED without an open entry."""
    states = ledger.states(session, entry.answer_ids, entry.spread_sheet_id, entry.sheet_id)
    open_ids = [i for i in entry.answer_ids if states.get(i) is not TransactionType.COMPLETED]
    ledger.record(
        session, open_ids, entry.spread_sheet_id, entry.sheet_id, TransactionType.FAILED, error
    )
