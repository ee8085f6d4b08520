"""The dead-letter store: answer ids a buffer could not deliver, kept in the DB.

A delay of days is never a Celery countdown (the Redis broker redelivers anything
older than its visibility timeout), so a dead letter is a row with ``next_attempt_at``
that a beat task polls. Entries hold ids only, never rows.

States: PENDING (waiting for ``next_attempt_at``) → REPLAYING (a replay task owns it)
→ DONE; or FAILED (permanent: no automatic retry, replay by hand); or PURGED.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sheetsync import ledger
from sheetsync.db import is_postgres
from sheetsync.keys import BufferKey
from sheetsync.models import (
    CredentialStatus,
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
    utcnow,
)

#: The longest error message kept on an entry.
ERROR_CHARS_MAX = 500


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


def mark_credential(
    session: Session, user_id: str, status: CredentialStatus, *, now: datetime | None = None
) -> bool:
    """Set an owner's credential status. Returns whether the owner has a credential."""
    result = session.execute(
        update(GoogleCredential)
        .where(GoogleCredential.user_id == user_id)
        .values(status=status, updated_at=now or utcnow())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
