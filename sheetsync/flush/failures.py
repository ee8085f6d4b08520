"""The failure table: how a flush run that raised ends, from the exception's class to
what happens to the buffer (:data:`FAILURE_OUTCOMES`; docs/ARCHITECTURE.md, "One flush
run").

Every row ends the job, releases it for a bounded number of retries, or parks its ids:
no failure leaves a job running or re-dispatched forever.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from sheetsync import credentials, ledger, links, notify
from sheetsync.alerts import send_alert_once
from sheetsync.buffers.push import push
from sheetsync.deadletters import store
from sheetsync.errors import (
    ConfigError,
    CredentialError,
    CryptoError,
    HoldForBatch,
    PermanentError,
    RateLimited,
    SheetFullError,
    SheetSyncError,
    StaleRunError,
    TransientError,
    WaitForIntent,
)
from sheetsync.flush import intents
from sheetsync.flush.columns import LinkPaused
from sheetsync.flush.outcomes import Outcome
from sheetsync.flush.run import FlushRun
from sheetsync.ledger import SETTLED
from sheetsync.models import AnswerChange, DeadLetterReason, TransactionType

log = logging.getLogger(__name__)


def backoff_s(attempt: int, base_s: float) -> float:
    """Jittered exponential backoff: attempt 1 in [0, b), then [b·2^(n-2), b·2^(n-1))."""
    if attempt <= 1:
        return random.uniform(0, base_s)
    low = base_s * 2 ** (attempt - 2)
    return random.uniform(low, 2 * low)


def fenced(run: FlushRun, _exc: Exception) -> Outcome:
    log.warning("flush %s lost its buffer to a newer run; stopping", run.lease.token)
    return Outcome("fenced", run.tally)


def at_next_slot(run: FlushRun, exc: RateLimited | WaitForIntent) -> Outcome:
    return run.finish(countdown_s=exc.retry_after_s)


def hold_for_batch(run: FlushRun, exc: HoldForBatch) -> Outcome:
    return run.finish(countdown_s=exc.retry_after_s, hold=True)


def link_gone(run: FlushRun, exc: links.LinkGone) -> Outcome:
    """The link (or the form) is gone. Another link to the same sheet takes the ids;
    without one they end FAILED, with the buffer's dead letters, and nothing is
    written to that sheet."""
    ids = run.services.store.read_all(run.key)
    with run.services.sessions.begin() as session:
        states = ledger.states(session, ids, run.key.spread_sheet_id, run.key.sheet_id)
        unsettled = list(dict.fromkeys(i for i in ids if states.get(i) not in SETTLED))
        if exc.successor is None:
            run.replays.note(session)
            ledger.record(
                session,
                unsettled,
                run.key.spread_sheet_id,
                run.key.sheet_id,
                TransactionType.FAILED,
                exc.reason,
            )
            store.fail_buffer(session, run.key, exc.reason)
            for intent in intents.open_for(session, run.key):
                intents.resolve(session, intent.id)
    if exc.successor is not None:
        successor, queue = exc.successor
        push(run.services.store, [(successor, queue)], unsettled)
    log.warning("flush %s: %s (%d ids)", run.lease.token, exc, len(unsettled))
    run.trim(len(ids), None)
    if exc.successor is None and unsettled:
        _notify_owner(run, notify.LINK_FAILED)
    run.tally.failed += len(unsettled) if exc.successor is None else 0
    return run.finish()


def park_credential(run: FlushRun, exc: CredentialError | CryptoError) -> Outcome:
    """The owner's credential fails (Google refuses it, or its stored refresh token is
    corrupt or forged): park the buffer for 7 days and mark it INVALID, unless the owner
    reconnected since this run read it (then run again at once).

    The compare-and-set and the park are one transaction: the credential's row stays
    locked until the ids are parked, so a reconnect lands either before (and this run
    goes again) or after (and its ``make_due`` finds the entry to replay)."""

    def unless_reconnected(session: Session) -> bool:
        if run.credential_version is None:  # no credential row: nothing to compare
            return True
        return credentials.mark_invalid_if_unchanged(
            session, run.key.user_id, run.credential_version
        )

    if not _park_buffer(run, DeadLetterReason.CREDENTIAL, str(exc), unless_reconnected):
        log.info("flush %s: the credential changed meanwhile; again", run.lease.token)
        return run.finish(countdown_s=0)
    _notify_owner(run, notify.CREDENTIAL_INVALID)
    return run.finish()


def paused(run: FlushRun, exc: LinkPaused) -> Outcome:
    """The link is paused (row 1 does not match its columns): park the buffer until
    ``sheetsync links resume``. The alert went out when the link was paused."""
    _park_buffer(run, DeadLetterReason.PAUSED, str(exc), alert=False)
    return run.finish()


def permanent(run: FlushRun, exc: PermanentError) -> Outcome:
    if run.title_from_cache and exc.status == 400:
        # Most likely the tab was renamed since we cached its title: forget it and
        # run again at once; a gid that is really gone fails for good then.
        log.warning("flush %s: %s; looking the sheet up again", run.lease.token, exc)
        run.services.store.forget_sheet(run.key, "title", "time_zone", "header_ok")
        return run.finish(countdown_s=0)
    _park_buffer(run, DeadLetterReason.PERMANENT, str(exc))
    _notify_owner(run, notify.LINK_FAILED)
    return run.finish()


def sheet_full(run: FlushRun, exc: SheetFullError) -> Outcome:
    """Google refused an append (or a new tab) for the spreadsheet's cell limit: roll
    over to a new tab sized to our columns, and run again at once. When even that is
    refused, the buffer waits in a SHEET_FULL dead letter (retried hourly): an answer
    never fails because a sheet is full (docs/ARCHITECTURE.md, "Full sheets roll over")."""
    rollover = run.rollover if run.sheet_open else None
    if rollover is not None and rollover.header is not None and not rollover.fresh():
        try:
            rollover.roll_over()
        except SheetFullError as refused:
            exc = refused
        except Exception as other:
            return end_with(run, other)
        else:
            return run.finish(countdown_s=0)
    _park_buffer(
        run,
        DeadLetterReason.SHEET_FULL,
        f"{exc}; free cells in the spreadsheet (or link another one), then replay",
    )
    return run.finish()


def retry(run: FlushRun, exc: Exception) -> Outcome:
    """Retry with backoff; after RETRY_MAX failures in a row, a dead letter (with an
    alert) whose reason says what kept failing."""
    settings = run.services.settings
    failures = run.services.store.attempts(run.key) + 1
    if failures > settings.retry_max:
        reason = _exhausted_reason(exc)
        _park_buffer(run, reason, f"{failures} tries failed: {_describe(exc)}")
        return run.finish()
    if not isinstance(exc, TransientError):
        log.error("flush %s: %s", run.lease.token, _describe(exc))
    delay = backoff_s(failures, settings.retry_base_s)
    if isinstance(exc, TransientError) and exc.ambiguous and exc.status is None:
        # A request we gave up on (no answer) may still be running at Google; the
        # next run reads the sheet only once it can no longer land.
        delay = max(delay, settings.google_timeout_s)
    if run.services.store.release(run.key, run.lease, delay) < 0:
        return fenced(run, exc)
    error = exc if isinstance(exc, TransientError) else TransientError(_describe(exc))
    return Outcome("retry", run.tally, retry_in_s=delay, error=error)


def _park_buffer(
    run: FlushRun,
    reason: DeadLetterReason,
    message: str,
    precondition: Callable[[Session], bool] | None = None,
    *,
    alert: bool = True,
) -> bool:
    """Move every unsettled id of the buffer (and every landed one whose edit or deletion
    is pending) to a dead letter, then trim them. With a ``precondition``, only if it
    holds, checked in the same transaction. Returns whether the ids were parked; the
    owner is told when a deletion waits with them."""
    ids = run.services.store.read_all(run.key)
    delay = store.delay_for(reason, run.services.settings)
    with run.services.sessions.begin() as session:
        if precondition is not None and not precondition(session):
            return False
        entries = ledger.entries(session, ids, run.key.spread_sheet_id, run.key.sheet_id)
        pending = list(dict.fromkeys(i for i in ids if _unsettled(entries.get(i))))
        store.park(session, run.key, pending, reason, message, delay_s=delay)
        run.replays.note(session)  # parked in another entry, an id is settled for a replay
    run.trim(len(ids), None)
    run.tally.parked += len(pending)
    deletions = [i for i in pending if (e := entries.get(i)) and e.change is AnswerChange.DELETE]
    if deletions:
        _notify_owner(run, notify.ERASURE_PENDING)
    if pending and alert:
        send_alert_once(
            run.services.redis,
            f"{reason.value}:{run.key.base}",
            f"{reason.value}: {len(pending)} answers of form {run.key.submission_id} for "
            f"spreadsheet {run.key.spread_sheet_id} (gid {run.key.sheet_id}, owner "
            f"{run.key.user_id}) moved to a dead letter: {message}",
            settings=run.services.settings,
        )
    return True


def _unsettled(entry: ledger.Entry | None) -> bool:
    """Whether a parked id still has something to do in the sheet."""
    if entry is None or entry.state not in SETTLED:
        return True
    return entry.change is not None and entry.state is not TransactionType.DELETED


def _notify_owner(run: FlushRun, topic: str) -> None:
    """Tell the buffer's owner (at most once an hour per topic; never raises, and the
    hook itself runs in a task of its own, off this flush's path)."""
    notify.notify_buffer(
        run.services.redis, run.services.sessions, topic, run.key, settings=run.services.settings
    )


def _describe(exc: Exception) -> str:
    """One line for an error, safe to store: ours carry no values; others are named only."""
    if isinstance(exc, SheetSyncError):
        return str(exc)
    if isinstance(exc, OperationalError):
        return f"database unavailable ({type(exc).__name__})"
    return f"unexpected {type(exc).__name__}"


def _exhausted_reason(exc: Exception) -> DeadLetterReason:
    if isinstance(exc, TransientError | OperationalError):
        return DeadLetterReason.TRANSIENT_EXHAUSTED
    if isinstance(exc, ConfigError):
        return DeadLetterReason.CONFIGURATION
    return DeadLetterReason.UNEXPECTED


#: How a run that raised ends: the first row whose class matches decides. A handler
#: that finds the run fenced (a newer run took the buffer) ends it as ``fenced``.
#: A missing setting or PII key (ConfigError) is retried like a transient failure, so it
#: ends in a CONFIGURATION dead letter with an operator alert that names it, and nothing
#: is lost; so is anything unforeseen (a bug), which therefore never strands a buffer.
#: PiiKeysError (no keys, or not the key a token names) is a CryptoError too: its
#: ConfigError row comes first, so only a corrupt or forged refresh token (a plain
#: CryptoError) is the owner's credential failing.
FAILURE_OUTCOMES: tuple[tuple[type[Exception], Callable[[FlushRun, Any], Outcome]], ...] = (
    (StaleRunError, fenced),
    (links.LinkGone, link_gone),
    (LinkPaused, paused),
    (RateLimited, at_next_slot),
    (WaitForIntent, at_next_slot),
    (HoldForBatch, hold_for_batch),
    (CredentialError, park_credential),
    (ConfigError, retry),
    (CryptoError, park_credential),
    (SheetFullError, sheet_full),
    (PermanentError, permanent),
    (TransientError, retry),
    (OperationalError, retry),
    (Exception, retry),
)


def end_with(run: FlushRun, exc: Exception) -> Outcome:
    """The outcome of a run that raised ``exc``: the first matching row of the table."""
    for error_class, handler in FAILURE_OUTCOMES:
        if isinstance(exc, error_class):
            try:
                return handler(run, exc)
            except StaleRunError:
                return fenced(run, exc)
    raise exc  # unreachable: the table ends with Exception
