"""The SheetTransaction ledger: where each (answer, sheet) stands.

Every write goes through here, so here is where each transition is counted
(``sheetsync_ledger_transitions_total{to}``, in memory until the process publishes).

ENQUEUED is the outbox row written at emit; COMPLETED, DEAD_LETTERED and FAILED are the
settled states a flush moves it to. Writes are bulk upserts (one statement per state),
so a batch of 5000 costs one round trip, and replaying a write is harmless.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from sheetsync.ledger.claim import REFUSED_BY_OWNER_RULE as REFUSED_BY_OWNER_RULE
from sheetsync.ledger.claim import claim_for_links as claim_for_links
from sheetsync.ledger.states import CHANGEABLE as CHANGEABLE
from sheetsync.ledger.states import EMITTABLE as EMITTABLE
from sheetsync.ledger.states import SETTLED as SETTLED
from sheetsync.ledger.states import TERMINAL as TERMINAL
from sheetsync.ledger.states import UPSERT_CHUNK as UPSERT_CHUNK
from sheetsync.metrics import events
from sheetsync.metrics.names import LEDGER_TRANSITIONS
from sheetsync.models import (
    AnswerChange,
    SheetTransaction,
    TransactionType,
    utcnow,
)


def states(
    session: Session, answer_ids: Sequence[str], spread_sheet_id: str, sheet_id: int
) -> dict[str, TransactionType]:
    """The ledger state of each id for one sheet (ids with no row are absent)."""
    found = entries(session, answer_ids, spread_sheet_id, sheet_id)
    return {answer_id: entry.state for answer_id, entry in found.items()}


def record(
    session: Session,
    answer_ids: Iterable[str],
    spread_sheet_id: str,
    sheet_id: int,
    state: TransactionType,
    error_message: str | None = None,
    *,
    now: datetime | None = None,
) -> None:
    """Upsert one state for many ids of one sheet."""
    record_many(
        session,
        {answer_id: error_message for answer_id in answer_ids},
        spread_sheet_id,
        sheet_id,
        state,
        now=now,
    )


def record_many(
    session: Session,
    errors_by_id: Mapping[str, str | None],
    spread_sheet_id: str,
    sheet_id: int,
    state: TransactionType,
    *,
    now: datetime | None = None,
) -> None:
    """Upsert one state for many ids, each with its own error message (or None)."""
    if not errors_by_id:
        return
    events.count(LEDGER_TRANSITIONS, len(errors_by_id), to=state.value)
    now = now or utcnow()
    statement = _upsert(session.get_bind().dialect.name)
    items = list(errors_by_id.items())
    for start in range(0, len(items), UPSERT_CHUNK):
        rows = [
            _row(answer_id, spread_sheet_id, sheet_id, state, error, now)
            for answer_id, error in items[start : start + UPSERT_CHUNK]
        ]
        session.execute(statement, rows)


def _row(
    answer_id: str,
    spread_sheet_id: str,
    sheet_id: int,
    state: TransactionType,
    error: str | None,
    now: datetime,
) -> dict[str, Any]:
    return {
        "submission_answer_id": answer_id,
        "spread_sheet_id": spread_sheet_id,
        "sheet_id": sheet_id,
        "type": state.value,
        "error_message": error,
        "updated_at": now,
    }


@functools.cache
def _upsert(dialect: str) -> Any:
    """One INSERT ... ON CONFLICT DO UPDATE per dialect, executed with many parameter
    sets: the same statement object every time, so SQLAlchemy compiles it once.

    COMPLETED is terminal: the update skips a row that is COMPLETED. Callers decide from
    states they read earlier, and a run resolving an intent may have recorded the
    answer COMPLETED since (a dead-letter replay that read it DEAD_LETTERED would
    otherwise record it ENQUEUED again, and it would be appended twice)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(SheetTransaction)
    return statement.on_conflict_do_update(
        index_elements=["submission_answer_id", "spread_sheet_id", "sheet_id"],
        set_={
            "type": statement.excluded.type,
            "error_message": statement.excluded.error_message,
            "updated_at": statement.excluded.updated_at,
        },
        # Not NOT IN: an expanding parameter cannot take part in an executemany.
        where=and_(*(SheetTransaction.type != state for state in TERMINAL)),
    )


@dataclass(frozen=True, slots=True)
class Entry:
    """One (answer, sheet) row as a flush reads it."""

    state: TransactionType
    change: AnswerChange | None = None
    #: ``change_seq`` as read: clearing the change is a compare-and-set on it.
    seq: int = 0


def entries(
    session: Session, answer_ids: Sequence[str], spread_sheet_id: str, sheet_id: int
) -> dict[str, Entry]:
    """Each id's state and pending change for one sheet (ids with no row are absent)."""
    result: dict[str, Entry] = {}
    tx = SheetTransaction
    for start in range(0, len(answer_ids), UPSERT_CHUNK):
        chunk = answer_ids[start : start + UPSERT_CHUNK]
        rows = session.execute(
            select(tx.submission_answer_id, tx.type, tx.change, tx.change_seq).where(
                tx.spread_sheet_id == spread_sheet_id,
                tx.sheet_id == sheet_id,
                tx.submission_answer_id.in_(chunk),
            )
        )
        for answer_id, state, change, seq in rows:
            result[answer_id] = Entry(
                TransactionType(state), AnswerChange(change) if change else None, int(seq or 0)
            )
    return result


def completed_ids(session: Session, spread_sheet_id: str, sheet_id: int) -> list[str]:
    """Every answer COMPLETED in one sheet (read only after a run died unchecked)."""
    tx = SheetTransaction
    rows = session.scalars(
        select(tx.submission_answer_id).where(
            tx.spread_sheet_id == spread_sheet_id,
            tx.sheet_id == sheet_id,
            tx.type == TransactionType.COMPLETED.value,
        )
    )
    return [str(answer_id) for answer_id in rows]


def mark_changed(
    session: Session, answer_ids: Sequence[str], change: AnswerChange
) -> list[tuple[str, str, int]]:
    """Record ``change`` on every sheet these answers were emitted to (an UPDATE never
    replaces a DELETE: a deleted answer stays deleted). Returns the (answer id,
    spreadsheet id, gid) marked."""
    tx = SheetTransaction
    marked: list[tuple[str, str, int]] = []
    for start in range(0, len(answer_ids), UPSERT_CHUNK):
        chunk = answer_ids[start : start + UPSERT_CHUNK]
        statement = (
            update(tx)
            .where(tx.submission_answer_id.in_(chunk), tx.type.in_(CHANGEABLE))
            .values(change=change, change_seq=tx.change_seq + 1, updated_at=utcnow())
            .returning(tx.submission_answer_id, tx.spread_sheet_id, tx.sheet_id)
        )
        if change is AnswerChange.UPDATE:
            statement = statement.where(
                or_(tx.change.is_(None), tx.change != AnswerChange.DELETE.value)
            )
        rows = session.execute(statement, execution_options={"synchronize_session": False})
        marked += [(str(a), str(s), int(g)) for a, s, g in rows]
    return marked


def followed(
    session: Session,
    seqs: Mapping[str, int],
    spread_sheet_id: str,
    sheet_id: int,
    errors: Mapping[str, str] | None = None,
) -> None:
    """The sheet shows each answer as it was when its ``change_seq`` was ``seqs[id]``
    (or, with a reason in ``errors``, the edit could not be written and its row keeps
    the version before): clear the change unless a newer one was emitted since."""
    if not seqs:
        return
    tx = SheetTransaction
    statement = (
        update(tx)
        .where(
            tx.submission_answer_id == bindparam("answer_id"),
            tx.spread_sheet_id == spread_sheet_id,
            tx.sheet_id == sheet_id,
            tx.change_seq == bindparam("seen"),
            tx.change == AnswerChange.UPDATE.value,
        )
        .values(change=None, error_message=bindparam("error"))
    )
    errors = errors or {}
    params = [
        {"answer_id": answer_id, "seen": seq, "error": errors.get(answer_id)}
        for answer_id, seq in seqs.items()
    ]
    session.connection().execute(statement, params)


def note_pending(
    session: Session, reasons: Mapping[str, str], spread_sheet_id: str, sheet_id: int
) -> None:
    """Why these answers' changes still wait (``error_message``); the change stays."""
    if not reasons:
        return
    tx = SheetTransaction
    statement = (
        update(tx)
        .where(
            tx.submission_answer_id == bindparam("answer_id"),
            tx.spread_sheet_id == spread_sheet_id,
            tx.sheet_id == sheet_id,
            tx.change.is_not(None),
        )
        .values(error_message=bindparam("reason"))
    )
    params = [{"answer_id": answer_id, "reason": reason} for answer_id, reason in reasons.items()]
    session.connection().execute(statement, params)


#: The reason a DELETED row records: where the answer's row went.
DELETED_NEVER_WRITTEN = "deleted before its row was written"
DELETED_ROW_REMOVED = "its row was removed"
DELETED_NO_ROW = "no row of it was found (deleted by hand)"
DELETED_ROW_BLANKED = "its personal-info cells were blanked (the link keeps rows)"


def record_deleted(
    session: Session, reasons: Mapping[str, str], spread_sheet_id: str, sheet_id: int
) -> None:
    """These answers have no row in the sheet any more, or never had one (``reasons``:
    id -> one of the ``DELETED_*`` reasons): DELETED from any state, COMPLETED too."""
    if not reasons:
        return
    events.count(LEDGER_TRANSITIONS, len(reasons), to=TransactionType.DELETED.value)
    tx = SheetTransaction
    statement = (
        update(tx)
        .where(
            tx.submission_answer_id == bindparam("answer_id"),
            tx.spread_sheet_id == spread_sheet_id,
            tx.sheet_id == sheet_id,
        )
        .values(
            type=TransactionType.DELETED.value,
            change=None,
            error_message=bindparam("reason"),
            updated_at=utcnow(),
        )
    )
    params = [{"answer_id": answer_id, "reason": reason} for answer_id, reason in reasons.items()]
    session.connection().execute(statement, params)


def reopen(
    session: Session, answer_ids: Sequence[str], spread_sheet_id: str, sheet_id: int
) -> list[str]:
    """These answers' rows went from the sheet by mistake (a deletion hit them after a
    person moved rows): COMPLETED -> ENQUEUED, so their next batch appends them again.
    Returns the ids reopened: a value in column A that is no answer of this sheet (a
    person's own text) is none of them."""
    if not answer_ids:
        return []
    tx = SheetTransaction
    rows = session.execute(
        update(tx)
        .where(
            tx.submission_answer_id.in_(list(answer_ids)),
            tx.spread_sheet_id == spread_sheet_id,
            tx.sheet_id == sheet_id,
            tx.type == TransactionType.COMPLETED.value,
        )
        .values(type=TransactionType.ENQUEUED.value, error_message=None, updated_at=utcnow())
        .returning(tx.submission_answer_id),
        execution_options={"synchronize_session": False},
    )
    return [str(answer_id) for (answer_id,) in rows]
