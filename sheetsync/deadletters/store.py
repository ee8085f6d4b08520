"""The dead-letter store: answer ids a buffer could not deliver, kept in the database.

Parking ids (one open entry per buffer and reason), reading an entry's ids, and every
change of status outside a replay's own steps (:mod:`sheetsync.deadletters.replay`):
due now, FAILED, DONE at once, PURGED. A delay of days is never a Celery countdown (the
Redis broker redelivers anything older than its visibility timeout), so a dead letter is
a row with ``next_attempt_at`` that a beat task polls. Entries hold ids only, never rows.

See :mod:`sheetsync.deadletters` for the statuses, and docs/ARCHITECTURE.md, "Dead letters".
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import ledger
from sheetsync.db import is_postgres
from sheetsync.models import (
    DeadLetter,
    DeadLetterAnswer,
    DeadLetterReason,
    DeadLetterStatus,
    SubmissionAnswer,
    TransactionType,
    utcnow,
)
from sheetsync.redis_keys import BufferKey
from sheetsync.settings import Settings

#: The longest error message kept on an entry.
ERROR_CHARS_MAX = 500
#: Ledger note on the ids of a purged entry (they will never be retried).
PURGED_MESSAGE = "dead letter purged by an operator"
#: Why an entry whose every id was erased is PURGED.
ERASED = "its answers were erased"
#: Entries a purge may drop; the others are finished or owned by a running replay.
PURGEABLE = (DeadLetterStatus.PENDING, DeadLetterStatus.FAILED)
#: Ids per insert of an entry's answers (keeps bind parameters under SQLite's limit).
INSERT_CHUNK = 2000
#: A paused link's entry is due only when an operator resumes the link
#: (:func:`make_paused_due`); until then, practically never.
PAUSED_DELAY_S = 100 * 365 * 86_400.0

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
    adding one entry per batch (one insert of the new ids). A permanent failure opens a
    FAILED entry (nothing retries it on its own) and records FAILED with the reason on
    each id.
    """
    if not answer_ids:
        return None
    now = now or utcnow()
    error_message = error_message[:ERROR_CHARS_MAX]
    permanent = reason is DeadLetterReason.PERMANENT
    status = DeadLetterStatus.FAILED if permanent else DeadLetterStatus.PENDING
    entry = _open_entry(session, key, reason, status)
    if entry is not None and entry.status is DeadLetterStatus.REPLAYING:
        # Its replay failed again for the same reason: waiting again, one more attempt.
        entry.status = DeadLetterStatus.PENDING
        entry.attempts += 1
        entry.next_attempt_at = now + timedelta(seconds=delay_s)
    if entry is None:
        entry = DeadLetter(
            user_id=key.user_id,
            submission_id=key.submission_id,
            spread_sheet_id=key.spread_sheet_id,
            sheet_id=key.sheet_id,
            reason=reason,
            attempts=0,
            status=status,
            next_attempt_at=now + timedelta(seconds=delay_s),
            created_at=now,
        )
        session.add(entry)
        session.flush()  # its id
    _add_answers(session, entry.id, answer_ids)
    entry.error_message = error_message
    entry.updated_at = now
    state = TransactionType.FAILED if permanent else TransactionType.DEAD_LETTERED
    ledger.record(
        session, answer_ids, key.spread_sheet_id, key.sheet_id, state, error_message, now=now
    )
    session.flush()
    return entry


def _add_answers(session: Session, entry_id: int, answer_ids: Sequence[str]) -> None:
    statement = _insert_ignoring_duplicates(session.get_bind().dialect.name)
    unique = list(dict.fromkeys(answer_ids))
    for start in range(0, len(unique), INSERT_CHUNK):
        chunk = unique[start : start + INSERT_CHUNK]
        session.execute(statement, [{"dead_letter_id": entry_id, "answer_id": i} for i in chunk])


@functools.cache
def _insert_ignoring_duplicates(dialect: str) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(DeadLetterAnswer).on_conflict_do_nothing()


def answer_ids(session: Session, entry_id: int) -> list[str]:
    """The answer ids an entry holds, in the order they were submitted (a replay
    appends them in that order; ids whose answer is gone come last)."""
    return list(
        session.scalars(
            select(DeadLetterAnswer.answer_id)
            .outerjoin(SubmissionAnswer, SubmissionAnswer.id == DeadLetterAnswer.answer_id)
            .where(DeadLetterAnswer.dead_letter_id == entry_id)
            .order_by(SubmissionAnswer.submitted_at.asc().nulls_last(), DeadLetterAnswer.answer_id)
        )
    )


def drop_answers(session: Session, answer_ids: Sequence[str]) -> int:
    """Take these ids out of every dead letter (they were erased: no replay may write
    them again); an entry left holding none is PURGED. Returns how many were taken out."""
    touched: set[int] = set()
    removed = 0
    for start in range(0, len(answer_ids), INSERT_CHUNK):
        chunk = answer_ids[start : start + INSERT_CHUNK]
        rows = session.execute(
            delete(DeadLetterAnswer)
            .where(DeadLetterAnswer.answer_id.in_(chunk))
            .returning(DeadLetterAnswer.dead_letter_id),
            execution_options={"synchronize_session": False},
        ).all()
        removed += len(rows)
        touched.update(row[0] for row in rows)
    if touched:
        still_holding = select(DeadLetterAnswer.dead_letter_id).where(
            DeadLetterAnswer.dead_letter_id == DeadLetter.id
        )
        session.execute(
            update(DeadLetter)
            .where(
                DeadLetter.id.in_(sorted(touched)),
                DeadLetter.status.in_(PURGEABLE),
                ~still_holding.exists(),
            )
            .values(status=DeadLetterStatus.PURGED, error_message=ERASED, updated_at=utcnow()),
            execution_options={"synchronize_session": False},
        )
    return removed


def answer_count(entry_id_column: Any) -> Any:
    """A scalar subquery counting an entry's answer ids (for listings)."""
    return (
        select(func.count())
        .where(DeadLetterAnswer.dead_letter_id == entry_id_column)
        .scalar_subquery()
    )


def _open_entry(
    session: Session, key: BufferKey, reason: DeadLetterReason, status: DeadLetterStatus
) -> DeadLetter | None:
    """The buffer's entry for ``reason`` that new ids merge into: one waiting in
    ``status``, or one being replayed (its ids may be failing again)."""
    statuses = [status, DeadLetterStatus.REPLAYING]
    query = (
        select(DeadLetter)
        .where(
            DeadLetter.user_id == key.user_id,
            DeadLetter.submission_id == key.submission_id,
            DeadLetter.spread_sheet_id == key.spread_sheet_id,
            DeadLetter.sheet_id == key.sheet_id,
            DeadLetter.reason == reason,
            DeadLetter.status.in_(statuses),
        )
        .order_by(DeadLetter.id)
        .limit(1)
    )
    if is_postgres(session.get_bind()):
        # Two transactions parking for one buffer (a flush and an emit, say) must end in
        # one entry: a row lock cannot cover an entry that does not exist yet, so they
        # take turns on a transaction-scoped advisory lock named after (buffer, reason).
        # (SQLite needs nothing here: every transaction holds the write lock from BEGIN.)
        session.execute(
            select(func.pg_advisory_xact_lock(func.hashtextextended(f"{key.base}|{reason}", 0)))
        )
    return session.scalars(query).first()


def delay_for(reason: DeadLetterReason, settings: Settings) -> float:
    """How long a new entry for ``reason`` waits before its first replay."""
    if reason is DeadLetterReason.CREDENTIAL:
        return settings.dlq_delay_s
    if reason is DeadLetterReason.PAUSED:
        return PAUSED_DELAY_S
    return settings.dlq_transient_delay_s


def fail_buffer(session: Session, key: BufferKey, reason: str) -> None:
    """The buffer's link is gone: its open entries end FAILED, their ids FAILED with
    ``reason``, in the caller's transaction."""
    entries = session.scalars(
        select(DeadLetter).where(
            DeadLetter.user_id == key.user_id,
            DeadLetter.submission_id == key.submission_id,
            DeadLetter.spread_sheet_id == key.spread_sheet_id,
            DeadLetter.sheet_id == key.sheet_id,
            DeadLetter.status.in_([DeadLetterStatus.PENDING, DeadLetterStatus.FAILED]),
        )
    ).all()
    for entry in entries:
        _fail_open_ids(session, entry, reason)
        entry.status = DeadLetterStatus.FAILED
        entry.error_message = reason
        entry.updated_at = utcnow()


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


def make_paused_due(session: Session, submission_id: str, spread_sheet_id: str, gid: int) -> int:
    """A resumed link: its PAUSED entries (of any owner's buffer) are due now, in the
    caller's transaction. Returns how many."""
    result = session.execute(
        update(DeadLetter)
        .where(
            DeadLetter.reason == DeadLetterReason.PAUSED,
            DeadLetter.status == DeadLetterStatus.PENDING,
            DeadLetter.submission_id == submission_id,
            DeadLetter.spread_sheet_id == spread_sheet_id,
            DeadLetter.sheet_id == gid,
        )
        .values(next_attempt_at=utcnow())
    )
    return int(getattr(result, "rowcount", 0) or 0)


def done_in(session: Session, entry: DeadLetter) -> None:
    """A replay found every id of the entry in the sheet already: DONE at once (in the
    caller's transaction)."""
    entry.status = DeadLetterStatus.DONE
    entry.error_message = None
    entry.updated_at = utcnow()


def fail_in(session: Session, entry: DeadLetter, error: str) -> None:
    """The entry can never be delivered: FAILED, its unsettled ids FAILED with ``error``
    (in the caller's transaction)."""
    _fail_open_ids(session, entry, error[:ERROR_CHARS_MAX])
    entry.status = DeadLetterStatus.FAILED
    entry.attempts += 1
    entry.error_message = error[:ERROR_CHARS_MAX]
    entry.updated_at = utcnow()


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
    ids = answer_ids(session, entry.id)
    states = ledger.states(session, ids, entry.spread_sheet_id, entry.sheet_id)
    open_ids = [i for i in ids if states.get(i) is not TransactionType.COMPLETED]
    ledger.record(
        session, open_ids, entry.spread_sheet_id, entry.sheet_id, TransactionType.FAILED, error
    )
