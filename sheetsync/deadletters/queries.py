"""Dead letters as an operator sees them (``sheetsync dlq`` and the console): list them,
select them by a filter for a bulk action, read one with its answer ids, follow a replay.

Only reads: every change of a dead letter's status is the store's and the replay's
(:mod:`sheetsync.deadletters.store`, :mod:`sheetsync.deadletters.replay`). Kept apart
from the command definitions so that ``--help`` and usage errors never pay for importing
SQLAlchemy and the models.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import ledger
from sheetsync.deadletters import store
from sheetsync.models import DeadLetter, DeadLetterAnswer, DeadLetterStatus, TransactionType


@dataclass(frozen=True)
class Page:
    total: int
    entries: list[dict[str, Any]]


@dataclass(frozen=True)
class Filter:
    """Which dead letters a listing or a bulk action covers: those matching every field
    given (None matches anything)."""

    user_id: str | None = None
    status: str | None = None
    reason: str | None = None
    submission_id: str | None = None
    spread_sheet_id: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = []
        if self.user_id is not None:
            conditions.append(DeadLetter.user_id == self.user_id)
        if self.status is not None:
            conditions.append(DeadLetter.status == self.status)
        if self.reason is not None:
            conditions.append(DeadLetter.reason == self.reason)
        if self.submission_id is not None:
            conditions.append(DeadLetter.submission_id == self.submission_id)
        if self.spread_sheet_id is not None:
            conditions.append(DeadLetter.spread_sheet_id == self.spread_sheet_id)
        return conditions


@dataclass(frozen=True)
class Selection:
    """The entries a filter matches now, for a bulk action on them."""

    #: Matching entries in the statuses asked for, oldest first: what the action takes.
    ids: list[int]
    #: The answer ids those entries hold.
    answers: int
    #: Every matching entry, by status (those the action leaves alone included).
    by_status: dict[str, int]
    #: The owners of ``ids``, with how many of those entries each has.
    owners: dict[str, int]


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
    submission_id: str | None = None,
    spread_sheet_id: str | None = None,
) -> Page:
    """Entries matching every given filter, oldest first, at most ``limit``."""
    conditions = Filter(user_id, status, reason, submission_id, spread_sheet_id).conditions()
    with sessions() as session:
        total = session.scalar(select(func.count()).select_from(DeadLetter).where(*conditions))
        rows = session.execute(
            select(DeadLetter, store.answer_count(DeadLetter.id))
            .where(*conditions)
            .order_by(DeadLetter.id)
            .limit(limit)
        ).all()
        return Page(total or 0, [summary(entry, count or 0) for entry, count in rows])


def select_entries(
    sessions: sessionmaker[Session],
    where: Filter,
    *,
    statuses: Collection[str],
    upto: int | None = None,
) -> Selection:
    """The entries ``where`` matches whose status is one of ``statuses`` (and whose id
    is at most ``upto``, when given): the ids a bulk replay or purge passes on, as
    ``dlq replay ID...`` and ``dlq purge ID...`` take them."""
    conditions = where.conditions()
    if upto is not None:
        conditions.append(DeadLetter.id <= upto)
    chosen = [*conditions, DeadLetter.status.in_(sorted(statuses))]
    with sessions() as session:
        by_status = {
            str(getattr(status, "value", status)): int(count)
            for status, count in session.execute(
                select(DeadLetter.status, func.count())
                .where(*conditions)
                .group_by(DeadLetter.status)
            )
        }
        rows = session.execute(
            select(DeadLetter.id, DeadLetter.user_id).where(*chosen).order_by(DeadLetter.id)
        ).all()
        answers = session.scalar(
            select(func.count())
            .select_from(DeadLetterAnswer)
            .where(DeadLetterAnswer.dead_letter_id.in_(select(DeadLetter.id).where(*chosen)))
        )
    owners: dict[str, int] = {}
    for _, user_id in rows:
        owners[user_id] = owners.get(user_id, 0) + 1
    return Selection([entry_id for entry_id, _ in rows], int(answers or 0), by_status, owners)


def get_entry(sessions: sessionmaker[Session], entry_id: int) -> dict[str, Any] | None:
    """One entry with its answer ids, or None."""
    with sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return None
        ids = store.answer_ids(session, entry.id)
        details = summary(entry, len(ids))
        details["answer_ids"] = ids
        return details


def missing_ids(sessions: sessionmaker[Session], ids: Sequence[int]) -> list[int]:
    """The ids in ``ids`` that name no entry."""
    with sessions() as session:
        found = set(session.scalars(select(DeadLetter.id).where(DeadLetter.id.in_(ids))))
    return [entry_id for entry_id in ids if entry_id not in found]


@dataclass(frozen=True)
class Settled:
    """How far an entry's replay got: of its answers, how many are settled for its sheet
    (in the sheet, FAILED, or parked again) and how many are in the sheet."""

    status: str
    reason: str
    settled: int
    completed: int
    total: int


def settled(sessions: sessionmaker[Session], entry_id: int) -> Settled:
    """An entry's status and reason, and how many of its answers are settled."""
    with sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return Settled("gone", "gone", 0, 0, 0)
        ids = store.answer_ids(session, entry_id)
        states = ledger.states(session, ids, entry.spread_sheet_id, entry.sheet_id)
        done = sum(states.get(i) in ledger.SETTLED for i in ids)
        if entry.status is DeadLetterStatus.FAILED:
            done = len(ids)
        completed = sum(states.get(i) is TransactionType.COMPLETED for i in ids)
        return Settled(entry.status.value, entry.reason.value, done, completed, len(ids))
