"""Dead-letter replay: due entries go back to the sheet, exactly once.

The beat dispatcher claims due PENDING entries (:func:`deadletters.claim_due`) and sends
one replay task each. A replay first reads the sheet's id column and marks what is already
there COMPLETED (an earlier attempt may have landed before it died), then appends the
rest through the rate limiter, batch by batch, recording progress in the ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sheetsync import credentials, crypto, ledger
from sheetsync.alerts import send_alert
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
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
)
from sheetsync.pipeline import Pipeline
from sheetsync.recovery import deadletters
from sheetsync.sheets.client import SheetsClient, quote_title

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ReplayResult:
    summary: str
    appended: int = 0
    retry_in_s: float | None = None


def credential_reconnected(user_id: str, *, pipeline: Pipeline | None = None) -> list[int]:
    """The owner reconnected Google: credential VALID, their dead letters due now.

    Returns the ids of the dead letters made due.
    """
    from sheetsync.pipeline import get_pipeline

    pipeline = pipeline or get_pipeline()
    with pipeline.sessions.begin() as session:
        if not credentials.mark(session, user_id, CredentialStatus.VALID):
            raise NotFoundError(f"user {user_id} has no Google credential")
    return deadletters.make_due(pipeline.sessions, user_id=user_id)


def dispatch_due(pipeline: Pipeline) -> int:
    """The beat task: claim what is due and send one replay task per entry."""
    claimed = deadletters.claim_due(pipeline.sessions)
    dispatcher = get_dispatcher()
    for entry_id in claimed:
        dispatcher.send_replay(entry_id)
    return len(claimed)


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
        deadletters.touch(pipeline.sessions, entry_id)
        return ReplayResult(f"entry {entry_id} rate limited", retry_in_s=limited.retry_after_s)
    except CredentialError as exc:
        deadletters.reschedule(pipeline.sessions, entry_id, str(exc), pipeline.settings.dlq_delay_s)
        with pipeline.sessions.begin() as session:
            credentials.mark(session, key.user_id, CredentialStatus.INVALID)
        send_alert(
            f"dead letter {entry_id} (owner {key.user_id}): credential still failing; "
            f"next try in {pipeline.settings.dlq_delay_s / 86400:.0f} days"
        )
        return ReplayResult(f"entry {entry_id}: credential failed again")
    except PermanentError as exc:
        deadletters.fail(pipeline.sessions, entry_id, str(exc))
        send_alert(
            f"dead letter {entry_id} (form {key.submission_id}, spreadsheet "
            f"{key.spread_sheet_id} gid {key.sheet_id}) failed permanently: {exc}"
        )
        return ReplayResult(f"entry {entry_id} failed permanently: {exc}")
    except TransientError as exc:
        deadletters.reschedule(
            pipeline.sessions, entry_id, str(exc), pipeline.settings.dlq_transient_delay_s
        )
        return ReplayResult(f"entry {entry_id}: transient failure, rescheduled")
    deadletters.mark_done(pipeline.sessions, entry_id)
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
            deadletters.touch(self.p.sessions, self.entry_id)
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
