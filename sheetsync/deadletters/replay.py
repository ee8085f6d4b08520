"""Dead-letter replay: a due entry's ids go back to their buffer, and from there through
the one write path every answer takes.

An entry is replayed only by whoever claims it (:func:`claim_due` marks it REPLAYING), so
the beat dispatcher, the workers and a second operator never replay one entry at once.
The beat dispatcher claims due entries and sends one replay task each; an operator's
replay (``sheetsync dlq replay`` and the console) claims the entries it names
(:func:`claim`) and sends them the same way. Whatever was claimed but not sent (the broker
was down) goes back to PENDING, due now (:func:`release`).

A replay records the entry's ids that are not in the sheet ENQUEUED, in one transaction,
then pushes them to the link's buffer: the ledger rows are the outbox, as for an emit,
and the reconciler pushes them if this process dies first. The flush then writes them
like any other answer (lease, durable intent, limiter, alerts, backoff); if they fail
again for the same reason they go back into this entry with one more attempt; once none
is ENQUEUED the entry is DONE (:mod:`sheetsync.deadletters.replay_end`).
``sheetsync dlq replay --now`` runs the same replay, then drives the buffer's flushes in
its own process (:func:`sheetsync.flush.here.flush_here`). Nothing here prints: the
callers say what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from sheetsync import ledger, links, notify
from sheetsync.buffers.push import push
from sheetsync.db import is_postgres
from sheetsync.deadletters import store
from sheetsync.deadletters.replay_end import complete_replays
from sheetsync.deadletters.store import Sessions
from sheetsync.dispatch import get_dispatcher
from sheetsync.models import (
    CredentialStatus,
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
    utcnow,
)
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services

#: A REPLAYING entry untouched this long lost its task (the worker died): claim it again.
DEFAULT_REPLAY_STALE_S = 600.0
#: Entries the dispatcher claims per beat.
DEFAULT_DISPATCH_LIMIT = 100
#: Ids per claim by hand (keeps the IN list well under every database's parameter limit).
CLAIM_CHUNK = 500
#: Statuses a named entry may be replayed from.
REPLAYABLE = frozenset({"PENDING", "FAILED", "REPLAYING"})


def claim_due(
    sessions: Sessions, *, ids: Sequence[int] | None = None, limit: int = DEFAULT_DISPATCH_LIMIT
) -> list[int]:
    """Mark due PENDING (and stale REPLAYING) entries REPLAYING; return their ids.

    ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two dispatchers never claim one entry.
    """
    now = utcnow()
    stale = now - timedelta(seconds=DEFAULT_REPLAY_STALE_S)
    with sessions.begin() as session:
        query = (
            select(DeadLetter)
            .where(
                or_(
                    (DeadLetter.status == DeadLetterStatus.PENDING)
                    & (DeadLetter.next_attempt_at <= now),
                    (DeadLetter.status == DeadLetterStatus.REPLAYING)
                    & (DeadLetter.updated_at < stale),
                )
            )
            .order_by(DeadLetter.next_attempt_at, DeadLetter.id)
            .limit(limit)
        )
        if ids is not None:
            query = query.where(DeadLetter.id.in_(list(ids))).limit(max(limit, len(ids)))
        if is_postgres(session.get_bind()):
            query = query.with_for_update(skip_locked=True)
        entries = session.scalars(query).all()
        for entry in entries:
            entry.status = DeadLetterStatus.REPLAYING
            entry.requeued_at = None
            entry.updated_at = now
        return [entry.id for entry in entries]


def release(sessions: Sessions, ids: Sequence[int]) -> None:
    """Give claimed entries that were never replayed back: PENDING, due now."""
    if not ids:
        return
    now = utcnow()
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id.in_(list(ids)), DeadLetter.status == DeadLetterStatus.REPLAYING)
            .values(status=DeadLetterStatus.PENDING, next_attempt_at=now, updated_at=now)
        )


def requeued_in(session: Session, entry: DeadLetter) -> None:
    """A replay handed the entry's ids back to their buffer (in its transaction): from
    now on the entry is DONE once none of them is ENQUEUED."""
    now = utcnow()
    entry.requeued_at = now
    entry.updated_at = now


def reschedule(sessions: Sessions, entry_id: int, error: str, delay_s: float) -> None:
    """The replay failed again: PENDING, one more attempt counted, due in ``delay_s``."""
    now = utcnow()
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id == entry_id)
            .values(
                status=DeadLetterStatus.PENDING,
                attempts=DeadLetter.attempts + 1,
                error_message=error[: store.ERROR_CHARS_MAX],
                next_attempt_at=now + timedelta(seconds=delay_s),
                updated_at=now,
            )
        )


@dataclass(frozen=True)
class ReplayResult:
    summary: str
    #: The buffer the ids went back to (None when nothing was requeued).
    key: BufferKey | None = None
    requeued: int = 0


def dispatch_due(services: Services) -> int:
    """The beat task: entries whose replay finished become DONE; then claim what is due
    and send one replay task per entry."""
    complete_replays(services.sessions)
    claimed = claim_due(services.sessions)
    dispatcher = get_dispatcher()
    for entry_id in claimed:
        dispatcher.send_replay(entry_id)
    return len(claimed)


def replay(services: Services, entry_id: int) -> ReplayResult:
    """Hand a claimed (REPLAYING) entry's ids back to their buffer."""
    with services.sessions.begin() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None or entry.status is not DeadLetterStatus.REPLAYING:
            return ReplayResult(f"entry {entry_id} is not replaying; skipped")
        key = BufferKey(entry.user_id, entry.submission_id, entry.spread_sheet_id, entry.sheet_id)
        waiting = _credential_still_broken(session, entry)
        if waiting is None:
            target = _target(session, entry, key)
            if target is not None:
                ids = _requeue(session, entry)
    if waiting is not None:
        reschedule(services.sessions, entry_id, waiting, services.settings.dlq_delay_s)
        return ReplayResult(f"entry {entry_id}: {waiting}; next try in the credential delay")
    if target is None:
        return ReplayResult(f"entry {entry_id}: its link is gone; its answers are FAILED")
    if not ids:
        return ReplayResult(f"entry {entry_id}: every answer is in the sheet already; DONE")
    push(services.store, [target], ids)
    notify.notify_buffer(
        services.redis,
        services.sessions,
        notify.DEAD_LETTERS_REPLAYED,
        target[0],
        settings=services.settings,
    )
    return ReplayResult(
        f"entry {entry_id}: {len(ids)} answers back in their buffer",
        key=target[0],
        requeued=len(ids),
    )


def _credential_still_broken(session: Session, entry: DeadLetter) -> str | None:
    """Why a CREDENTIAL entry cannot be replayed yet (the owner has not reconnected)."""
    if entry.reason is not DeadLetterReason.CREDENTIAL:
        return None
    credential = session.get(GoogleCredential, entry.user_id)
    if credential is None:
        return f"owner {entry.user_id} has no Google credential"
    if credential.status is not CredentialStatus.VALID:
        return f"owner {entry.user_id}'s credential is still {credential.status.value}"
    return None


def _target(session: Session, entry: DeadLetter, key: BufferKey) -> tuple[BufferKey, str] | None:
    """The (buffer, queue) of the link that now sends this form to this sheet; None, with
    the entry and its ids FAILED, when there is no such link any more."""
    try:
        links.check(session, key)
    except links.LinkGone as gone:
        if gone.successor is not None:
            return gone.successor
        store.fail_in(session, entry, gone.reason)
        return None
    return key, links.queue_of(session, key.user_id)


def _requeue(session: Session, entry: DeadLetter) -> list[str]:
    """The entry's ids not in the sheet, recorded ENQUEUED, and those in it whose edit or
    deletion waits, to go back to their buffer. The entry stays REPLAYING
    until none of them is ENQUEUED: the flush run that settles the last one makes it
    DONE (:func:`~sheetsync.deadletters.replay_end.complete_replays`); failing again for
    its reason puts them back in it, one attempt more. With none to requeue, it is DONE
    at once."""
    ids = store.answer_ids(session, entry.id)
    entries = ledger.entries(session, ids, entry.spread_sheet_id, entry.sheet_id)
    done = (TransactionType.COMPLETED, TransactionType.DELETED)
    requeued = [i for i in ids if (e := entries.get(i)) is None or e.state not in done]
    # In the sheet, with an edit or a deletion still to apply: back to the buffer too.
    changed = [
        i
        for i in ids
        if (e := entries.get(i)) and e.state is TransactionType.COMPLETED and e.change
    ]
    if not requeued and not changed:  # all in the sheet already: no flush will say so
        store.done_in(session, entry)
        return []
    ledger.record(
        session, requeued, entry.spread_sheet_id, entry.sheet_id, TransactionType.ENQUEUED
    )
    requeued_in(session, entry)
    return [*requeued, *changed]


# An operator's replay (``sheetsync dlq replay`` and the console).


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
        release(services.sessions, [entry_id for entry_id in claimed if entry_id not in done])
    return Sent(sent, taken)


def claim(services: Services, ids: Sequence[int], *, include_failed: bool) -> list[int]:
    """Make ``ids`` due now and claim them; returns the ones this process now owns."""
    store.make_due(services.sessions, ids=ids, include_failed=include_failed)
    return claim_due(services.sessions, ids=ids, limit=len(ids))


def _statuses(services: Services, ids: Sequence[int]) -> dict[int, str]:
    with services.sessions() as session:
        rows = session.execute(
            select(DeadLetter.id, DeadLetter.status).where(DeadLetter.id.in_(list(ids)))
        ).all()
    return {entry_id: DeadLetterStatus(status).value for entry_id, status in rows}
