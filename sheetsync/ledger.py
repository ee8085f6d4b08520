"""The SheetTransaction ledger: where each (answer, sheet) stands.

ENQUEUED is the outbox row written at emit; COMPLETED, DEAD_LETTERED and FAILED are the
settled states a flush moves it to. Writes are bulk upserts (one statement per state),
so a batch of 5000 costs one round trip, and replaying a write is harmless.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from sheetsync.models import SheetTransaction, TransactionType, utcnow

#: States after which a flush must not append the answer again.
SETTLED = frozenset(
    {TransactionType.COMPLETED, TransactionType.DEAD_LETTERED, TransactionType.FAILED}
)
#: Rows per upsert statement (keeps bind parameters under SQLite's limit).
UPSERT_CHUNK = 2000


def states(
    session: Session, answer_ids: Sequence[str], spread_sheet_id: str, sheet_id: int
) -> dict[str, TransactionType]:
    """The ledger state of each id for one sheet (ids with no row are absent)."""
    result: dict[str, TransactionType] = {}
    tx = SheetTransaction
    for start in range(0, len(answer_ids), UPSERT_CHUNK):
        chunk = answer_ids[start : start + UPSERT_CHUNK]
        rows = session.execute(
            select(tx.submission_answer_id, tx.type).where(
                tx.spread_sheet_id == spread_sheet_id,
                tx.sheet_id == sheet_id,
                tx.submission_answer_id.in_(chunk),
            )
        )
        for answer_id, state in rows:
            result[answer_id] = TransactionType(state)
    return result


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
    now = now or utcnow()
    statement = _upsert(session.get_bind().dialect.name)
    items = list(errors_by_id.items())
    for start in range(0, len(items), UPSERT_CHUNK):
        rows = [
            {
                "submission_answer_id": answer_id,
                "spread_sheet_id": spread_sheet_id,
                "sheet_id": sheet_id,
                "type": state.value,
                "error_message": error,
                "updated_at": now,
            }
            for answer_id, error in items[start : start + UPSERT_CHUNK]
        ]
        session.execute(statement, rows)


@functools.cache
def _upsert(dialect: str) -> Any:
    """One INSERT ... ON CONFLICT DO UPDATE per dialect, executed with many parameter
    sets: the same statement object every time, so SQLAlchemy compiles it once."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(SheetTransaction)
    return statement.on_conflict_do_update(
        index_elements=["submission_answer_id", "spread_sheet_id", "sheet_id"],
        set_={
            "type": statement.excluded.type,
            "error_message": statement.excluded.error_message,
            "updated_at": statement.excluded.updated_at,
        },
    )
