"""The database side of ``sheetsync dlq``: read, check and purge dead letters.

Kept apart from the command definitions so that ``--help`` and usage errors never pay
for importing SQLAlchemy and the models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, cast, func, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import ledger
from sheetsync.models import DeadLetter, DeadLetterStatus, TransactionType, utcnow

#: Ledger note on the ids of a purged entry (they will never be retried).
PURGED_MESSAGE = "dead letter purged by an operator"
#: Entries a purge may drop; the others are finished or owned by a running replay.
PURGEABLE = (DeadLetterStatus.PENDING, DeadLetterStatus.FAILED)


@dataclass(frozen=True)
class Page:
    total: int
    entries: list[dict[str, Any]]


def summary(entry: DeadLetter, answer_count: int) -> dict[str, Any]:
    """One entry as JSON-ready data, without its ids."""
    return {
        "id": entry.id,
        "user_id": entry.user_id,
        "submission_id": entry.submission_id,
        "spread_sheet_id": entry.spread_sheet_id,
        "sheet_id": entry.sheet_id,
        "reason": entry.reason.value,
        "status": entry.status.value,
        "answer_count": answer_count,
        "attempts": entry.attempts,
        "next_attempt_at": entry.next_attempt_at,
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
        "error_message": entry.error_message,
    }


def _answer_count(session: Session) -> ColumnElement[int]:
    """The length of ``answer_ids``, computed by the database: an entry may hold
    hundreds of thousands of ids, which a listing has no reason to load."""
    column: ColumnElement[Any] = DeadLetter.__table__.c.answer_ids
    if session.get_bind().dialect.name == "postgresql":
        # Works whether the column is json or jsonb.
        column = cast(column, postgresql.JSON)
    result: ColumnElement[int] = func.json_array_length(column)
    return result


def list_entries(
    sessions: sessionmaker[Session],
    *,
    user_id: str | None,
    status: str | None,
    reason: str | None,
    limit: int,
) -> Page:
    """Entries matching every given filter, oldest first, at most ``limit``."""
    conditions: list[ColumnElement[bool]] = []
    if user_id is not None:
        conditions.append(DeadLetter.user_id == user_id)
    if status is not None:
        conditions.append(DeadLetter.status == status)
    if reason is not None:
        conditions.append(DeadLetter.reason == reason)
    with sessions() as session:
        total = session.scalar(select(func.count()).select_from(DeadLetter).where(*conditions))
        rows = session.execute(
            select(DeadLetter, _answer_count(session))
            .where(*conditions)
            .order_by(DeadLetter.id)
            .limit(limit)
        ).all()
        return Page(total or 0, [summary(entry, count or 0) for entry, count in rows])


def get_entry(sessions: sessionmaker[Session], entry_id: int) -> dict[str, Any] | None:
    """One entry with its answer ids, or None."""
    with sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return None
        details = summary(entry, len(entry.answer_ids))
        details["answer_ids"] = list(entry.answer_ids)
        return details


def missing_ids(sessions: sessionmaker[Session], ids: Sequence[int]) -> list[int]:
    """The ids in ``ids`` that name no entry."""
    with sessions() as session:
        found = set(session.scalars(select(DeadLetter.id).where(DeadLetter.id.in_(ids))))
    return [entry_id for entry_id in ids if entry_id not in found]


def purge(
    sessions: sessionmaker[Session], ids: Sequence[int]
) -> tuple[list[int], list[tuple[int, str]]]:
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
            _fail_open_ids(session, entry)
            purged.append(entry.id)
    return purged, refused


def _fail_open_ids(session: Session, entry: DeadLetter) -> None:
    """Every id of a purged entry ends FAILED with the reason, unless it reached the sheet
    (SPEC 3.7: no id is left DEAD_LETTERED without a pending entry)."""
    states = ledger.states(session, entry.answer_ids, entry.spread_sheet_id, entry.sheet_id)
    open_ids = [i for i in entry.answer_ids if states.get(i) is not TransactionType.COMPLETED]
    ledger.record(
        session,
        open_ids,
        entry.spread_sheet_id,
        entry.sheet_id,
        TransactionType.FAILED,
        PURGED_MESSAGE,
    )
