"""Erasure: a person's answers taken out of every sheet sheetsync wrote them to (a GDPR or
PIPA request), and out of everything that could write them again.

:func:`erase` is :func:`~sheetsync.emit.changes.emit_answers_deleted` for answers that may
no longer exist anywhere but in the sheets, plus: the ids leave every dead letter (an
entry left empty is PURGED), and the ledger's DELETED means no flush, replay, resend or
backfill writes them again. The rows go when each sheet's flush runs; a sheet that cannot
be reached (its owner's credential revoked, its access removed) keeps the deletion pending
in the ledger and in a dead letter, applied when the owner reconnects.
:func:`erasure_status` says where each answer stands, and says "erased" only for a sheet
whose ledger row is DELETED.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from sheetsync.deadletters import store as dead_letters
from sheetsync.emit.answers import push_now
from sheetsync.emit.changes import CHUNK, mark
from sheetsync.ledger import DELETED_NEVER_WRITTEN, DELETED_NO_ROW
from sheetsync.models import (
    AnswerChange,
    CredentialStatus,
    DeadLetter,
    DeadLetterAnswer,
    DeadLetterStatus,
    GoogleCredential,
    SheetTransaction,
    SpreadSheet,
    TransactionType,
)
from sheetsync.redis_keys import check_id
from sheetsync.services import Services, get_services

#: ``erased``: no row of the answer is in that sheet; ``pending``: its deletion waits
#: (``detail`` says for what).
Outcome = Literal["erased", "pending"]


@dataclass(frozen=True)
class ErasedPlace:
    """Where one answer stands in one sheet."""

    answer_id: str
    spread_sheet_id: str
    sheet_id: int
    outcome: Outcome
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {
            "answer_id": self.answer_id,
            "spreadsheet_id": self.spread_sheet_id,
            "gid": self.sheet_id,
            "outcome": self.outcome,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Erasure:
    """Where each answer of an erasure stands in every sheet it was sent to."""

    places: tuple[ErasedPlace, ...]
    #: Ids sheetsync never sent to any sheet: nothing of them to remove.
    never_sent: tuple[str, ...] = ()
    #: Ids taken out of dead letters by this erasure.
    taken_from_dead_letters: int = 0

    @property
    def pending(self) -> tuple[ErasedPlace, ...]:
        return tuple(place for place in self.places if place.outcome == "pending")

    @property
    def done(self) -> bool:
        """Whether no row of these answers is left in any sheet."""
        return not self.pending

    def as_json(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "places": [place.as_json() for place in self.places],
            "never_sent": list(self.never_sent),
            "taken_from_dead_letters": self.taken_from_dead_letters,
        }


def erase(answer_ids: Iterable[str], *, services: Services | None = None) -> Erasure:
    """Remove these answers' rows from every linked sheet and tab, and their ids from
    dead letters, so that nothing writes them again. Returns where each stands now: the
    rows go when each sheet's flush runs (poll :func:`erasure_status`)."""
    ids = list(dict.fromkeys(check_id(answer_id, "answer id") for answer_id in answer_ids))
    services = services or get_services()
    with services.sessions.begin() as session:
        recorded = mark(session, dict.fromkeys(ids), AnswerChange.DELETE, services)
        taken = dead_letters.drop_answers(session, ids)
    push_now(services, recorded.pushes)  # Redis down: the reconciler pushes them later
    status = erasure_status(ids, services=services)
    return Erasure(status.places, status.never_sent, taken)


def erasure_status(answer_ids: Iterable[str], *, services: Services | None = None) -> Erasure:
    """Where each of these answers stands in every sheet it was sent to."""
    ids = list(dict.fromkeys(check_id(answer_id, "answer id") for answer_id in answer_ids))
    services = services or get_services()
    places: list[ErasedPlace] = []
    with services.sessions() as session:
        for start in range(0, len(ids), CHUNK):
            places += _places(session, ids[start : start + CHUNK])
    sent = {place.answer_id for place in places}
    return Erasure(tuple(places), tuple(i for i in ids if i not in sent))


def _places(session: Session, ids: Sequence[str]) -> list[ErasedPlace]:
    tx = SheetTransaction
    rows = session.execute(
        select(tx.submission_answer_id, tx.spread_sheet_id, tx.sheet_id, tx.type, tx.change)
        .add_columns(tx.error_message)
        .where(tx.submission_answer_id.in_(ids))
        .order_by(tx.submission_answer_id, tx.spread_sheet_id, tx.sheet_id)
    ).all()
    parked = _parked(session, ids)
    blocked = _blocked_sheets(session, {(row[1], int(row[2])) for row in rows})
    places = []
    for answer_id, spreadsheet, gid, stored, change, reason in rows:
        state = TransactionType(stored)
        if state is TransactionType.DELETED:
            erased = reason or DELETED_NO_ROW
            places.append(ErasedPlace(answer_id, spreadsheet, gid, "erased", erased))
        elif state in (TransactionType.INIT, TransactionType.VALIDATION_FAILED):
            never = DELETED_NEVER_WRITTEN
            places.append(ErasedPlace(answer_id, spreadsheet, gid, "erased", never))
        else:
            why = parked.get((answer_id, spreadsheet, gid)) or blocked.get((spreadsheet, gid))
            if why is None and change == AnswerChange.DELETE.value and reason:
                why = reason  # what the last flush found in the way
            if why is None:
                why = "waiting for its sheet's flush"
                if change != AnswerChange.DELETE.value:
                    why = "not marked for deletion: run the erasure again"
            places.append(ErasedPlace(answer_id, spreadsheet, gid, "pending", why))
    return places


def _parked(session: Session, ids: Sequence[str]) -> dict[tuple[str, str, int], str]:
    """(answer, spreadsheet, gid) held by an open dead letter, and why."""
    rows = session.execute(
        select(
            DeadLetterAnswer.answer_id,
            DeadLetter.spread_sheet_id,
            DeadLetter.sheet_id,
            DeadLetter.reason,
        )
        .join(DeadLetter, DeadLetter.id == DeadLetterAnswer.dead_letter_id)
        .where(
            DeadLetterAnswer.answer_id.in_(ids),
            DeadLetter.status.in_((DeadLetterStatus.PENDING, DeadLetterStatus.REPLAYING)),
        )
    ).all()
    return {
        (answer_id, spreadsheet, int(gid)): f"in a {reason.value} dead letter"
        for answer_id, spreadsheet, gid, reason in rows
    }


def _blocked_sheets(session: Session, sheets: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """Sheets whose link owner's Google credential is not VALID: done on reconnect."""
    blocked: dict[tuple[str, int], str] = {}
    for spreadsheet, gid in sheets:
        statuses = session.execute(
            select(GoogleCredential.status)
            .join(SpreadSheet, SpreadSheet.create_user_id == GoogleCredential.user_id)
            .where(SpreadSheet.spread_sheet_id == spreadsheet, SpreadSheet.sheet_id == gid)
        ).scalars()
        broken = [s for s in statuses if s is not CredentialStatus.VALID]
        if broken:
            blocked[(spreadsheet, gid)] = (
                f"the owner's Google credential is {broken[0].value}: applied on reconnect"
            )
    return blocked
