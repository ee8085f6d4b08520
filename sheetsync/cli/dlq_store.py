"""The database side of ``sheetsync dlq``: read, check and purge dead letters.

Kept apart from the command definitions so that ``--help`` and usage errors never pay
for importing SQLAlchemy and the models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, sessionmaker

from sheetsync.models import DeadLetter
from sheetsync.recovery import deadletters


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
            select(DeadLetter, deadletters.answer_count(DeadLetter.id))
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
        ids = deadletters.answer_ids(session, entry.id)
        details = summary(entry, len(ids))
        details["answer_ids"] = ids
        return details


def missing_ids(sessions: sessionmaker[Session], ids: Sequence[int]) -> list[int]:
    """The ids in ``ids`` that name no entry."""
    with sessions() as session:
        found = set(session.scalars(select(DeadLetter.id).where(DeadLetter.id.in_(ids))))
    return [entry_id for entry_id in ids if entry_id not in found]
