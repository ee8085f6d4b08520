"""Operator replays of dead letters, shared by ``sheetsync dlq replay`` and the web console.

An entry is replayed only by whoever claims it (``deadletters.claim_due`` marks it
REPLAYING), so the beat dispatcher, the workers and a second operator never replay one
entry at once. Whatever was claimed but not sent (the broker was down) goes back to
PENDING, due now. Nothing here prints: the callers say what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from sheetsync import deadletters
from sheetsync.models import DeadLetter, DeadLetterStatus
from sheetsync.services import Services

#: Ids per claim (keeps the IN list well under every database's parameter limit).
CLAIM_CHUNK = 500
#: Statuses a named entry may be replayed from.
REPLAYABLE = frozenset({"PENDING", "FAILED", "REPLAYING"})


@dataclass(frozen=True)
class Candidates:
    """The entries to try, in order, and the named ones skipped with their status."""

    ids: list[int]
    skipped: list[tuple[int, str]]
    #: Whether the entries were named (they may then be FAILED too).
    named: bool


@dataclass(frozen=True)
class Sent:
    """Entries sent to the workers, and those someone else had claimed first."""

    sent: list[int]
    taken: list[int]


def candidates(services: Services, *, ids: Sequence[int] | None, user_id: str | None) -> Candidates:
    """Named entries may be PENDING, FAILED, or REPLAYING (claimable only once stale: its
    worker died); without names, every PENDING entry (of ``user_id``, if given)."""
    if ids is None:
        with services.sessions() as session:
            query = select(DeadLetter.id).where(DeadLetter.status == DeadLetterStatus.PENDING)
            if user_id is not None:
                query = query.where(DeadLetter.user_id == user_id)
            found = list(session.scalars(query.order_by(DeadLetter.id)))
        return Candidates(found, [], named=False)
    statuses = _statuses(services, ids)
    chosen: list[int] = []
    skipped: list[tuple[int, str]] = []
    for entry_id in ids:
        state = statuses.get(entry_id, "gone")
        if state in REPLAYABLE:
            chosen.append(entry_id)
        else:
            skipped.append((entry_id, state))
    return Candidates(chosen, skipped, named=True)


def send_to_workers(services: Services, chosen: Candidates) -> Sent:
    """Claim the chosen entries and send one replay task each."""
    from sheetsync.dispatch import get_dispatcher

    # Before anything changes: without a Celery app there is nobody to send to.
    dispatcher = get_dispatcher()
    claimed: list[int] = []
    for start in range(0, len(chosen.ids), CLAIM_CHUNK):
        chunk = chosen.ids[start : start + CLAIM_CHUNK]
        claimed.extend(claim(services, chunk, include_failed=chosen.named))
    owned = set(claimed)
    taken = [entry_id for entry_id in chosen.ids if entry_id not in owned]
    sent: list[int] = []
    try:
        for entry_id in claimed:
            dispatcher.send_replay(entry_id)
            sent.append(entry_id)
    finally:
        done = set(sent)
        release(services, [entry_id for entry_id in claimed if entry_id not in done])
    return Sent(sent, taken)


def claim(services: Services, ids: Sequence[int], *, include_failed: bool) -> list[int]:
    """Make ``ids`` due now and claim them; returns the ones this process now owns."""
    deadletters.make_due(services.sessions, ids=ids, include_failed=include_failed)
    return deadletters.claim_due(services.sessions, ids=ids, limit=len(ids))


def release(services: Services, ids: Sequence[int]) -> None:
    """Give claimed entries that were never replayed back: PENDING, due now."""
    deadletters.release(services.sessions, ids)


def _statuses(services: Services, ids: Sequence[int]) -> dict[int, str]:
    with services.sessions() as session:
        rows = session.execute(
            select(DeadLetter.id, DeadLetter.status).where(DeadLetter.id.in_(list(ids)))
        ).all()
    return {entry_id: DeadLetterStatus(status).value for entry_id, status in rows}
