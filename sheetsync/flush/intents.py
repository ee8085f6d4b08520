"""The durable write-ahead intent of an append (the ``sheet_intent`` table).

Committed before ``values.append``, deleted in the transaction that records the batch
COMPLETED: an intent left behind means "these ids may be in the sheet", whatever Redis
lost meanwhile. The next run of the buffer resolves it before appending anything, by
reading the sheet; the reconciler never pushes an id an open intent covers
(docs/ARCHITECTURE.md, "Crash safety").
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.orm import Session

from sheetsync.buffers.store import Lease
from sheetsync.models import SheetIntent
from sheetsync.redis_keys import BufferKey


def _of(key: BufferKey) -> tuple[ColumnElement[bool], ...]:
    # By form and sheet, whoever's buffer wrote it: a link that moved to another owner
    # (or a merged duplicate) leaves its intents to the buffer that sends there now.
    return (
        SheetIntent.spread_sheet_id == key.spread_sheet_id,
        SheetIntent.sheet_id == key.sheet_id,
        SheetIntent.submission_id == key.submission_id,
    )


def record(
    session: Session,
    key: BufferKey,
    lease: Lease,
    answer_ids: Sequence[str],
    after_row: int | None,
    tab_sheet_id: int | None = None,
) -> int:
    """Add the intent of an append to tab ``tab_sheet_id`` (the link's own when None)
    that must end before ``lease.until_ms``; the caller commits before sending the
    append. Returns its id."""
    intent = SheetIntent(
        user_id=key.user_id,
        submission_id=key.submission_id,
        spread_sheet_id=key.spread_sheet_id,
        sheet_id=key.sheet_id,
        token=lease.token,
        epoch=int(lease.epoch),
        answer_ids=list(answer_ids),
        after_row=after_row,
        tab_sheet_id=tab_sheet_id,
        deadline_ms=lease.until_ms,
    )
    session.add(intent)
    session.flush()
    return intent.id


def open_for(session: Session, key: BufferKey) -> list[SheetIntent]:
    """The buffer's intents not yet resolved, oldest first."""
    return list(session.scalars(select(SheetIntent).where(*_of(key)).order_by(SheetIntent.id)))


def answered(session: Session, intent_id: int) -> None:
    """Google answered the append (an error status): nothing of it is in flight any more,
    so the next run may read the sheet at once. (Still open: it may have applied.)"""
    session.execute(update(SheetIntent).where(SheetIntent.id == intent_id).values(deadline_ms=0))


def extend(session: Session, intent_id: int, deadline_ms: int) -> None:
    """The run renewed its lease to append more of the intent's ids: its appends may
    now land until ``deadline_ms``."""
    session.execute(
        update(SheetIntent).where(SheetIntent.id == intent_id).values(deadline_ms=deadline_ms)
    )


def resolve(session: Session, intent_id: int) -> None:
    """Drop an intent, in the transaction that records what became of its ids."""
    session.execute(delete(SheetIntent).where(SheetIntent.id == intent_id))


def all_open(session: Session) -> list[SheetIntent]:
    """Every intent not yet resolved (the reconciler's view; normally a handful)."""
    return list(session.scalars(select(SheetIntent).order_by(SheetIntent.id)))
