"""Dead-letter replay (SPEC 3.8): due entries go back to the sheet, exactly once.

The beat dispatcher claims due PENDING entries (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, so two beats never claim one entry), marks them REPLAYING and sends one
replay task each. A replay first reads the sheet's id column and marks what is already
there COMPLETED (an earlier attempt may have landed before it died), then appends the
rest through the rate limiter, batch by batch, recording progress in the ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select, update

from sheetsync import crypto, ledger
from sheetsync.alerts import send_alert
from sheetsync.db import is_postgres
from sheetsync.dispatch import get_dispatcher
from sheetsync.errors import (
    CredentialError,
    NotFoundError,
    PermanentError,
    RateLimited,
    TransientError,
)
from sheetsync.flush.batches import BatchBuilder
from sheetsync.keys import BufferKey
from sheetsync.models import (
    CredentialStatus,
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
    utcnow,
)
from sheetsync.pipeline import Pipeline
from sheetsync.recovery.deadletters import mark_credential
from sheetsync.sheets.client import SheetsClient, quote_title

log = logging.getLogger(__name__)

#: A REPLAYING entry untouched this long lost its task (the worker died): claim it again.
DEFAULT_REPLAY_STALE_S = 600.0
#: Entries the dispatcher claims per beat.
DEFAULT_DISPATCH_LIMIT = 100

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ReplayResult:
    summary: str
    appended: int = 0
    retry_in_s: float | None = None


def claim_due(
    pipeline: Pipeline, *, ids: Sequence[int] | None = None, limit: int = DEFAULT_DISPATCH_LIMIT
) -> list[int]:
    """Mark due PENDING (and stale REPLAYING) entries REPLAYING; return their ids."""
    now = utcnow()
    stale = now - timedelta(seconds=DEFAULT_REPLAY_STALE_S)
    with pipeline.sessions.begin() as session:
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
            entry.updated_at = now
        return [entry.id for entry in entries]


def dispatch_due(pipeline: Pipeline) -> int:
    """The beat task: claim what is due and send one replay task per entry."""
    claimed = claim_due(pipeline)
    dispatcher = get_dispatcher()
    for entry_id in claimed:
        dispatcher.send_replay(entry_id)
    return len(claimed)


def make_due(
    pipeline: Pipeline,
    *,
    ids: Sequence[int] | None = None,
    user_id: str | None = None,
    include_failed: bool = False,
) -> list[int]:
    """Set entries due now (PENDING); FAILED ones too when asked. Returns their ids."""
    statuses = [DeadLetterStatus.PENDING]
    if include_failed:
        statuses.append(DeadLetterStatus.FAILED)
    with pipeline.sessions.begin() as session:
        query = select(DeadLetter.id).where(DeadLetter.status.in_(statuses))
        if ids is not None:
            query = query.where(DeadLetter.id.in_(list(ids)))
        if user_id is not None:
            query = query.where(DeadLetter.user_id == user_id)
        chosen = list(session.scalars(query))
        if chosen:
            session.execute(
                update(DeadLetter)
                .where(DeadLetter.id.in_(chosen))
                .values(status=DeadLetterStatus.PENDING, next_attempt_at=utcnow())
            )
    return chosen


def credential_reconnected(user_id: str, *, pipeline: Pipeline | None = None) -> list[int]:
    """The owner reconnected Google: credential VALID, their entries due now."""
    from sheetsync.pipeline import get_pipeline

    pipeline = pipeline or get_pipeline()
    with pipeline.sessions.begin() as session:
        if not mark_credential(session, user_id, CredentialStatus.VALID):
            raise NotFoundError(f"user {user_id} has no Google credential")
    return make_due(pipeline, user_id=user_id)


def replay(pipeline: Pipeline, entry_id: int, *, progress: Progress | None = None) -> ReplayResult:
    """Replay one REPLAYING entry into its sheet."""
    with pipeline.sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None or entry.status is not DeadLetterStatus.REPLAYING:
            return ReplayResult(f"entry {entry_id} is not replaying; skipped")
        key = BufferKey(entry.user_id, entry.submission_id, entry.spread_sheet_id, entry.sheet_id)
        answer_ids = list(entry.answer_ids)
        credential = session.get(GoogleCredential, entry.user_id)
        credential_ok = credential is not None and credential.status is CredentialStatus.VALID
        account, refresh_token = "", ""
        if credential is not None and credential_ok:
            account = credential.google_account_id
            refresh_token = crypto.decrypt(credential.refresh_token)
    try:
        if not credential_ok:
            raise CredentialError(f"owner {entry.user_id}'s credential is not valid")
        client = SheetsClient(
            refresh_token, settings=pipeline.settings, acquire=pipeline.limiter.acquirer(account)
        )
        appended = _Replayer(pipeline, key, client, entry_id).run(answer_ids, progress)
    except RateLimited as limited:
        _touch(pipeline, entry_id)
        return ReplayResult(f"entry {entry_id} rate limited", retry_in_s=limited.retry_after_s)
    except CredentialError as exc:
        _reschedule(pipeline, entry_id, str(exc), pipeline.settings.dlq_delay_s)
        with pipeline.sessions.begin() as session:
            mark_credential(session, key.user_id, CredentialStatus.INVALID)
        send_alert(
            f"dead letter {entry_id} (owner {key.user_id}): credential still failing; "
            f"next try in {pipeline.settings.dlq_delay_s / 86400:.0f} days"
        )
        return ReplayResult(f"entry {entry_id}: credential failed again")
    except PermanentError as exc:
        _fail(pipeline, entry_id, key, str(exc))
        return ReplayResult(f"entry {entry_id} failed permanently: {exc}")
    except TransientError as exc:
        _reschedule(pipeline, entry_id, str(exc), pipeline.settings.dlq_transient_delay_s)
        return ReplayResult(f"entry {entry_id}: transient failure, rescheduled")
    with pipeline.sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id == entry_id)
            .values(status=DeadLetterStatus.DONE, error_message=None, updated_at=utcnow())
        )
    return ReplayResult(f"entry {entry_id}: {appended} rows appended", appended=appended)


class _Replayer:
    def __init__(self, pipeline: Pipeline, key: BufferKey, client: SheetsClient, entry_id: int):
        self.p = pipeline
        self.key = key
        self.client = client
        self.entry_id = entry_id

    def run(self, answer_ids: list[str], progress: Progress | None) -> int:
        title = self._title()
        quoted = quote_title(title)
        column = self.client.read_values(self.key.spread_sheet_id, f"{quoted}!A:A")
        in_sheet = {row[0] for row in column if row}
        with self.p.sessions.begin() as session:
            states = ledger.states(session, answer_ids, self.key.spread_sheet_id, self.key.sheet_id)
            landed = [i for i in answer_ids if i in in_sheet]
            ledger.record(
                session,
                landed,
                self.key.spread_sheet_id,
                self.key.sheet_id,
                TransactionType.COMPLETED,
            )
        todo = [
            i
            for i in dict.fromkeys(answer_ids)
            if i not in in_sheet and states.get(i) is not TransactionType.COMPLETED
        ]
        header_needed = not column or not column[0]
        builder = BatchBuilder(self.p.settings, self.key)
        done, appended = len(answer_ids) - len(todo), 0
        if progress:
            progress(done, len(answer_ids))
        while todo:
            with self.p.sessions() as session:
                batch = builder.build(
                    session,
                    todo[: self.p.settings.batch_size],
                    skip=frozenset({TransactionType.COMPLETED}),
                )
            batch = batch.cut(self.p.settings.request_bytes_max, header=header_needed)
            if batch.rows:
                rows = ([batch.header] if header_needed else []) + batch.rows
                self.client.append_rows(self.key.spread_sheet_id, f"{quoted}!A1", rows)
                header_needed = False
            with self.p.sessions.begin() as session:
                ledger.record(
                    session,
                    batch.appended_ids,
                    self.key.spread_sheet_id,
                    self.key.sheet_id,
                    TransactionType.COMPLETED,
                )
                for reason, failed in batch.failures_by_reason().items():
                    ledger.record(
                        session,
                        failed,
                        self.key.spread_sheet_id,
                        self.key.sheet_id,
                        TransactionType.FAILED,
                        reason,
                    )
                session.execute(
                    update(DeadLetter)
                    .where(DeadLetter.id == self.entry_id)
                    .values(updated_at=utcnow())
                )
            appended += len(batch.rows)
            done += len(batch.consumed)
            todo = todo[len(batch.consumed) :]
            if progress:
                progress(done, len(answer_ids))
        return appended

    def _title(self) -> str:
        cached = self.p.store.sheet_cache(self.key).title
        if cached is not None:
            return cached
        title = self.client.sheet_title(self.key.spread_sheet_id, self.key.sheet_id)
        self.p.store.remember_sheet(self.key, title=title)
        return title


def _touch(pipeline: Pipeline, entry_id: int) -> None:
    with pipeline.sessions.begin() as session:
        session.execute(
            update(DeadLetter).where(DeadLetter.id == entry_id).values(updated_at=utcnow())
        )


def _reschedule(pipeline: Pipeline, entry_id: int, error: str, delay_s: float) -> None:
    now = utcnow()
    with pipeline.sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id == entry_id)
            .values(
                status=DeadLetterStatus.PENDING,
                attempts=DeadLetter.attempts + 1,
                error_message=error[:500],
                next_attempt_at=now + timedelta(seconds=delay_s),
                updated_at=now,
            )
        )


def _fail(pipeline: Pipeline, entry_id: int, key: BufferKey, error: str) -> None:
    with pipeline.sessions.begin() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return
        states = ledger.states(session, entry.answer_ids, key.spread_sheet_id, key.sheet_id)
        open_ids = [i for i in entry.answer_ids if states.get(i) is not TransactionType.COMPLETED]
        ledger.record(
            session,
            open_ids,
            key.spread_sheet_id,
            key.sheet_id,
            TransactionType.FAILED,
            error[:500],
        )
        entry.status = DeadLetterStatus.FAILED
        entry.reason = DeadLetterReason.PERMANENT
        entry.attempts += 1
        entry.error_message = error[:500]
        entry.updated_at = utcnow()
    send_alert(
        f"dead letter {entry_id} (form {key.submission_id}, spreadsheet "
        f"{key.spread_sheet_id} gid {key.sheet_id}) failed permanently: {error}"
    )
