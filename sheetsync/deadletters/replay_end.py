"""The end of a replay: a replay of dead letters is DONE once none of its ids is ENQUEUED,
and the flush run that settles the last of them says so when it ends
(:class:`ReplaysInFlight`), not beat's next dispatch (which stays the backstop, for a run
that dies first too).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from sheetsync.deadletters.store import Sessions
from sheetsync.models import (
    DeadLetter,
    DeadLetterAnswer,
    DeadLetterStatus,
    SheetTransaction,
    TransactionType,
    utcnow,
)
from sheetsync.redis_keys import BufferKey

log = logging.getLogger(__name__)


def replay_in_flight(session: Session, spread_sheet_id: str, sheet_id: int) -> bool:
    """Whether a replay of answers for this sheet is in flight (an entry REPLAYING whose
    ids went back to a buffer): a flush that settles ids of the sheet then completes it
    (:func:`complete_replays`). One indexed read, in the caller's transaction."""
    found = session.scalar(
        select(DeadLetter.id)
        .where(
            DeadLetter.status == DeadLetterStatus.REPLAYING,
            DeadLetter.requeued_at.is_not(None),
            DeadLetter.spread_sheet_id == spread_sheet_id,
            DeadLetter.sheet_id == sheet_id,
        )
        .limit(1)
    )
    return found is not None


def complete_replays(sessions: Sessions, *, sheet: tuple[str, int] | None = None) -> list[int]:
    """REPLAYING entries whose ids went back to their buffer and none of which is
    ENQUEUED any more become DONE: each id is in the sheet, FAILED with a reason, or
    parked in another entry. (Parked again for the same reason, an id makes the entry
    PENDING.) An entry claimed but not yet requeued is never DONE: its ids are all
    DEAD_LETTERED. Returns their ids.

    A flush run that settled ids of a replay calls it for its sheet (``sheet``) after
    its transactions committed, so of two runs settling one entry's ids the later one
    sees both; beat's dispatch calls it for every sheet (the backstop). The update asks
    every condition again: an entry claimed anew meanwhile (``requeued_at`` cleared) or
    parked again (PENDING) is left alone."""
    conditions = [
        DeadLetter.status == DeadLetterStatus.REPLAYING,
        DeadLetter.requeued_at.is_not(None),
        ~_ids_in_flight(),
    ]
    if sheet is not None:
        conditions += [DeadLetter.spread_sheet_id == sheet[0], DeadLetter.sheet_id == sheet[1]]
    with sessions.begin() as session:
        done = list(session.scalars(select(DeadLetter.id).where(*conditions)))
        if done:
            session.execute(
                update(DeadLetter)
                .where(DeadLetter.id.in_(done), *conditions)
                .values(status=DeadLetterStatus.DONE, error_message=None, updated_at=utcnow())
                .execution_options(synchronize_session=False)
            )
    return done


def _ids_in_flight() -> Any:
    """Whether an entry has an id ENQUEUED for its sheet (a correlated EXISTS)."""
    tx = SheetTransaction
    return (
        select(DeadLetterAnswer.dead_letter_id)
        .join(
            tx,
            (tx.submission_answer_id == DeadLetterAnswer.answer_id)
            & (tx.type == TransactionType.ENQUEUED),
        )
        .where(
            DeadLetterAnswer.dead_letter_id == DeadLetter.id,
            tx.spread_sheet_id == DeadLetter.spread_sheet_id,
            tx.sheet_id == DeadLetter.sheet_id,
        )
        .exists()
    )


class ReplaysInFlight:
    """Whether a transaction of one run that settled or parked ids saw a replay of its
    sheet's answers in flight; the run then completes those replays when it ends."""

    def __init__(self, key: BufferKey) -> None:
        self.key = key
        self.seen = False

    def note(self, session: Session) -> None:
        """In a transaction that settles or parks ids: is a replay of this sheet's answers
        in flight? (One indexed read per run, until one is found.)"""
        if not self.seen:
            self.seen = replay_in_flight(session, self.key.spread_sheet_id, self.key.sheet_id)

    def complete(self, sessions: Sessions, token: str) -> None:
        """When the run ends: the entries with no id ENQUEUED any more are DONE now."""
        if not self.seen:
            return
        try:
            done = complete_replays(sessions, sheet=(self.key.spread_sheet_id, self.key.sheet_id))
        except SQLAlchemyError as exc:
            log.warning(
                "flush %s could not mark finished replays DONE (%s); beat's dead-letter "
                "dispatch will",
                token,
                type(exc).__name__,
            )
            return
        if done:
            log.info("flush %s finished the replay of dead letters %s", token, done)
