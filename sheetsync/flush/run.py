"""One flush run of one buffer (SPEC 3.4): drain the list into the sheet, exactly once.

Per batch: LRANGE → hydrate and build rows → header check → rate-limit slot →
write-ahead intent → values.append → ledger COMPLETED → LTRIM + clear intent.
A crash between any two steps leaves the ids in the list; the next run skips what the
ledger says is settled, and a leftover intent makes it read the sheet's id column
first, so nothing is appended twice.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy.exc import OperationalError

from sheetsync import crypto
from sheetsync.alerts import send_alert_once
from sheetsync.buffers.store import Dispatch
from sheetsync.errors import (
    ConfigError,
    CredentialError,
    CryptoError,
    PermanentError,
    RateLimited,
    SheetsError,
    StaleRunError,
    TransientError,
)
from sheetsync.flush.batches import Batch, BatchBuilder
from sheetsync.keys import BufferKey, token_buffer
from sheetsync.ledger import SETTLED
from sheetsync.ledger import record as record_state
from sheetsync.ledger import states as ledger_states
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    GoogleCredential,
    TransactionType,
)
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

Status = Literal["done", "again", "superseded", "fenced", "retry"]


@dataclass
class Outcome:
    """What the task must do after a run: send ``next``, or retry in ``retry_in_s``."""

    status: Status
    next: Dispatch | None = None
    retry_in_s: float | None = None
    error: SheetsError | None = None
    appended: int = 0
    parked: int = 0
    failed: int = 0
    requests: list[str] = field(default_factory=list)


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
    return _Run(pipeline, key, token).run()


class _Run:
    def __init__(self, pipeline: Pipeline, key: BufferKey, token: str) -> None:
        self.p = pipeline
        self.key = key
        self.token = token
        self.outcome = Outcome("done")
        self._client: SheetsClient | None = None
        self._google_account: str | None = None
        self._title_from_cache = False

    def run(self) -> Outcome:
        try:
            return self._run()
        except StaleRunError:
            log.warning("flush %s lost its lease; stopping", self.token)
            self.outcome.status = "fenced"
            return self.outcome

    def _run(self) -> Outcome:
        try:
            self._check_credential()
            self._recover()
            for _ in range(DEFAULT_BATCHES_PER_RUN):
                if not self._flush_one_batch():
                    break
                if self.p.store.buffer_length(self.key) < self.p.settings.flush_threshold:
                    # A short remainder waits for the debounce (or the threshold) like any
                    # new burst, instead of costing an append (and a slot) per trickle.
                    break
        except RateLimited as limited:
            return self._finish(countdown_s=limited.retry_after_s)
        except CredentialError as exc:
            self._park_buffer(DeadLetterReason.CREDENTIAL, str(exc))
        except PermanentError as exc:
            if self._title_from_cache and exc.status == 400:
                # Most likely the tab was renamed since we cached its title: forget it
                # and run again at once; a gid that is really gone fails for good then.
                log.warning("flush %s: %s; looking the sheet up again", self.token, exc)
                self.p.store.forget_sheet(self.key, "title", "header_ok")
                return self._finish(countdown_s=0)
            self._park_buffer(DeadLetterReason.PERMANENT, str(exc))
        except TransientError as exc:
            return self._transient(exc)
        except OperationalError as exc:
            return self._transient(TransientError(f"database unavailable: {type(exc).__name__}"))
        except (ConfigError, CryptoError) as exc:
            # A missing setting or PII key: retried like a transient failure, so it ends
            # in a dead letter with an alert that names it, and nothing is lost.
            log.error("flush %s: %s", self.token, exc)
            return self._transient(TransientError(str(exc)))
        return self._finish()

    # -- setup -----------------------------------------------------------------------------

    def _check_credential(self) -> None:
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

    def _title(self) -> str:
        cache = self.p.store.sheet_cache(self.key)
        if cache.title is not None:
            self._title_from_cache = True
            return cache.title
        self._renew()
        title = self.client.sheet_title(self.key.spread_sheet_id, self.key.sheet_id)
        self.outcome.requests.append("spreadsheets.get")
        self.p.store.remember_sheet(self.key, title=title)
        return title

    def _renew(self) -> None:
        if not self.p.store.renew(self.key, self.token):
            raise StaleRunError(f"{self.token} no longer holds its buffer")

    # -- recovery (SPEC 3.4 step 7) ------------------------------------------------------

    def _recover(self) -> None:
        intent = self.p.store.read_intent(self.key)
        if intent is None:
            return
        title = self._title()
        after = intent.after_row or 0
        self._renew()
        column = self.client.read_values(
            self.key.spread_sheet_id, f"{quote_title(title)}!A{after + 1}:A"
        )
        self.outcome.requests.append("values.get")
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

    # -- one batch -----------------------------------------------------------------------

    def _flush_one_batch(self) -> bool:
        if not self.p.store.buffer_length(self.key):
            return False
        assert self._google_account is not None
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
            return False
        builder = BatchBuilder(self.p.settings, self.key)
        with self.p.sessions() as session:
            batch = builder.build(session, ids)
        if not batch.rows:
            self._settle(batch, last_row=None)
            return True
        title = self._title()
        cache = self.p.store.sheet_cache(self.key)
        header_needed = cache.header_ok is False
        if cache.header_ok is None:
            self._renew()
            first_row = self.client.read_values(
                self.key.spread_sheet_id, f"{quote_title(title)}!1:1"
            )
            self.outcome.requests.append("values.get")
            header_needed = not first_row
            # Remembered either way, so a rate-limited append does not read row 1 again.
            self.p.store.remember_sheet(self.key, header_ok=0 if header_needed else 1)
        batch = batch.cut(self.p.settings.request_bytes_max, header=header_needed)
        rows = ([batch.header] if header_needed else []) + batch.rows
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
        self.outcome.requests.append("values.append")
        if header_needed:
            self.p.store.remember_sheet(self.key, header_ok=1)
        self._settle(batch, last_row=result.last_row)
        self.outcome.appended += len(batch.rows)
        return True

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

    def _settle(self, batch: Batch, *, last_row: int | None) -> None:
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
        self.outcome.failed += len(batch.failed)
        self._trim(len(batch.consumed), last_row)

    def _trim(self, count: int, last_row: int | None) -> None:
        if self.p.store.trim(self.key, self.token, count, last_row) < 0:
            raise StaleRunError(f"{self.token} no longer holds its buffer")

    # -- failures --------------------------------------------------------------------------

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
                deadletters.mark_credential(session, self.key.user_id, CredentialStatus.INVALID)
        self._trim(len(ids), None)
        self.outcome.parked += len(pending)
        if pending:
            send_alert_once(
                self.p.redis,
                f"{reason.value}:{self.key.base}",
                f"{reason.value}: {len(pending)} answers of form {self.key.submission_id} for "
                f"spreadsheet {self.key.spread_sheet_id} (gid {self.key.sheet_id}, owner "
                f"{self.key.user_id}) moved to a dead letter: {message}",
                settings=settings,
            )

    def _transient(self, exc: TransientError) -> Outcome:
        settings = self.p.settings
        failures = self.p.store.attempts(self.key) + 1
        if failures > settings.retry_max:
            try:
                self._park_buffer(
                    DeadLetterReason.TRANSIENT_EXHAUSTED, f"{failures} tries failed: {exc}"
                )
            except StaleRunError:
                self.outcome.status = "fenced"
                return self.outcome
            return self._finish()
        delay = backoff_s(failures, settings.retry_base_s)
        if exc.ambiguous:
            # A request we gave up on may still be running at Google; give it time to
            # finish before the next run reads the sheet to see whether it landed.
            delay = max(delay, settings.google_timeout_s)
        if self.p.store.release(self.key, self.token, delay) < 0:
            self.outcome.status = "fenced"
            return self.outcome
        self.outcome.status = "retry"
        self.outcome.retry_in_s = delay
        self.outcome.error = exc
        return self.outcome

    def _finish(self, countdown_s: float | None = None) -> Outcome:
        self.outcome.next = self.p.store.finish(self.key, self.token, countdown_s=countdown_s)
        if self.outcome.status == "done" and self.outcome.next is not None:
            self.outcome.status = "again"
        return self.outcome
