"""One flush run of one buffer: drain the list into the sheet, exactly once.

A run claims the buffer, then: **prepare** (the owner's credential, recovery of a
batch whose append may have landed), then per batch **write** (rate-limit slot, rows,
header, write-ahead intent, ``values.append``) and **settle** (ledger, then LTRIM). A
crash between any two steps leaves the ids in the list; the next run skips what the
ledger says is settled, and a leftover intent makes it read the sheet's id column
first, so nothing is appended twice (docs/ARCHITECTURE.md, "Crash safety").

How a run that ends in an exception ends is one table, :data:`FAILURE_OUTCOMES`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import OperationalError

from sheetsync import credentials, crypto
from sheetsync.alerts import send_alert_once
from sheetsync.errors import (
    ConfigError,
    CredentialError,
    CryptoError,
    PermanentError,
    RateLimited,
    StaleRunError,
    TransientError,
)
from sheetsync.flush.batches import Batch, BatchBuilder
from sheetsync.flush.outcomes import Outcome, Tally
from sheetsync.keys import BufferKey, token_buffer
from sheetsync.ledger import SETTLED
from sheetsync.ledger import record as record_state
from sheetsync.ledger import states as ledger_states
from sheetsync.models import CredentialStatus, DeadLetterReason, GoogleCredential, TransactionType
from sheetsync.pipeline import Pipeline
from sheetsync.recovery import deadletters
from sheetsync.sheets.client import SheetsClient, quote_title

log = logging.getLogger(__name__)

#: Batches one run appends before it hands the buffer to a fresh task (fairness).
DEFAULT_BATCHES_PER_RUN = 20
#: A run may wait this long in-process for a rate-limit slot; a longer wait reschedules
#: the task, timed to wake this much before the slot frees.
DEFAULT_SLOT_LEAD_S = 0.5
#: How often a lingering run looks at the list again.
DEFAULT_LINGER_POLL_S = 0.05


def backoff_s(attempt: int, base_s: float) -> float:
    """Jittered exponential backoff: attempt 1 in [0, b), then [b·2^(n-2), b·2^(n-1))."""
    if attempt <= 1:
        return random.uniform(0, base_s)
    low = base_s * 2 ** (attempt - 2)
    return random.uniform(low, 2 * low)


def flush(pipeline: Pipeline, token: str) -> Outcome:
    """Run the flush task whose id is ``token``."""
    key = token_buffer(token)
    if not pipeline.store.claim(key, token):
        job = pipeline.store.job_state(key)
        log.info(
            "flush %s is a no-op: the buffer's job is %s (token %s)",
            token,
            job.get("state", "gone"),
            job.get("token", "-"),
        )
        return Outcome("superseded")
    run = FlushRun(pipeline, key, token)
    try:
        run.drain()
    except Exception as exc:
        return run.end_with(exc)
    return run.finish()


class FlushRun:
    """One claimed run of one buffer."""

    def __init__(self, pipeline: Pipeline, key: BufferKey, token: str) -> None:
        self.p = pipeline
        self.key = key
        self.token = token
        self.tally = Tally()
        self._client: SheetsClient | None = None
        self._google_account = ""
        self._title_from_cache = False

    # -- the run ---------------------------------------------------------------------

    def drain(self) -> None:
        """Prepare, then write and settle batches until the buffer is drained (or for
        :data:`DEFAULT_BATCHES_PER_RUN` batches, or until only a short remainder is left,
        which waits for the debounce like any new burst)."""
        self.prepare()
        for _ in range(DEFAULT_BATCHES_PER_RUN):
            batch = self.next_batch()
            if batch is None:
                return
            last_row = None
            if batch.rows:
                batch, last_row = self.write(batch)
            self.settle(batch, last_row=last_row)
            if self.p.store.buffer_length(self.key) < self.p.settings.flush_threshold:
                return

    def end_with(self, exc: Exception) -> Outcome:
        """The outcome of a run that raised ``exc``: the first matching row of the table."""
        for error_class, handler in FAILURE_OUTCOMES:
            if isinstance(exc, error_class):
                try:
                    return handler(self, exc)
                except StaleRunError:
                    return self.fenced(exc)
        raise exc

    def finish(self, countdown_s: float | None = None) -> Outcome:
        """Hand the buffer to its next task (or delete the job when the list is empty)."""
        next_task = self.p.store.finish(self.key, self.token, countdown_s=countdown_s)
        return Outcome("again" if next_task else "done", self.tally, next=next_task)

    # -- prepare -----------------------------------------------------------------------

    def prepare(self) -> None:
        self._open_client()
        self._recover()

    def _open_client(self) -> None:
        with self.p.sessions() as session:
            credential = session.get(GoogleCredential, self.key.user_id)
            if credential is None:
                raise CredentialError(f"owner {self.key.user_id} has no Google credential")
            if credential.status is not CredentialStatus.VALID:
                raise CredentialError(
                    f"owner {self.key.user_id}'s credential is {credential.status.value}"
                )
            self._google_account = credential.google_account_id
            refresh_token = crypto.decrypt(credential.refresh_token)
        self._client = SheetsClient(
            refresh_token,
            settings=self.p.settings,
            acquire=self.p.limiter.acquirer(self._google_account, DEFAULT_SLOT_LEAD_S),
        )

    @property
    def client(self) -> SheetsClient:
        assert self._client is not None
        return self._client

    def _recover(self) -> None:
        """A leftover intent: mark what of it already landed COMPLETED, then drop it."""
        intent = self.p.store.read_intent(self.key)
        if intent is None:
            return
        title = self._title()
        after = intent.after_row or 0
        self._renew()
        column = self.client.read_values(
            self.key.spread_sheet_id, f"{quote_title(title)}!A{after + 1}:A"
        )
        self.tally.requests.append("values.get")
        in_sheet = {row[0] for row in column if row}
        head = self.p.store.read_batch(self.key, intent.count)
        landed = [answer_id for answer_id in head if answer_id in in_sheet]
        log.info(
            "flush %s recovered intent: %d of %d ids had landed", self.token, len(landed), len(head)
        )
        if landed:
            with self.p.sessions.begin() as session:
                record_state(
                    session,
                    landed,
                    self.key.spread_sheet_id,
                    self.key.sheet_id,
                    TransactionType.COMPLETED,
                )
        last_row = after + len(column) if column else None
        if column and column[0] and column[0][0] == self.p.settings.header_answer_id:
            self.p.store.remember_sheet(self.key, header_ok=1)
        # Trimming nothing clears the intent; the ledger now makes the batch skip them.
        self._trim(0, last_row)

    # -- one batch: read, write, settle -------------------------------------------------

    def next_batch(self) -> Batch | None:
        """The head of the list as rows, or None when the list is empty."""
        if not self.p.store.buffer_length(self.key):
            return None
        wait = self.p.limiter.wait_s(self._google_account)
        if wait > DEFAULT_SLOT_LEAD_S:
            # Wake up a little early: the batch is built while the slot frees, and the
            # append then waits the rest (see acquirer), so no slot time is lost.
            raise RateLimited(
                "no slot for the next append", retry_after_s=wait - DEFAULT_SLOT_LEAD_S
            )
        self._linger()
        ids = self.p.store.read_batch(self.key, self.p.settings.batch_size)
        if not ids:
            return None
        with self.p.sessions() as session:
            return BatchBuilder(self.p.settings, self.key).build(session, ids)

    def _linger(self) -> None:
        """While a burst is still arriving, wait (briefly) for a fuller batch.

        A promoted run starts at 500 ids; if thousands more are on their way, sending
        what is there now would spend an append (and a rate-limit slot) on a fraction
        of a batch. Waits only while the list keeps growing, up to FLUSH_LINGER_S.
        """
        settings = self.p.settings
        deadline = time.monotonic() + settings.flush_linger_s
        length = self.p.store.buffer_length(self.key)
        while length < settings.batch_size and time.monotonic() < deadline:
            time.sleep(DEFAULT_LINGER_POLL_S)
            grown = self.p.store.buffer_length(self.key)
            if grown == length:
                return
            length = grown

    def write(self, batch: Batch) -> tuple[Batch, int | None]:
        """Append the batch (cut to the request size), after its write-ahead intent.

        Returns the part that was sent and the sheet's last row after it.
        """
        title = self._title()
        header_needed = self._header_needed(title)
        batch = batch.cut(self.p.settings.request_bytes_max, header=header_needed)
        rows = ([batch.header] if header_needed else []) + batch.rows
        cache = self.p.store.sheet_cache(self.key)
        if not self.p.store.write_intent(self.key, self.token, batch.consumed, cache.last_row):
            raise StaleRunError(f"{self.token} no longer holds its buffer")
        try:
            result = self.client.append_rows(
                self.key.spread_sheet_id, f"{quote_title(title)}!A1", rows
            )
        except (RateLimited, PermanentError) as exc:
            self._trim(0, None)  # nothing was sent, or nothing landed: drop the intent
            raise exc from None
        except TransientError as exc:
            if not exc.ambiguous:
                self._trim(0, None)
            raise
        self.tally.requests.append("values.append")
        if header_needed:
            self.p.store.remember_sheet(self.key, header_ok=1)
        self.tally.appended += len(batch.rows)
        return batch, result.last_row

    def _title(self) -> str:
        cache = self.p.store.sheet_cache(self.key)
        if cache.title is not None:
            self._title_from_cache = True
            return cache.title
        self._renew()
        title = self.client.sheet_title(self.key.spread_sheet_id, self.key.sheet_id)
        self.tally.requests.append("spreadsheets.get")
        self.p.store.remember_sheet(self.key, title=title)
        return title

    def _header_needed(self, title: str) -> bool:
        """Whether row 1 is empty, so this append must bring the header (read once)."""
        cache = self.p.store.sheet_cache(self.key)
        if cache.header_ok is not None:
            return not cache.header_ok
        self._renew()
        first_row = self.client.read_values(self.key.spread_sheet_id, f"{quote_title(title)}!1:1")
        self.tally.requests.append("values.get")
        # Remembered either way, so a rate-limited append does not read row 1 again.
        self.p.store.remember_sheet(self.key, header_ok=1 if first_row else 0)
        return not first_row

    def settle(self, batch: Batch, *, last_row: int | None) -> None:
        """Record the batch in the ledger, then trim it off the list."""
        with self.p.sessions.begin() as session:
            record_state(
                session,
                batch.appended_ids,
                self.key.spread_sheet_id,
                self.key.sheet_id,
                TransactionType.COMPLETED,
            )
            for reason, answer_ids in batch.failures_by_reason().items():
                record_state(
                    session,
                    answer_ids,
                    self.key.spread_sheet_id,
                    self.key.sheet_id,
                    TransactionType.FAILED,
                    reason,
                )
        self.tally.failed += len(batch.failed)
        self._trim(len(batch.consumed), last_row)

    def _renew(self) -> None:
        if not self.p.store.renew(self.key, self.token):
            raise StaleRunError(f"{self.token} no longer holds its buffer")

    def _trim(self, count: int, last_row: int | None) -> None:
        if self.p.store.trim(self.key, self.token, count, last_row) < 0:
            raise StaleRunError(f"{self.token} no longer holds its buffer")

    # -- how a failed run ends ---------------------------------------------------------

    def fenced(self, _exc: Exception) -> Outcome:
        log.warning("flush %s lost its lease; stopping", self.token)
        return Outcome("fenced", self.tally)

    def at_next_slot(self, exc: RateLimited) -> Outcome:
        return self.finish(countdown_s=exc.retry_after_s)

    def park_credential(self, exc: CredentialError) -> Outcome:
        self._park_buffer(DeadLetterReason.CREDENTIAL, str(exc))
        return self.finish()

    def permanent(self, exc: PermanentError) -> Outcome:
        if self._title_from_cache and exc.status == 400:
            # Most likely the tab was renamed since we cached its title: forget it and
            # run again at once; a gid that is really gone fails for good then.
            log.warning("flush %s: %s; looking the sheet up again", self.token, exc)
            self.p.store.forget_sheet(self.key, "title", "header_ok")
            return self.finish(countdown_s=0)
        self._park_buffer(DeadLetterReason.PERMANENT, str(exc))
        return self.finish()

    def retry(self, exc: TransientError) -> Outcome:
        """Retry with backoff; after RETRY_MAX failures in a row, park the buffer."""
        settings = self.p.settings
        failures = self.p.store.attempts(self.key) + 1
        if failures > settings.retry_max:
            self._park_buffer(
                DeadLetterReason.TRANSIENT_EXHAUSTED, f"{failures} tries failed: {exc}"
            )
            return self.finish()
        delay = backoff_s(failures, settings.retry_base_s)
        if exc.ambiguous:
            # A request we gave up on may still be running at Google; give it time to
            # finish before the next run reads the sheet to see whether it landed.
            delay = max(delay, settings.google_timeout_s)
        if self.p.store.release(self.key, self.token, delay) < 0:
            return self.fenced(exc)
        return Outcome("retry", self.tally, retry_in_s=delay, error=exc)

    def retry_database(self, exc: OperationalError) -> Outcome:
        return self.retry(TransientError(f"database unavailable: {type(exc).__name__}"))

    def retry_configuration(self, exc: ConfigError | CryptoError) -> Outcome:
        # A missing setting or PII key: retried like a transient failure, so it ends in
        # a dead letter with an alert that names it, and nothing is lost.
        log.error("flush %s: %s", self.token, exc)
        return self.retry(TransientError(str(exc)))

    def _park_buffer(self, reason: DeadLetterReason, message: str) -> None:
        """Move every unsettled id of the buffer to a dead letter, then trim them."""
        ids = self.p.store.read_all(self.key)
        settings = self.p.settings
        delay = (
            settings.dlq_transient_delay_s
            if reason is DeadLetterReason.TRANSIENT_EXHAUSTED
            else settings.dlq_delay_s
        )
        with self.p.sessions.begin() as session:
            settled = ledger_states(session, ids, self.key.spread_sheet_id, self.key.sheet_id)
            pending = list(dict.fromkeys(i for i in ids if settled.get(i) not in SETTLED))
            deadletters.park(session, self.key, pending, reason, message, delay_s=delay)
            if reason is DeadLetterReason.CREDENTIAL:
                credentials.mark(session, self.key.user_id, CredentialStatus.INVALID)
        self._trim(len(ids), None)
        self.tally.parked += len(pending)
        if pending:
            send_alert_once(
                self.p.redis,
                f"{reason.value}:{self.key.base}",
                f"{reason.value}: {len(pending)} answers of form {self.key.submission_id} for "
                f"spreadsheet {self.key.spread_sheet_id} (gid {self.key.sheet_id}, owner "
                f"{self.key.user_id}) moved to a dead letter: {message}",
                settings=settings,
            )


#: How a run that raised ends: the first row whose class matches decides. A handler
#: that finds the run fenced (a newer run took the buffer) ends it as ``fenced``.
FAILURE_OUTCOMES: tuple[tuple[type[Exception], Callable[[FlushRun, Any], Outcome]], ...] = (
    (StaleRunError, FlushRun.fenced),
    (RateLimited, FlushRun.at_next_slot),
    (CredentialError, FlushRun.park_credential),
    (PermanentError, FlushRun.permanent),
    (TransientError, FlushRun.retry),
    (OperationalError, FlushRun.retry_database),
    (ConfigError, FlushRun.retry_configuration),
    (CryptoError, FlushRun.retry_configuration),
)
