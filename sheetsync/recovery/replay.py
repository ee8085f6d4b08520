"""Dead-letter replay: a due entry's ids go back to their buffer, and from there through
the one write path every answer takes.

The beat dispatcher claims due entries (:func:`deadletters.claim_due`) and sends one
replay task each. A replay records the entry's ids that are not in the sheet ENQUEUED,
in one transaction, then pushes them to the link's buffer: the
ledger rows are the outbox, as for an emit, and the reconciler pushes them if this
process dies first. The flush then writes them like any other answer (lease, durable
intent, limiter, alerts, backoff); if they fail again for the same reason they go back
into this entry with one more attempt; once none is ENQUEUED the entry is DONE.
``sheetsync dlq replay --now`` runs the same replay, then drives the buffer's flushes in
its own process (:func:`flush_here`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from sheetsync import deadletters, ledger, links, notify
from sheetsync.buffers.push import push, send_tasks
from sheetsync.dispatch import QUEUE_DEFAULT, FlushTask, get_dispatcher
from sheetsync.flush.entry import flush
from sheetsync.flush.outcomes import Tally
from sheetsync.keys import BufferKey
from sheetsync.models import (
    CredentialStatus,
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
)
from sheetsync.services import Services

log = logging.getLogger(__name__)

#: How long ``flush_here`` waits for a worker that holds the buffer before looking again.
DEFAULT_WAIT_FOR_WORKER_S = 0.25
#: The longest ``flush_here`` sleeps for a rate-limit slot before trying again.
DEFAULT_LONGEST_NAP_S = 5.0


@dataclass(frozen=True)
class ReplayResult:
    summary: str
    #: The buffer the ids went back to (None when nothing was requeued).
    key: BufferKey | None = None
    requeued: int = 0


def dispatch_due(services: Services) -> int:
    """The beat task: entries whose replay finished become DONE; then claim what is due
    and send one replay task per entry."""
    deadletters.complete_replays(services.sessions)
    claimed = deadletters.claim_due(services.sessions)
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
        deadletters.reschedule(services.sessions, entry_id, waiting, services.settings.dlq_delay_s)
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
        deadletters.fail_in(session, entry, gone.reason)
        return None
    return key, links.queue_of(session, key.user_id)


def _requeue(session: Session, entry: DeadLetter) -> list[str]:
    """The entry's ids not in the sheet, recorded ENQUEUED. The entry stays REPLAYING
    until none of them is ENQUEUED: the flush run that settles the last one makes it
    DONE (:func:`deadletters.complete_replays`); failing again for its reason puts them
    back in it, one attempt more. With none to requeue, it is DONE at once."""
    ids = deadletters.answer_ids(session, entry.id)
    states = ledger.states(session, ids, entry.spread_sheet_id, entry.sheet_id)
    requeued = [i for i in ids if states.get(i) is not TransactionType.COMPLETED]
    if not requeued:  # all in the sheet already: no flush will come to say so
        deadletters.done_in(session, entry)
        return requeued
    ledger.record(
        session, requeued, entry.spread_sheet_id, entry.sheet_id, TransactionType.ENQUEUED
    )
    deadletters.requeued_in(session, entry)
    return requeued


def flush_here(
    services: Services, key: BufferKey, done: Callable[[], bool], *, on_progress: Callable[[], None]
) -> Tally:
    """Run the buffer's flushes in this process until ``done()``, with the code the
    workers run. A run a worker already holds is left to it: this waits and watches.
    Whatever task the buffer waits for when this stops is handed to the workers.

    Returns what the runs in this process did, summed (a worker's runs are not in it)."""
    total = Tally()
    unsent: FlushTask | None = None
    try:
        while not done():
            adopted = services.store.adopt(key, QUEUE_DEFAULT)
            if adopted is None:
                time.sleep(DEFAULT_WAIT_FOR_WORKER_S)
                on_progress()
                continue
            if adopted.superseded:
                _revoke(adopted.superseded)
            current: FlushTask | None = adopted
            while current is not None:
                unsent = current
                outcome = flush(services, current.token)
                total.appended += outcome.tally.appended
                total.parked += outcome.tally.parked
                total.failed += outcome.tally.failed
                total.requests += outcome.tally.requests
                on_progress()
                unsent = outcome.next
                if outcome.status == "retry" and outcome.retry_in_s is not None:
                    # The job waits for this same token again, after the backoff.
                    unsent = FlushTask(current.token, current.queue, outcome.retry_in_s)
                if done() or unsent is None:
                    break
                tally = outcome.tally
                if not (tally.appended or tally.failed or tally.parked):
                    time.sleep(min(unsent.countdown_s, DEFAULT_LONGEST_NAP_S))
                current = FlushTask(unsent.token, unsent.queue, 0.0)
    finally:
        if unsent is not None:
            send_tasks(services.store, [unsent])  # the rest goes on in the workers
    return total


def _revoke(token: str) -> None:
    try:
        get_dispatcher().revoke(token)
    except Exception as exc:
        log.info("revoke of %s failed: %s", token, type(exc).__name__)
